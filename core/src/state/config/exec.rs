//! `[exec]`: the command sessions of a context (`exec_command`, `write_stdin`,
//! `close_context`; docs/sessions.md).

use serde::{Deserialize, Serialize};

/// Whether each command waits for an approval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecApproval {
    /// Never: a command runs inside its skill's envelope (or none), no wider than a tool.
    #[default]
    Never,
    /// Every `exec_command` waits for an operator's approval, as a `write` tool does.
    Always,
}

/// `[exec]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecSection {
    /// The three built-ins exist (default true); false removes them from every context.
    pub enabled: bool,
    /// Whether each command waits for an approval (default `never`).
    pub approval: ExecApproval,
    /// Sessions running at once in one context (default 4).
    pub max_sessions_per_context: usize,
    /// A session nobody wrote to or polled for this long ends (default 10 minutes).
    pub idle_timeout_ms: u64,
    /// A session ends this long after it started (default 1 hour).
    pub lifetime_ms: u64,
    /// Output kept between two answers, head and tail (default 1 MiB).
    pub output_kept_bytes: u64,
    /// Most output in one answer when the call does not say (default 64 KiB).
    pub max_output_bytes: u64,
    /// Memory of a session's processes in MiB when its skill does not say (default 512).
    pub memory_mb: u64,
    /// After a `write_stdin`, how long output must stay quiet before the answer goes when
    /// the session is not seen waiting for input sooner (default 2 ms; 1 - 1000).
    pub quiet_ms: u64,
}

/// What `[exec] quiet_ms` may be.
pub const QUIET_MS_RANGE: (u64, u64) = (1, 1000);

impl ExecSection {
    /// The keys with a range, as the load checks them.
    pub(crate) fn ranges(&self) -> Vec<super::KeyRange> {
        let (lo, hi) = QUIET_MS_RANGE;
        vec![("exec.quiet_ms", self.quiet_ms as f64, lo as f64, hi as f64)]
    }
}

impl Default for ExecSection {
    fn default() -> Self {
        Self {
            enabled: true,
            approval: ExecApproval::Never,
            max_sessions_per_context: 4,
            idle_timeout_ms: 10 * 60 * 1000,
            lifetime_ms: 60 * 60 * 1000,
            output_kept_bytes: 1024 * 1024,
            max_output_bytes: 64 * 1024,
            memory_mb: 512,
            quiet_ms: skillbox_protocol::session::DEFAULT_QUIET_MS,
        }
    }
}

/// Default `yield_ms` of `exec_command` and `write_stdin`.
pub const DEFAULT_YIELD_MS: u64 = 1000;
/// Largest `yield_ms`.
pub const MAX_YIELD_MS: u64 = 30_000;
