//! Where tool calls run, seen from the core: the [`pool`] of executors the core sends calls
//! to over the channel (health rounds, DNS discovery, round robin), their supervision in
//! Docker ([`docker`]: the executor containers' supervisor and the one-off containers of
//! `execution.sandbox: container` skills), and whether a skill can run: the one verdict
//! ([`readiness`]) over what the executors' sandboxes report ([`availability`]).

pub mod availability;
pub mod docker;
pub mod pool;
pub mod readiness;

pub use pool::ExecutorPool;
