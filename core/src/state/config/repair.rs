//! `[repair]`: the budget of skill repairs and their eligibility thresholds (the routing
//! spec §11–13; the checks are [`crate::repair`]).

use serde::{Deserialize, Serialize};

/// `[repair]` of `skillbox.toml`: the budget and the eligibility thresholds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RepairConfig {
    /// Repair attempts one run may make on one skill.
    pub attempts_per_run: u32,
    /// Files one attempt may change.
    pub files_per_attempt: usize,
    /// Hunks one attempt may contain.
    pub hunks_per_attempt: usize,
    /// Words one attempt may add to `SKILL.md` and `references/**`.
    pub added_doc_tokens: usize,
    /// Least share of the task done before a repair is worth trying (0–1).
    pub min_task_progress: f64,
    /// Most root causes a repairable failure may have.
    pub max_root_causes: u32,
}

impl Default for RepairConfig {
    fn default() -> Self {
        Self {
            attempts_per_run: 2,
            files_per_attempt: 3,
            hunks_per_attempt: 8,
            added_doc_tokens: 300,
            min_task_progress: 0.70,
            max_root_causes: 1,
        }
    }
}
