//! Router tests over small skill folders written to a temporary root.

use std::sync::Arc;

use skillbox_protocol::skill::{discover, DiscoveryOptions};

use super::*;

/// `(name, description, extra frontmatter lines)`.
fn catalog(skills: &[(&str, &str, &str)]) -> (tempfile::TempDir, Arc<Catalog>) {
    let dir = tempfile::tempdir().unwrap();
    for (name, description, extra) in skills {
        let d = dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: \"{description}\"\n{extra}---\n# {name}\n"),
        )
        .unwrap();
    }
    let c = discover(&[dir.path().to_path_buf()], DiscoveryOptions::default());
    assert_eq!(c.skills.len(), skills.len(), "{:?}", c.skipped);
    (dir, Arc::new(c))
}

fn fixture() -> (tempfile::TempDir, Router) {
    let (dir, c) = catalog(&[
        (
            "weather",
            "Current weather and forecasts for a city: rain, temperature, wind.",
            "triggers: [天气, forecast]\nanti_triggers: [stock]\ncost_hint: low\nparallel_safe: true\n",
        ),
        (
            "crypto-price",
            "Get cryptocurrency prices and market data for coins.",
            "triggers: [price, 价格]\nanti_triggers: [weather]\ncost_hint: low\nparallel_safe: true\n",
        ),
        (
            "apple-notes",
            "Create, search and edit notes in Apple Notes on macOS.",
            "prerequisites:\n  bins: [definitely-not-a-real-binary-xyz]\n",
        ),
        (
            "notes-lite",
            "Create and search plain notes in a folder.",
            "cost_hint: high\n",
        ),
        (
            "pdf-editor",
            "Edit PDF files: merge, split, rotate pages.",
            "triggers: [pdf]\ncost_hint: medium\n",
        ),
        (
            "pdf-merge",
            "Merge PDF files into one.",
            "triggers: [pdf]\ncost_hint: medium\n",
        ),
    ]);
    (dir, Router::new(c, RoutingConfig::default()))
}

fn route(r: &Router, q: &str) -> ActivationPlan {
    r.route(
        q,
        &RouteInputs {
            context_id: None,
            readiness: &HostReadiness::new(|_: &str| false),
            stats: &StatsMap::new(),
        },
    )
    .unwrap()
}

fn candidate<'a>(plan: &'a ActivationPlan, skill: &str) -> &'a Candidate {
    plan.candidates
        .iter()
        .find(|c| c.skill == skill)
        .unwrap_or_else(|| panic!("{skill} not a candidate: {plan:#?}"))
}

#[test]
fn route_selects_a_clear_match_above_the_threshold() {
    let (_d, r) = fixture();
    let plan = route(&r, "what is the weather forecast for Paris tomorrow");
    assert_eq!(plan.primary.as_deref(), Some("weather"), "{plan:#?}");
    let c = candidate(&plan, "weather");
    assert!(c.score >= 0.65, "{c:?}");
    assert!(c.sources.contains(&Source::Rule) && c.sources.contains(&Source::Semantic));
    assert_eq!(c.breakdown.trigger_match, 0.9);
    assert_eq!(c.breakdown.cost_penalty, 1.0);
    assert_eq!(c.breakdown.success_rate, 0.5);
    assert!(plan.routing_reason.contains("selected weather"));
    assert!(plan.route_id.starts_with("rt_"));
}

#[test]
fn route_selects_nothing_for_an_unrelated_query() {
    let (_d, r) = fixture();
    let plan = route(&r, "tell me a joke about cats");
    assert!(plan.selected.is_empty(), "{plan:#?}");
    assert_eq!(
        plan.fallback_chain,
        vec![FallbackStep::NoSkill, FallbackStep::AskUser]
    );
}

#[test]
fn route_keeps_a_weak_semantic_match_below_the_threshold() {
    let (_d, r) = fixture();
    // "create" is in two descriptions (so worth little) and nothing else of the query is.
    let plan = route(&r, "create a birthday card for my aunt");
    let c = candidate(&plan, "notes-lite");
    assert_eq!(c.sources, vec![Source::Semantic]);
    assert!(c.score < 0.65, "{c:?}");
    assert_eq!(c.status, Status::BelowThreshold);
    assert!(plan.selected.is_empty());
}

#[test]
fn route_matches_cjk_triggers_as_substrings() {
    let (_d, r) = fixture();
    let plan = route(&r, "明天上海天气怎么样");
    assert_eq!(plan.primary.as_deref(), Some("weather"), "{plan:#?}");
    assert_eq!(candidate(&plan, "weather").trigger_hits, vec!["天气"]);
}

#[test]
fn route_forced_skill_skips_the_threshold() {
    let (_d, r) = fixture();
    let plan = route(&r, "use the notes-lite skill");
    let c = candidate(&plan, "notes-lite");
    assert!(c.forced());
    assert_eq!(c.breakdown.trigger_match, 1.0);
    assert_eq!(plan.primary.as_deref(), Some("notes-lite"));
    assert!(plan.routing_reason.contains("threshold skipped"));
}

#[test]
fn route_forced_unavailable_skill_stays_unavailable() {
    let (_d, r) = fixture();
    let plan = route(&r, "$apple-notes create a note");
    let c = candidate(&plan, "apple-notes");
    assert!(c.forced());
    assert_eq!(c.breakdown.context_readiness, 0.0);
    match &c.status {
        Status::Unavailable { reason } => {
            assert!(
                reason.contains("definitely-not-a-real-binary-xyz"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_ne!(plan.primary.as_deref(), Some("apple-notes"));
    assert!(plan.routing_reason.contains("apple-notes unavailable"));
}

#[test]
fn route_anti_trigger_rejects_an_unforced_skill() {
    let (_d, r) = fixture();
    let plan = route(&r, "bitcoin price and the weather");
    let c = candidate(&plan, "crypto-price");
    assert_eq!(c.breakdown.conflict_penalty, -1.0);
    assert_eq!(
        c.status,
        Status::Conflict {
            anti_trigger: "weather".into()
        }
    );
    assert!(!plan.selected.contains(&"crypto-price".to_string()));
}

#[test]
fn route_forced_skill_wins_over_its_anti_trigger() {
    let (_d, r) = fixture();
    let plan = route(&r, "$crypto-price is the weather affecting coin prices");
    let c = candidate(&plan, "crypto-price");
    assert_eq!(c.breakdown.conflict_penalty, -1.0);
    assert_eq!(c.status, Status::Selected);
    assert_eq!(plan.primary.as_deref(), Some("crypto-price"));
}

#[test]
fn route_minimum_cover_skips_a_skill_that_adds_nothing() {
    let (_d, r) = fixture();
    let plan = route(&r, "merge these pdf files");
    assert_eq!(plan.selected.len(), 1, "{plan:#?}");
    let other = if plan.primary.as_deref() == Some("pdf-merge") {
        "pdf-editor"
    } else {
        "pdf-merge"
    };
    match &candidate(&plan, other).status {
        Status::Redundant { covered_by } => assert_eq!(covered_by, &plan.selected),
        Status::BelowThreshold => {}
        s => panic!("{s:?}"),
    }
    // The same-intent runner-up is the first fallback, then no skill, then the user.
    assert_eq!(
        plan.fallback_chain.first(),
        Some(&FallbackStep::Skill {
            skill: other.into()
        })
    );
    assert_eq!(plan.fallback_chain.last(), Some(&FallbackStep::AskUser));
}

#[test]
fn route_groups_two_parallel_safe_skills_in_one_stage() {
    let (_d, r) = fixture();
    let plan = route(&r, "forecast for Berlin and the price of bitcoin coins");
    assert_eq!(plan.selected.len(), 2, "{plan:#?}");
    assert_eq!(plan.parallel_groups.len(), 1);
    assert_eq!(plan.estimated_cost, 2);
}

#[test]
fn parallel_groups_cap_stages_and_isolate_unsafe_skills() {
    let mk = |name: &str, parallel_safe: bool| Candidate {
        skill: name.into(),
        sources: vec![Source::Semantic],
        score: 0.9,
        breakdown: Breakdown {
            intent_match: 1.0,
            trigger_match: 0.6,
            success_rate: 0.5,
            context_readiness: 1.0,
            cost_penalty: 0.8,
            conflict_penalty: 1.0,
            bm25: 1.0,
            meaning_z: None,
        },
        matched_terms: vec![],
        trigger_hits: vec![],
        status: Status::Selected,
        parallel_safe,
        cost_units: 2,
    };
    let (a, b, c, d) = (mk("a", true), mk("b", true), mk("c", true), mk("d", false));
    let groups = plan::parallel_groups(&[&a, &b, &c, &d], 2);
    assert_eq!(
        groups,
        vec![
            vec!["a".to_string(), "b".into()],
            vec!["c".into()],
            vec!["d".into()]
        ]
    );
}

#[test]
fn route_success_rate_moves_the_score() {
    let (_d, r) = fixture();
    let mut stats = StatsMap::new();
    stats.insert(
        "weather".into(),
        CallCounts {
            successes: 0,
            failures: 40,
        },
    );
    let plan = r
        .route(
            "weather forecast",
            &RouteInputs {
                context_id: Some("ctx"),
                readiness: &AssumeReady,
                stats: &stats,
            },
        )
        .unwrap();
    let c = candidate(&plan, "weather");
    assert_eq!(c.breakdown.success_rate, 0.0);
    assert_eq!(plan.context_id.as_deref(), Some("ctx"));
}

#[test]
fn route_id_fails_instead_of_zeros_when_the_random_source_fails() {
    let err = route_id(&crate::random::fake::FailingAfter::new(0)).unwrap_err();
    assert!(
        err.to_string().contains("no route id could be made"),
        "{err}"
    );
    let id = route_id(&crate::random::SystemSource::default()).unwrap();
    assert!(
        id.starts_with("rt_") && id.len() == 19 && id != "rt_0000000000000000",
        "{id}"
    );
}

/// A weather skill, `skill-creator` (whose name holds the word "skill") and a github skill
/// whose program is missing.
fn named_fixture() -> (tempfile::TempDir, Router) {
    let (dir, c) = catalog(&[
        (
            "weather",
            "Current weather and forecasts for a city.",
            "triggers: [天气]\n",
        ),
        (
            "skill-creator",
            "Guide for creating effective skills: a new skill, or update an existing skill.",
            "",
        ),
        (
            "github",
            "Interact with GitHub using the gh CLI: issues, pull requests, runs.",
            "prerequisites:\n  bins: [definitely-not-gh-xyz]\n",
        ),
    ]);
    (dir, Router::new(c, RoutingConfig::default()))
}

#[test]
fn route_a_named_skill_wins_alone() {
    let (_d, r) = named_fixture();
    for q in [
        "使用 weather skill 看看",
        "use the weather skill for Paris",
        "$weather 天气",
    ] {
        let plan = route(&r, q);
        assert_eq!(plan.selected, ["weather"], "{q}: {plan:#?}");
        if let Some(c) = plan.candidates.iter().find(|c| c.skill == "skill-creator") {
            assert!(
                matches!(&c.status, Status::NotNamed { named } if named == &["weather"]),
                "{q}: {c:#?}"
            );
            assert!(plan
                .routing_reason
                .contains("skill-creator skipped: the query names weather"));
        }
    }
}

#[test]
fn route_a_named_unavailable_skill_is_reported_and_nothing_runs_instead() {
    let (_d, r) = named_fixture();
    let plan = route(&r, "使用 github skill");
    assert!(plan.selected.is_empty(), "{plan:#?}");
    assert!(
        matches!(
            candidate(&plan, "github").status,
            Status::Unavailable { .. }
        ),
        "{plan:#?}"
    );
    assert!(
        plan.routing_reason
            .contains("github asked for by name and unavailable"),
        "{}",
        plan.routing_reason
    );
    assert!(
        plan.routing_reason.contains("definitely-not-gh-xyz"),
        "{}",
        plan.routing_reason
    );
}

/// Skills shaped like published ones, for the two queries recall by words got wrong.
fn published_like() -> (tempfile::TempDir, Arc<Catalog>) {
    catalog(&[
        (
            "weather",
            "Get the current weather and forecasts for a city: temperature, rain and wind.",
            "",
        ),
        (
            "summarize",
            "Summarize or transcribe URLs, videos, podcasts, articles and local files.",
            "",
        ),
        (
            "web-artifacts-builder",
            "Build elaborate multi-component HTML artifacts with React and Tailwind.",
            "",
        ),
        (
            "github",
            "Work with GitHub issues, pull requests and CI runs through the gh CLI.",
            "",
        ),
        (
            "spotify-player",
            "Play, pause and search music on Spotify from the terminal.",
            "",
        ),
    ])
}

fn primary(router: &Router, query: &str) -> Option<String> {
    let stats = StatsMap::new();
    let inputs = RouteInputs {
        context_id: None,
        readiness: &AssumeReady,
        stats: &stats,
    };
    router.route(query, &inputs).unwrap().primary
}

#[test]
fn recall_by_meaning_finds_a_skill_that_shares_no_word_with_the_query() {
    let (_d, c) = published_like();
    let query = "will I need an umbrella in Paris tomorrow";
    let stats = StatsMap::new();
    let inputs = RouteInputs {
        context_id: None,
        readiness: &AssumeReady,
        stats: &stats,
    };
    let words_only = Router::new(
        Arc::clone(&c),
        RoutingConfig {
            semantic: false,
            ..RoutingConfig::default()
        },
    );
    let plan = words_only.route(query, &inputs).unwrap();
    assert!(plan.candidates.is_empty(), "no word in common: {plan:?}");
    // By meaning, weather is the first candidate, recalled as semantic, with its z-score
    // in the breakdown (over the 63-skill corpus the same query selects it: the routing
    // evaluation's "umbrella" line).
    let router = Router::new(c, RoutingConfig::default());
    let plan = router.route(query, &inputs).unwrap();
    let first = plan.candidates.first().expect("a candidate by meaning");
    assert_eq!(first.skill, "weather", "{plan:?}");
    assert_eq!(first.sources, [Source::Semantic]);
    assert!(first.breakdown.meaning_z.unwrap() >= 2.5, "{first:?}");
    assert!(first.breakdown.intent_match > 0.0);
    // Unrelated requests stay without a skill.
    for q in ["what is the meaning of life", "tell me a joke about cats"] {
        assert_eq!(primary(&router, q), None, "{q}");
    }
}

#[test]
fn summarising_a_web_page_in_chinese_selects_the_summarizer() {
    let (_d, c) = published_like();
    let router = Router::new(c, RoutingConfig::default());
    assert_eq!(
        primary(&router, "帮我总结一下这个网页").as_deref(),
        Some("summarize")
    );
}

#[test]
fn a_trigger_shared_by_many_skills_scores_only_the_most_promising() {
    let names: Vec<String> = (0..80).map(|i| format!("pdf-tool-{i:02}")).collect();
    let skills: Vec<(&str, &str, &str)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let description = if i == 7 {
                "Merge PDF invoices into one file."
            } else {
                "Work with documents."
            };
            (n.as_str(), description, "triggers: [pdf]\n")
        })
        .collect();
    let (_d, c) = catalog(&skills);
    let router = Router::new(
        c,
        RoutingConfig {
            max_candidates: 10,
            ..RoutingConfig::default()
        },
    );
    let stats = StatsMap::new();
    let inputs = RouteInputs {
        context_id: None,
        readiness: &AssumeReady,
        stats: &stats,
    };
    let plan = router
        .route("merge these pdf invoices, $pdf-tool-42 too", &inputs)
        .unwrap();
    assert_eq!(plan.candidates.len(), 10, "{:?}", plan.candidates.len());
    // The named skill is kept, and so is the one whose words match best.
    let kept: Vec<&str> = plan.candidates.iter().map(|c| c.skill.as_str()).collect();
    assert!(kept.contains(&"pdf-tool-42"), "{kept:?}");
    assert!(kept.contains(&"pdf-tool-07"), "{kept:?}");
}
