//! Wire types and the skill model shared by the skillbox core and executor.
//!
//! - [`jsonrpc`]: the JSON-RPC 2.0 envelope, error codes, and a bounded decoder.
//! - [`methods`]: the name of every method, and params and results of each under one path
//!   (docs/skill-format.md for tool stdio, docs/architecture.md for core ↔ executor), from
//!   the files of each job: [`capability`] (a tool's requests and their forwarding),
//!   [`execute`] (`tool.execute`), [`envelope`] (what a tool call and a session carry of
//!   their skill's envelope, [`envelope::Envelope`]), [`status`] (`tool.list`,
//!   `skill.reload`, `health`), [`deps_build`] (`deps.build`).
//! - `ndjson` (feature `ndjson`): bounded newline-delimited framing over tokio I/O.
//! - [`result`]: the result of one tool call (docs/http-api.md) and its `error_kind`.
//! - [`workdir`]: a context's files as they travel with a call; [`session`]: command
//!   sessions (`exec_command`).
//! - [`rpc`]: [`rpc::RpcMethod`], each channel method paired with its params and result.
//! - [`tool_ref`]: [`ToolRef`], the `skill:tool` name of a tool; [`target`]: [`Target`],
//!   what a call names (a tool or a built-in).
//! - [`skill`]: the one model of a loaded skill, its three loaders (`SKILL.md`,
//!   `skill.yaml`, `package.json`), validation and discovery over several roots.
//!
//! Nothing here performs I/O beyond reading skill folders; nothing here holds secrets.
#![forbid(unsafe_code)]

pub mod capability;
pub mod deps_build;
pub mod envelope;
pub mod execute;
pub mod jsonrpc;
pub mod methods;
#[cfg(feature = "ndjson")]
pub mod ndjson;
pub mod result;
pub mod rpc;
pub mod session;
pub mod skill;
pub mod status;
pub mod target;
pub mod tool_ref;
pub mod workdir;

pub use target::Target;
pub use tool_ref::{ToolRef, ToolRefError};
