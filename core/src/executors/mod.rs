//! Where tool calls run, seen from the core: the [`pool`] of executors the core sends calls
//! to over the channel (health rounds, DNS discovery, round robin), their supervision in
//! Docker ([`docker`]: the executor containers' supervisor and the one-off containers of
//! `execution.sandbox: container` skills), and the [`availability`] of a skill as the
//! executors' sandboxes report it.

pub mod availability;
pub mod docker;
pub mod pool;

pub use pool::ExecutorPool;
