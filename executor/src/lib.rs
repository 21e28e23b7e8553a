//! skillbox executor: holds no secrets and runs every tool call as a fresh process in a
//! kernel-enforced sandbox.
//!
//! - [`sandbox`]: the launcher and the rules it applies (Landlock, seccomp, capabilities,
//!   rlimits, the env allowlist, process lifetime), and the kernel probe.
//! - [`stdio`]: the tool stdio protocols of docs/skill-format.md (`jsonrpc`, `plain`).
//! - [`broker`]: where a tool's capability requests go (the core, or nowhere in one-shot mode).
//! - [`egress`]: a network call's connections carried to the core's egress proxy.
//! - [`relay`]: `exec --stdio`, one call whose request and capability traffic go over the
//!   executor's own stdin/stdout (a one-off container the core attaches to).
//! - [`registry`]: the skills this executor can run, with compiled argument schemas.
//! - [`launch`]: the one launch of every process (tool call, session, dependency build):
//!   a plan, then the sandbox, the files and the spawn.
//! - [`call`]: one tool call from arguments to [`skillbox_protocol::result::ToolResult`].
//! - [`drain`]: stopping without failing a call (SIGTERM: refuse new calls, finish held ones).
//! - [`warm`]: prestarted tool processes (`execution.prestart`).
//! - [`workdir`]: a call's working folder from its context: laid out, then sent back.
//! - [`blobs`]: the executor's cache of context files by SHA-256, shared by every call.

pub mod availability;
pub mod blobs;
pub mod broker;
pub mod call;
mod call_clock;
pub mod call_error;
pub mod deps;
pub mod drain;
pub mod egress;
mod exit_cause;
pub mod launch;
pub mod registry;
pub mod relay;
pub mod sandbox;
pub mod script;
pub mod script_facts;
pub mod server;
pub mod session;
pub mod stdio;
pub mod warm;
pub mod workdir;
