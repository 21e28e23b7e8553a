//! skillbox core: holds every secret, discovers and verifies skills, routes queries,
//! serves bots, and forwards tool calls to the executor. The `skillbox` CLI is the thin
//! binary crate `skillbox-cli` over this library.
//!
//! The layers, outside in:
//! - [`app`]: the program's wiring, `App::build` and `App::serve` (`skillbox up`/`serve`).
//! - [`auth`]: the operator and bot roles, bot tokens, who asked for a call.
//! - [`gateway`]: HTTP for bots, agents and operators (a route table, one file per resource;
//!   the operator console under `/console/`).
//! - [`router`] and [`contexts`]: which skills a query activates; what a conversation pinned.
//! - [`calls`]: the one call pipeline (admit → approve → dispatch → record), the calls in
//!   flight and the callbacks a running tool makes; [`approvals`] it waits on.
//! - [`proxy`]: `fetch`, `sign` and `readFile` performed for a skill after its permissions.
//! - [`executors`]: the executor pool and the Docker supervisors; skill availability.
//! - [`skills`]: install and remove skills, the roots, stamps (and the kill list).
//! - [`reload`]: the one reload of skills, trust and secrets, and the watch that runs it.
//! - [`repair`]: proposed fixes to a skill's manifest.
//! - [`state`]: the workspace's paths, config, PKI, secrets and the SQLite store.
//! - [`observe`]: the metrics every layer counts into, the log format, trace context.

pub mod app;
pub mod approvals;
pub mod auth;
pub mod calls;
pub mod contexts;
pub mod deps;
pub mod executors;
pub mod gateway;
pub mod observe;
pub mod proxy;
pub mod random;
pub mod reload;
pub mod repair;
pub mod router;
pub mod skills;
pub mod state;
