//! Phase 2: the score of a candidate (routing spec §6.2) and the settings that shape it.
//!
//! `score = 0.40 intent_match + 0.20 trigger_match + 0.15 success_rate +
//! 0.10 context_readiness + 0.10 cost_penalty + 0.05 conflict_penalty`, each term in
//! [0, 1] except the conflict term, where higher is always better for the skill:
//! - `intent_match`: BM25 score `s` calibrated as `s / (s + intent_half * rare_idf)`, where
//!   `rare_idf` is the IDF of a word found in one skill only. One rare word matched once
//!   in a description of average length gives `1 / (1 + intent_half)`, two give about
//!   `2 / (2 + intent_half)`; common words count for less. Dividing by `rare_idf` keeps
//!   the scale when the catalogue grows (IDF grows with log N).
//! - `trigger_match`: 1.0 forced, 0.9 rule (a trigger hit), 0.6 semantic only.
//! - `success_rate`: successes / calls from the stats store, pulled towards the 0.5 prior
//!   for the first `cold_start_calls` calls (weight n / N on the observed rate), so a new
//!   skill can neither dominate after three lucky calls nor be buried by two failures.
//! - `context_readiness`: share of prerequisites satisfied (each bin, the any-bins group,
//!   each env value, the OS); anything short of 1.0 also makes the skill unavailable.
//! - `cost_penalty`: low 1.0, medium 0.6, high 0.3, none declared 0.8 (unknown cost is
//!   assumed a little worse than low and better than medium).
//! - `conflict_penalty`: 1.0 without conflict, -1.0 on an anti-trigger hit; beyond the
//!   term, a hit vetoes the skill unless it was forced (the user's word comes first).

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use skillbox_protocol::skill::{CostHint, Skill};

/// `[routing]` in `skillbox.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RoutingConfig {
    /// The weights of the six terms.
    pub weights: Weights,
    /// A skill is selected when its score reaches this (forced skills skip it).
    pub threshold: f64,
    /// Semantic recall depth.
    pub top_k: usize,
    /// Intent calibration: the BM25 score, in units of a rare word's IDF, at which
    /// `intent_match` is 0.5.
    pub intent_half: f64,
    /// Calls of a skill before its own success rate counts in full.
    pub cold_start_calls: u64,
    /// Largest parallel group.
    pub max_parallel: usize,
    /// Most same-intent skills in a fallback chain.
    pub max_fallback_skills: usize,
    /// Expand Chinese queries with the English words of the built-in lexicon.
    pub cross_lingual: bool,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        Self {
            weights: Weights::default(),
            threshold: 0.65,
            top_k: 3,
            intent_half: 0.5,
            cold_start_calls: 20,
            max_parallel: 2,
            max_fallback_skills: 2,
            cross_lingual: true,
        }
    }
}

/// `[routing.weights]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Weights {
    /// Query against name, description and triggers.
    pub intent_match: f64,
    /// How the skill was recalled.
    pub trigger_match: f64,
    /// Past calls.
    pub success_rate: f64,
    /// Prerequisites satisfied.
    pub context_readiness: f64,
    /// Declared cost.
    pub cost_penalty: f64,
    /// Anti-trigger conflict.
    pub conflict_penalty: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            intent_match: 0.40,
            trigger_match: 0.20,
            success_rate: 0.15,
            context_readiness: 0.10,
            cost_penalty: 0.10,
            conflict_penalty: 0.05,
        }
    }
}

/// The six terms of one candidate, plus the raw BM25 score behind `intent_match`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Breakdown {
    /// Calibrated semantic similarity.
    pub intent_match: f64,
    /// 1.0 forced, 0.9 rule, 0.6 semantic.
    pub trigger_match: f64,
    /// Smoothed success rate.
    pub success_rate: f64,
    /// Share of prerequisites satisfied.
    pub context_readiness: f64,
    /// From `cost_hint`.
    pub cost_penalty: f64,
    /// 1.0, or -1.0 on an anti-trigger hit.
    pub conflict_penalty: f64,
    /// Raw BM25 score.
    pub bm25: f64,
}

impl Weights {
    /// The weighted sum, clamped to [0, 1].
    pub fn total(&self, b: &Breakdown) -> f64 {
        (self.intent_match * b.intent_match
            + self.trigger_match * b.trigger_match
            + self.success_rate * b.success_rate
            + self.context_readiness * b.context_readiness
            + self.cost_penalty * b.cost_penalty
            + self.conflict_penalty * b.conflict_penalty)
            .clamp(0.0, 1.0)
    }
}

/// `intent_match` from a BM25 score (see the module doc).
pub fn intent_match(bm25: f64, rare_idf: f64, intent_half: f64) -> f64 {
    if bm25 <= 0.0 {
        return 0.0;
    }
    bm25 / (bm25 + intent_half.max(f64::EPSILON) * rare_idf)
}

/// A skill's call counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CallCounts {
    /// Calls that succeeded.
    pub successes: u64,
    /// Calls that failed.
    pub failures: u64,
}

/// Call counts by skill name.
pub type StatsMap = HashMap<String, CallCounts>;

/// The success rate with the 0.5 prior and cold-start protection.
pub fn success_rate(counts: Option<CallCounts>, cold_start_calls: u64) -> f64 {
    const PRIOR: f64 = 0.5;
    let Some(c) = counts else {
        return PRIOR;
    };
    let n = c.successes + c.failures;
    if n == 0 {
        return PRIOR;
    }
    let observed = c.successes as f64 / n as f64;
    let trust = if cold_start_calls == 0 {
        1.0
    } else {
        (n as f64 / cold_start_calls as f64).min(1.0)
    };
    PRIOR + (observed - PRIOR) * trust
}

/// `cost_penalty` from `cost_hint`.
pub fn cost_penalty(hint: Option<CostHint>) -> f64 {
    match hint {
        Some(CostHint::Low) => 1.0,
        Some(CostHint::Medium) => 0.6,
        Some(CostHint::High) => 0.3,
        None => 0.8,
    }
}

/// Cost units of a skill in a plan's estimate (low 1, medium 2, high 3, none 2).
pub fn cost_units(hint: Option<CostHint>) -> u32 {
    match hint {
        Some(CostHint::Low) => 1,
        Some(CostHint::Medium) | None => 2,
        Some(CostHint::High) => 3,
    }
}

/// What the host offers a skill's prerequisites.
pub trait Readiness: std::fmt::Debug + Send + Sync {
    /// Whether `bin` is an executable on `PATH`.
    fn has_bin(&self, bin: &str) -> bool;
    /// Whether the core holds a value for env `name`.
    fn has_env(&self, name: &str) -> bool;
    /// The OS in the prerequisites' words (`linux`, `darwin`, `win32`).
    fn os(&self) -> &str;
    /// Whether the skill's OS list admits this host.
    fn on_os(&self, os: &[String]) -> bool {
        os.iter().any(|o| o == self.os())
    }
}

/// The real host: `PATH` lookups and an env check supplied by the caller (the
/// dispatcher's secrets in the core, the process environment in the CLI).
pub struct HostReadiness<F> {
    has_env: F,
    path: Vec<std::path::PathBuf>,
}

impl<F> std::fmt::Debug for HostReadiness<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostReadiness")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl<F: Fn(&str) -> bool + Send + Sync> HostReadiness<F> {
    /// Reads `PATH` now; env values are checked with `has_env`.
    pub fn new(has_env: F) -> Self {
        let path = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect())
            .unwrap_or_default();
        Self { has_env, path }
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The OS name of this host in the prerequisites' words.
pub fn host_os() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    }
}

impl<F: Fn(&str) -> bool + Send + Sync> Readiness for HostReadiness<F> {
    fn has_bin(&self, bin: &str) -> bool {
        !bin.contains('/') && self.path.iter().any(|d| is_executable(&d.join(bin)))
    }
    fn has_env(&self, name: &str) -> bool {
        (self.has_env)(name)
    }
    fn os(&self) -> &str {
        host_os()
    }
}

/// A host where every prerequisite holds: for evaluating routing quality apart from
/// the machine it runs on.
#[derive(Debug, Clone, Copy, Default)]
pub struct AssumeReady;

impl Readiness for AssumeReady {
    fn has_bin(&self, _: &str) -> bool {
        true
    }
    fn has_env(&self, _: &str) -> bool {
        true
    }
    fn os(&self) -> &str {
        host_os()
    }
    fn on_os(&self, _: &[String]) -> bool {
        true
    }
}

/// `context_readiness` and, when it is short of 1.0, why the skill is unavailable: the
/// one availability verdict of a skill (routing, `/v1/skills`, the catalogue and every call
/// use it, with [`crate::executors::availability::SandboxReadiness`] in the running core). Counted:
/// each prerequisite program, the any-of group, each env value, the OS, and each tool
/// command's program that the prerequisites do not already name.
pub fn context_readiness(skill: &Skill, host: &dyn Readiness) -> (f64, Option<String>) {
    let p = &skill.prerequisites;
    let mut total = 0u32;
    let mut missing = Vec::new();
    for bin in &p.bins {
        total += 1;
        if !host.has_bin(bin) {
            missing.push(format!("program {bin} is not on the sandbox PATH"));
        }
    }
    if !p.any_bins.is_empty() {
        total += 1;
        if !p.any_bins.iter().any(|b| host.has_bin(b)) {
            missing.push(format!(
                "none of the programs {} is on the sandbox PATH",
                p.any_bins.join(", ")
            ));
        }
    }
    for program in skill.programs() {
        if p.bins.contains(&program) || p.any_bins.contains(&program) {
            continue;
        }
        total += 1;
        if !host.has_bin(&program) {
            missing.push(format!(
                "its tools run {program}, which is not on the sandbox PATH"
            ));
        }
    }
    for env in &p.env {
        total += 1;
        if !host.has_env(env) {
            missing.push(format!(
                "the core holds no value for {env}; set it in the core's environment or <state>/secrets.env"
            ));
        }
    }
    if !p.os.is_empty() {
        total += 1;
        if !host.on_os(&p.os) {
            missing.push(format!(
                "it runs on {} and the executor runs on {}",
                p.os.join("/"),
                host.os()
            ));
        }
    }
    if total == 0 {
        return (1.0, None);
    }
    // Every missing entry counted one in `total`, so `met` never saturates.
    let met = total.saturating_sub(u32::try_from(missing.len()).unwrap_or(u32::MAX));
    let share = f64::from(met) / f64::from(total);
    let reason = (!missing.is_empty()).then(|| missing.join("; "));
    (share, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intent_match_is_zero_without_a_match_and_saturates_below_one() {
        assert_eq!(intent_match(0.0, 3.0, 0.5), 0.0);
        let one_rare = intent_match(3.0, 3.0, 0.5);
        assert!((one_rare - 2.0 / 3.0).abs() < 1e-9);
        let two_rare = intent_match(6.0, 3.0, 0.5);
        assert!(two_rare > one_rare && two_rare < 1.0);
    }

    #[test]
    fn success_rate_starts_at_the_prior_and_is_damped_during_cold_start() {
        assert_eq!(success_rate(None, 20), 0.5);
        let lucky = success_rate(
            Some(CallCounts {
                successes: 3,
                failures: 0,
            }),
            20,
        );
        assert!((lucky - 0.575).abs() < 1e-9, "{lucky}");
        let seasoned = success_rate(
            Some(CallCounts {
                successes: 30,
                failures: 10,
            }),
            20,
        );
        assert!((seasoned - 0.75).abs() < 1e-9);
    }

    #[test]
    fn cost_penalty_orders_low_none_medium_high() {
        let c = |h| cost_penalty(h);
        assert!(c(Some(CostHint::Low)) > c(None));
        assert!(c(None) > c(Some(CostHint::Medium)));
        assert!(c(Some(CostHint::Medium)) > c(Some(CostHint::High)));
    }

    #[test]
    fn weights_total_of_perfect_terms_is_one() {
        let b = Breakdown {
            intent_match: 1.0,
            trigger_match: 1.0,
            success_rate: 1.0,
            context_readiness: 1.0,
            cost_penalty: 1.0,
            conflict_penalty: 1.0,
            bm25: 9.0,
        };
        assert!((Weights::default().total(&b) - 1.0).abs() < 1e-9);
        let conflict = Breakdown {
            conflict_penalty: -1.0,
            ..b
        };
        assert!((Weights::default().total(&conflict) - 0.9).abs() < 1e-9);
    }
}
