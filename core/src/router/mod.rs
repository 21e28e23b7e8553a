//! The router: two-phase routing of a query to skills (routing spec §6–7), explainable.
//!
//! Phase 1, recall, merges and de-duplicates three sources, each candidate keeping its
//! labels: `forced` (`$name`, "use X skill", "使用 X skill"), `rule` (triggers in the query:
//! whole words for Latin text, substrings for CJK) and `semantic` (top-k of a BM25 index
//! over name + description + triggers, [`index`]). Phase 2 scores every candidate with the
//! weighted terms of [`score`] and the threshold of `[routing]`, and [`plan`] turns the
//! survivors into an [`ActivationPlan`] (minimum cover, parallel stages, fallback chain).
//!
//! Semantic recall is lexical BM25 with CJK bigrams and a small Chinese→English lexicon
//! ([`lexicon`]), every match shown to a person as the words that matched, and recall by
//! meaning ([`meaning`]): a multilingual sentence encoder compiled in, over each skill's
//! name, description and SKILL.md body, a skill recalled when its similarity to the query
//! stands `semantic_z_floor` standard deviations above the others', its `intent_match`
//! the larger of the two calibrations (the z-score is in the breakdown as `meaning_z`).

pub mod execute;
pub mod index;
mod lexicon;
pub mod meaning;
pub mod plan;
mod recall;
pub mod score;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use skillbox_protocol::skill::{Catalog, Skill};

use crate::random::{self, RandomError, RandomSource, SystemSource};

pub use crate::executors::readiness::{
    context_readiness, host_os, AssumeReady, Availability, HostReadiness, Readiness,
};
pub use index::Bm25Index;
pub use plan::{ActivationPlan, Candidate, FallbackStep, Source, Status};
pub use score::{Breakdown, CallCounts, RoutingConfig, StatsMap, Weights};

/// A recalled skill: its number, the sources that recalled it, the triggers it was hit by.
type Recalled<'a> = (usize, Vec<Source>, Vec<&'a str>);

/// A router over one catalogue; rebuild it when the catalogue changes.
#[derive(Debug)]
pub struct Router {
    catalog: Arc<Catalog>,
    by_name: HashMap<String, usize>,
    index: Bm25Index,
    triggers: recall::TriggerIndex,
    /// The skills' embeddings (`[routing] semantic`).
    meaning: Option<meaning::SemanticIndex>,
    config: RoutingConfig,
}

/// What a routing decision depends on beyond the query.
#[derive(Debug, Clone, Copy)]
pub struct RouteInputs<'a> {
    /// The context the query belongs to.
    pub context_id: Option<&'a str>,
    /// The host's prerequisites.
    pub readiness: &'a dyn Readiness,
    /// Call counts by skill.
    pub stats: &'a StatsMap,
}

/// The texts a skill is embedded from: its name in words and its description (the head),
/// and its SKILL.md body as [`meaning::body_text`] makes it ("" when unreadable).
fn meaning_text(skill: &Skill) -> (String, String) {
    let head = format!("{}. {}", skill.name.replace('-', " "), skill.description);
    let body = skill.read_body().unwrap_or_default();
    (head, meaning::body_text(&body))
}

/// The text a skill is indexed under: its name and triggers count twice.
fn skill_terms(skill: &Skill) -> Vec<String> {
    let mut terms = index::tokenize(&skill.name);
    terms.extend(index::tokenize(&skill.name));
    terms.extend(index::tokenize(&skill.description));
    for t in &skill.routing.triggers {
        terms.extend(index::tokenize(t));
        terms.extend(index::tokenize(t));
    }
    terms
}

impl Router {
    /// Indexes `catalog`.
    pub fn new(catalog: Arc<Catalog>, config: RoutingConfig) -> Self {
        let docs: Vec<Vec<String>> = catalog.skills.iter().map(skill_terms).collect();
        let index = Bm25Index::build(&docs);
        let triggers = recall::TriggerIndex::build(
            catalog
                .skills
                .iter()
                .enumerate()
                .map(|(i, s)| (i, s.routing.triggers.as_slice())),
        );
        let by_name = catalog
            .skills
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.to_lowercase(), i))
            .collect();
        let meaning = config.semantic.then(|| {
            let texts: Vec<(String, String)> = catalog.skills.iter().map(meaning_text).collect();
            meaning::SemanticIndex::build(
                texts
                    .iter()
                    .map(|(head, body)| meaning::SkillText { head, body }),
            )
        });
        Self {
            catalog,
            by_name,
            index,
            triggers,
            meaning,
            config,
        }
    }

    /// The catalogue routed over.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// The settings.
    pub fn config(&self) -> &RoutingConfig {
        &self.config
    }

    /// The query's index terms (with the lexicon's expansion when enabled).
    fn terms(&self, query: &str) -> Vec<String> {
        let mut terms = index::query_terms(query);
        if self.config.cross_lingual {
            for t in lexicon::expand(query) {
                if !terms.contains(&t) {
                    terms.push(t);
                }
            }
        }
        terms
    }

    /// Semantic recall: the top-k skills by BM25 (the embedding plug-in point).
    fn semantic(&self, terms: &[String]) -> Vec<usize> {
        self.index
            .search(terms, self.config.top_k)
            .into_iter()
            .map(|h| h.doc)
            .collect()
    }

    /// Recall by meaning: every skill's similarity to the query, and the first `top_k`
    /// skills past `semantic_z_floor`.
    fn by_meaning(
        &self,
        query: Option<&meaning::QueryVector>,
    ) -> (Option<meaning::Scored>, Vec<usize>) {
        let scored = (self.meaning.as_ref()).and_then(|m| query.and_then(|q| m.score(q)));
        let Some(scored) = scored else {
            return (None, Vec::new());
        };
        let recalled = scored.top(self.config.top_k, self.config.semantic_z_floor);
        (Some(scored), recalled)
    }

    /// Phase 1: candidates by skill number with their sources and trigger hits.
    fn recall(&self, query: &str, terms: &[String], by_meaning: &[usize]) -> Vec<Recalled<'_>> {
        /// Adds a source (and its trigger hits) to skill `i`'s entry in `out`.
        fn add<'a>(
            out: &mut Vec<Recalled<'a>>,
            at: &mut HashMap<usize, usize>,
            i: usize,
            src: Source,
            hits: Vec<&'a str>,
        ) {
            match at.get(&i) {
                Some(&k) => {
                    if let Some((_, s, h)) = out.get_mut(k) {
                        if !s.contains(&src) {
                            s.push(src);
                        }
                        h.extend(hits);
                    }
                }
                None => {
                    at.insert(i, out.len());
                    out.push((i, vec![src], hits));
                }
            }
        }
        let mut out: Vec<Recalled<'_>> = Vec::new();
        // Where each skill is in `out`: a source recalling thousands costs one pass.
        let mut at: HashMap<usize, usize> = HashMap::new();
        for name in recall::forced_names(query) {
            if let Some(&i) = self.by_name.get(&name) {
                add(&mut out, &mut at, i, Source::Forced, Vec::new());
            }
        }
        for (i, hits) in self.triggers.hits(&query.to_lowercase()) {
            add(&mut out, &mut at, i, Source::Rule, hits);
        }
        for i in self
            .semantic(terms)
            .into_iter()
            .chain(by_meaning.iter().copied())
        {
            add(&mut out, &mut at, i, Source::Semantic, Vec::new());
        }
        out
    }

    /// Keeps the `max_candidates` most promising of `recalled` for phase 2: the named
    /// skills, then by trigger hits, then by BM25 score and meaning. Only a query that
    /// recalls more (a trigger thousands of skills share) loses any.
    fn keep_best(
        &self,
        recalled: &mut Vec<Recalled<'_>>,
        terms: &[String],
        scored: Option<&meaning::Scored>,
    ) {
        let cap = self.config.max_candidates.max(1);
        if recalled.len() <= cap {
            return;
        }
        let docs: Vec<usize> = recalled.iter().map(|r| r.0).collect();
        let bm25 = self.index.scores_of(terms, &docs);
        let mut keyed: Vec<_> = recalled
            .drain(..)
            .zip(bm25)
            .map(|(r, bm25)| {
                let forced = r.1.contains(&Source::Forced);
                let z = scored.and_then(|s| s.z(r.0)).map_or(0.0, f64::from);
                ((forced, r.2.len(), bm25 + z), r)
            })
            .collect();
        keyed.sort_by(|(a, _), (b, _)| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.total_cmp(&a.2)));
        keyed.truncate(cap);
        recalled.extend(keyed.into_iter().map(|(_, r)| r));
    }

    /// Phase 2 for one candidate: `recalled` is (skill number, sources, trigger hits).
    fn score(
        &self,
        skill: &Skill,
        recalled: Recalled<'_>,
        query_lower: &str,
        terms: &[String],
        z: Option<f32>,
        inputs: &RouteInputs<'_>,
    ) -> Candidate {
        let (doc, sources, trigger_hits) = recalled;
        let c = &self.config;
        let (bm25, matched_terms) = self.index.score_doc(terms, doc);
        let (readiness, availability) = context_readiness(skill, inputs.readiness);
        let anti = skill
            .routing
            .anti_triggers
            .iter()
            .find(|a| recall::phrase_in(query_lower, a))
            .cloned();
        let breakdown = Breakdown {
            intent_match: {
                let words = score::intent_match(bm25, self.index.rare_idf(), c.intent_half);
                let meaning = z.map_or(0.0, |z| {
                    meaning::intent(z, c.semantic_z_floor, c.semantic_z_full)
                });
                1.0 - (1.0 - words) * (1.0 - meaning)
            },
            meaning_z: z.map(f64::from),
            trigger_match: sources
                .iter()
                .map(|s| s.trigger_match())
                .fold(0.0, f64::max),
            success_rate: score::success_rate(
                inputs.stats.get(&skill.name).copied(),
                c.cold_start_calls,
            ),
            context_readiness: readiness,
            cost_penalty: score::cost_penalty(skill.routing.cost_hint),
            conflict_penalty: if anti.is_some() { -1.0 } else { 1.0 },
            bm25,
        };
        let forced = sources.contains(&Source::Forced);
        // Spec §9: the user's explicit word, then safety, then routing rules. So an
        // unavailable skill stays out even when forced; an anti-trigger does not veto a
        // skill the user named.
        let status = match (availability, anti) {
            (Availability::Unavailable(reason), _) => Status::Unavailable { reason },
            (Availability::Ready, Some(anti_trigger)) if !forced => {
                Status::Conflict { anti_trigger }
            }
            _ => Status::Selected,
        };
        Candidate {
            skill: skill.name.clone(),
            sources,
            score: c.weights.total(&breakdown),
            breakdown,
            matched_terms,
            trigger_hits: trigger_hits.into_iter().map(String::from).collect(),
            status,
            parallel_safe: skill.routing.parallel_safe,
            cost_units: score::cost_units(skill.routing.cost_hint),
        }
    }

    /// Routes `query` and returns the activation plan; logs the decision at info.
    ///
    /// # Errors
    /// When no route id can be drawn from the operating system's random source.
    pub fn route(
        &self,
        query: &str,
        inputs: &RouteInputs<'_>,
    ) -> Result<ActivationPlan, RandomError> {
        let started = Instant::now();
        let vector = self.embed_query(query);
        self.route_from(started, query, vector.as_ref(), inputs)
    }

    /// The query's vector for recall by meaning (the encoder's run, most of a route's
    /// time); `None` with `[routing] semantic` off or a query without letters.
    pub fn embed_query(&self, query: &str) -> Option<meaning::QueryVector> {
        self.meaning.as_ref()?;
        meaning::QueryVector::embed(query)
    }

    /// [`Router::route`] with the query's vector already computed by
    /// [`Router::embed_query`] (the route bench times the two apart).
    ///
    /// # Errors
    /// As [`Router::route`].
    pub fn route_embedded(
        &self,
        query: &str,
        vector: Option<&meaning::QueryVector>,
        inputs: &RouteInputs<'_>,
    ) -> Result<ActivationPlan, RandomError> {
        self.route_from(Instant::now(), query, vector, inputs)
    }

    fn route_from(
        &self,
        started: Instant,
        query: &str,
        vector: Option<&meaning::QueryVector>,
        inputs: &RouteInputs<'_>,
    ) -> Result<ActivationPlan, RandomError> {
        let terms = self.terms(query);
        let query_lower = query.to_lowercase();
        let (scored, by_meaning) = self.by_meaning(vector);
        let mut recalled = self.recall(query, &terms, &by_meaning);
        self.keep_best(&mut recalled, &terms, scored.as_ref());
        let mut candidates: Vec<Candidate> = recalled
            .into_iter()
            .filter_map(|recalled| {
                let skill = self.catalog.skills.get(recalled.0)?;
                let z = scored.as_ref().and_then(|s| s.z(recalled.0));
                Some(self.score(skill, recalled, &query_lower, &terms, z, inputs))
            })
            .collect();
        candidates.sort_by(|a, b| {
            b.forced()
                .cmp(&a.forced())
                .then(b.score.total_cmp(&a.score))
                .then(a.skill.cmp(&b.skill))
        });
        let threshold = self.config.threshold;
        let picked = plan::select(&mut candidates, threshold);
        let chosen: Vec<&Candidate> = picked.iter().filter_map(|&i| candidates.get(i)).collect();
        let selected: Vec<String> = chosen.iter().map(|c| c.skill.clone()).collect();
        let parallel_groups = plan::parallel_groups(&chosen, self.config.max_parallel);
        let estimated_cost = chosen.iter().map(|c| c.cost_units).sum();
        let fallback_chain = plan::fallback_chain(
            &candidates,
            chosen.first().copied(),
            self.config.max_fallback_skills,
        );
        let routing_reason = plan::reason(&candidates, &picked, threshold);
        let latency_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let plan = ActivationPlan {
            route_id: route_id(&SystemSource::default())?,
            query: query.to_string(),
            context_id: inputs.context_id.map(str::to_string),
            primary: selected.first().cloned(),
            selected,
            parallel_groups,
            fallback_chain,
            estimated_cost,
            routing_reason,
            candidates,
            threshold,
            latency_us,
        };
        tracing::info!(
            route_id = %plan.route_id,
            candidate_count = plan.candidates.len(),
            selected = ?plan.selected,
            score_breakdown = %serde_json::to_string(&plan.candidates).unwrap_or_default(),
            latency_us = plan.latency_us,
            "route"
        );
        Ok(plan)
    }
}

fn route_id(source: &dyn RandomSource) -> Result<String, RandomError> {
    random::route_id(source)
}

#[cfg(test)]
mod tests;
