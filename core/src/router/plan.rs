//! The activation plan (routing spec §7–8): which scored candidates run, in which
//! groups, what to fall back to, what it should cost, and why.

use serde::Serialize;

use super::score::Breakdown;

/// How a candidate was recalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The user named the skill (`$name`, "use X skill").
    Forced,
    /// A trigger of the skill is in the query.
    Rule,
    /// Top-k of the BM25 index.
    Semantic,
}

impl Source {
    /// `trigger_match` of this source.
    pub fn trigger_match(self) -> f64 {
        match self {
            Source::Forced => 1.0,
            Source::Rule => 0.9,
            Source::Semantic => 0.6,
        }
    }
}

/// What became of a candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Status {
    /// In the plan.
    Selected,
    /// Scored under the threshold.
    BelowThreshold,
    /// Passed, but adds no query coverage over higher-ranked selected skills.
    Redundant {
        /// The selected skills that already cover its terms.
        covered_by: Vec<String>,
    },
    /// An anti-trigger is in the query (and the skill was not forced).
    Conflict {
        /// The anti-trigger hit.
        anti_trigger: String,
    },
    /// The query names other skills (`$name`, "use X skill"): a named skill wins alone,
    /// so a skill the query only matches (the word "skill" in "skill-creator") stays out.
    NotNamed {
        /// The skills the query names.
        named: Vec<String>,
    },
    /// A prerequisite fails; never selected, not even when forced.
    Unavailable {
        /// What is missing.
        reason: String,
    },
}

/// One recalled skill and its score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// The skill.
    pub skill: String,
    /// How it was recalled (merged, de-duplicated).
    pub sources: Vec<Source>,
    /// The weighted score.
    pub score: f64,
    /// The six terms.
    pub breakdown: Breakdown,
    /// Query terms found in its name, description or triggers.
    pub matched_terms: Vec<String>,
    /// Triggers found in the query.
    pub trigger_hits: Vec<String>,
    /// The outcome.
    #[serde(flatten)]
    pub status: Status,
    /// Whether it may run beside another skill.
    #[serde(skip)]
    pub parallel_safe: bool,
    /// Its cost units.
    #[serde(skip)]
    pub cost_units: u32,
}

impl Candidate {
    /// Whether the user named it.
    pub fn forced(&self) -> bool {
        self.sources.contains(&Source::Forced)
    }
}

/// One step of the fallback chain, tried in order when the primary fails.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum FallbackStep {
    /// The next best skill of the same intent.
    Skill {
        /// Its name.
        skill: String,
    },
    /// Answer with the general tool chain, no skill.
    NoSkill,
    /// Ask the user for what is missing.
    AskUser,
}

/// The answer of `POST /v1/route` and `skillbox route`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActivationPlan {
    /// Identifies this routing decision in the logs.
    pub route_id: String,
    /// The query routed.
    pub query: String,
    /// The context it was routed for.
    pub context_id: Option<String>,
    /// Skills to activate, primary first.
    pub selected: Vec<String>,
    /// The skill the task is handed to.
    pub primary: Option<String>,
    /// Execution stages in order; the skills of a stage run in parallel.
    pub parallel_groups: Vec<Vec<String>>,
    /// What to try when the primary fails.
    pub fallback_chain: Vec<FallbackStep>,
    /// Sum of cost units of the selected skills (low 1, medium or undeclared 2, high 3).
    pub estimated_cost: u32,
    /// The decision in words.
    pub routing_reason: String,
    /// Every candidate with its breakdown, best first.
    pub candidates: Vec<Candidate>,
    /// The threshold applied.
    pub threshold: f64,
    /// Time spent routing, microseconds.
    pub latency_us: u64,
}

/// Picks the plan's skills among scored candidates (already sorted: forced first, then
/// by score): eligible ones, keeping a skill only when it covers a query term or trigger
/// the ones before it do not (minimum cover). Marks the statuses; returns the picks.
pub fn select(candidates: &mut [Candidate], threshold: f64) -> Vec<usize> {
    let mut covered: Vec<String> = Vec::new();
    let mut picked: Vec<usize> = Vec::new();
    // A skill the user names wins alone (even when it cannot run: then nothing runs, and
    // the plan says why).
    let named: Vec<String> = (candidates.iter())
        .filter(|c| c.forced())
        .map(|c| c.skill.clone())
        .collect();
    for i in 0..candidates.len() {
        let Some(c) = candidates.get(i) else {
            continue;
        };
        if !matches!(c.status, Status::Selected) {
            continue;
        }
        if !named.is_empty() && !c.forced() {
            if let Some(c) = candidates.get_mut(i) {
                c.status = Status::NotNamed {
                    named: named.clone(),
                };
            }
            continue;
        }
        if !c.forced() && c.score < threshold {
            if let Some(c) = candidates.get_mut(i) {
                c.status = Status::BelowThreshold;
            }
            continue;
        }
        let mut coverage: Vec<String> = c.matched_terms.clone();
        coverage.extend(c.trigger_hits.iter().map(|t| format!("trigger:{t}")));
        if c.forced() {
            coverage.push(format!("forced:{}", c.skill));
        }
        if !picked.is_empty() && coverage.iter().all(|t| covered.contains(t)) {
            let by: Vec<String> = picked
                .iter()
                .filter_map(|&p| candidates.get(p))
                .filter(|p| {
                    coverage
                        .iter()
                        .any(|t| p.matched_terms.contains(t) || p.trigger_hits.contains(t))
                })
                .map(|p| p.skill.clone())
                .collect();
            if let Some(c) = candidates.get_mut(i) {
                c.status = Status::Redundant { covered_by: by };
            }
            continue;
        }
        covered.extend(coverage);
        picked.push(i);
    }
    picked
}

/// Stages of the selected skills (spec §7): consecutive `parallel_safe` skills share a
/// stage up to `max_parallel`; any other skill is a stage of its own.
pub fn parallel_groups(selected: &[&Candidate], max_parallel: usize) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut open = false;
    for c in selected {
        match groups.last_mut() {
            Some(g) if open && c.parallel_safe && g.len() < max_parallel.max(1) => {
                g.push(c.skill.clone());
            }
            _ => {
                groups.push(vec![c.skill.clone()]);
                open = c.parallel_safe;
            }
        }
    }
    groups
}

/// The fallback chain of the primary: same-intent skills not selected (available, not in
/// conflict, sharing a matched term or trigger with the primary), best first, then the
/// no-skill path, then asking the user.
pub fn fallback_chain(
    candidates: &[Candidate],
    primary: Option<&Candidate>,
    max_skills: usize,
) -> Vec<FallbackStep> {
    let mut chain = Vec::new();
    if let Some(p) = primary {
        chain.extend(
            candidates
                .iter()
                .filter(|c| matches!(c.status, Status::BelowThreshold | Status::Redundant { .. }))
                .filter(|c| {
                    c.matched_terms.iter().any(|t| p.matched_terms.contains(t))
                        || c.trigger_hits.iter().any(|t| p.trigger_hits.contains(t))
                })
                .take(max_skills)
                .map(|c| FallbackStep::Skill {
                    skill: c.skill.clone(),
                }),
        );
    }
    chain.push(FallbackStep::NoSkill);
    chain.push(FallbackStep::AskUser);
    chain
}

/// The decision in words.
pub fn reason(candidates: &[Candidate], picked: &[usize], threshold: f64) -> String {
    let mut parts = Vec::new();
    for &i in picked {
        let Some(c) = candidates.get(i) else {
            continue;
        };
        let why = if c.forced() {
            "requested by name".to_string()
        } else if !c.trigger_hits.is_empty() {
            format!("trigger {}", c.trigger_hits.join(", "))
        } else {
            format!("matches {}", c.matched_terms.join(", "))
        };
        parts.push(format!(
            "selected {} (score {:.2}{}; {why})",
            c.skill,
            c.score,
            if c.forced() {
                ", threshold skipped".to_string()
            } else {
                format!(" >= {threshold:.2}")
            }
        ));
    }
    let named_unavailable: Vec<&Candidate> = (candidates.iter())
        .filter(|c| c.forced() && matches!(c.status, Status::Unavailable { .. }))
        .collect();
    if picked.is_empty() && !named_unavailable.is_empty() {
        let names: Vec<&str> = named_unavailable.iter().map(|c| c.skill.as_str()).collect();
        parts.push(format!(
            "{} asked for by name and unavailable; no other skill runs in its place",
            names.join(", ")
        ));
    } else if picked.is_empty() {
        match candidates
            .iter()
            .find(|c| matches!(c.status, Status::BelowThreshold))
        {
            Some(best) => parts.push(format!(
                "no skill reached {threshold:.2} (best {} at {:.2}); answering without a skill",
                best.skill, best.score
            )),
            None => parts.push("no skill matches the query; answering without a skill".into()),
        }
    }
    for c in candidates {
        match &c.status {
            Status::Unavailable { reason } => {
                parts.push(format!("{} unavailable: {reason}", c.skill));
            }
            Status::Conflict { anti_trigger } => {
                parts.push(format!(
                    "{} rejected: anti-trigger {anti_trigger:?}",
                    c.skill
                ));
            }
            Status::Redundant { covered_by } => parts.push(format!(
                "{} skipped: adds nothing over {}",
                c.skill,
                covered_by.join(", ")
            )),
            Status::NotNamed { named } => parts.push(format!(
                "{} skipped: the query names {}",
                c.skill,
                named.join(", ")
            )),
            _ => {}
        }
    }
    parts.join("; ")
}
