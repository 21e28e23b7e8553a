//! `[routing]` and `[routing.weights]`: the router's weights, threshold and limits (the
//! routing spec; the scoring is [`crate::router`]).

use serde::{Deserialize, Serialize};

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
    /// The most characters the skills catalogue of a context's prompt takes (progressive
    /// disclosure): `always` skills first, in full; the rest by use, each in full while it
    /// fits, then shortened to its first sentence, then counted in a closing line.
    pub catalogue_budget_chars: usize,
    /// Most candidates scored for one query: when recall finds more (a trigger thousands
    /// of skills share), the named ones and then those with the most trigger hits and the
    /// best BM25 score are kept.
    pub max_candidates: usize,
    /// Recall by meaning ([`crate::router`]'s sentence encoder, compiled in) beside the
    /// words.
    pub semantic: bool,
    /// The z-score (standard deviations above the other skills) where a skill's
    /// similarity to the query starts to count as intent.
    pub semantic_z_floor: f64,
    /// The z-score where it counts in full.
    pub semantic_z_full: f64,
    /// How deep `runSkill` delegations nest (a tool's call of another skill is depth 1).
    pub max_delegate_depth: u32,
    /// How many delegations one call and its children may make in all.
    pub max_delegated_calls: u32,
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
            catalogue_budget_chars: 12_000,
            max_candidates: 64,
            semantic: true,
            semantic_z_floor: 2.5,
            semantic_z_full: 4.0,
            max_delegate_depth: 2,
            max_delegated_calls: 8,
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
