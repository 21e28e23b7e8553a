//! `[approvals]`: the operator's approval policy, read as it is (the approvals themselves
//! are [`crate::approvals`]).

use serde::{Deserialize, Serialize};
use skillbox_protocol::ToolRef;

/// The default of `allow_max_minutes`: an hour.
pub const DEFAULT_MAX_MINUTES: u64 = 60;

/// The default of `allow_max_entries`.
pub const DEFAULT_MAX_ENTRIES: usize = 16;

/// The default time a call waits for a decision: two minutes.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;

/// The operator's approval policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalPolicy {
    /// Calls approved without asking: `"skill:tool"` or `"skill:*"`.
    pub auto_approve: Vec<String>,
    /// How long a call waits for a decision before its approval expires.
    pub timeout_ms: u64,
    /// Longest "allow this tool for N minutes" an operator may set in the console.
    pub allow_max_minutes: u64,
    /// Such allowances in force at once.
    pub allow_max_entries: usize,
    /// Whether a bot may decide an approval of a `write` call it made itself (relaying
    /// its user's confirmation). Never a `sign` call.
    pub bots_confirm_write: bool,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        ApprovalPolicy {
            auto_approve: Vec::new(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            allow_max_minutes: DEFAULT_MAX_MINUTES,
            allow_max_entries: DEFAULT_MAX_ENTRIES,
            bots_confirm_write: false,
        }
    }
}

impl ApprovalPolicy {
    /// Whether the policy approves every call of `skill:tool`.
    pub fn auto_approves(&self, skill: &str, tool: &str) -> bool {
        self.auto_approve.iter().any(|pattern| {
            ToolRef::parse(pattern)
                .is_ok_and(|p| p.skill == skill && (p.tool == tool || p.tool == "*"))
        })
    }
}
