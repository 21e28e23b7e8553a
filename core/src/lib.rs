//! skillbox core: holds every secret, discovers and verifies skills, routes queries,
//! serves bots, and forwards tool calls to the executor. This crate is also the
//! `skillbox` CLI (see [`cli`]).

pub mod approvals;
pub mod availability;
pub mod callbacks;
pub mod calls;
pub mod cli;
pub mod config;
pub mod contexts;
pub mod docker;
pub mod executors;
pub mod gateway;
pub mod install;
pub mod observe;
pub mod pki;
pub mod proxy;
pub mod random;
pub mod reload;
pub mod repair;
pub mod roots;
pub mod router;
pub mod secrets;
pub mod state;
pub mod store;
pub mod watch;
