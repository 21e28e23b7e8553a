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

use serde::Serialize;
use skillbox_protocol::skill::CostHint;

pub use crate::state::config::routing::{RoutingConfig, Weights};

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
    /// How far above the other skills its meaning is to the query (z-score of the cosine
    /// similarity; `intent_match` is the larger of BM25's and this one's calibration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meaning_z: Option<f64>,
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
            meaning_z: None,
        };
        assert!((Weights::default().total(&b) - 1.0).abs() < 1e-9);
        let conflict = Breakdown {
            conflict_penalty: -1.0,
            ..b
        };
        assert!((Weights::default().total(&conflict) - 0.9).abs() < 1e-9);
    }
}
