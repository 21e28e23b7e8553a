//! The outcome labels set to 0 before they happen, the call-duration buckets past the
//! approval timeout, and the Prometheus text format of the registry.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use super::*;
use crate::approvals::DEFAULT_TIMEOUT_MS;

/// The sample of `name` whose labels include every one of `labels` (whatever other
/// labels it has), with its value.
fn sample<'a>(text: &'a str, name: &str, labels: &[(&str, &str)]) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix('{')?;
        let (set, value) = rest.split_once("} ")?;
        let all = labels
            .iter()
            .all(|(k, v)| set.split(',').any(|kv| kv == format!("{k}=\"{v}\"")));
        all.then_some(value)
    })
}

#[test]
fn every_known_outcome_is_zero_before_it_happens() {
    let m = Metrics::new();
    let text = m.encode(&Scrape {
        tools: vec![("notes".into(), "add".into())],
        ..Scrape::default()
    });
    let tool = [("skill", "notes"), ("tool", "add")];
    for (name, labels) in [
        ("skillbox_routes_total", vec![("outcome", "no_skill")]),
        (
            "skillbox_fetch_requests_total",
            vec![("outcome", "timeout")],
        ),
        (
            "skillbox_approval_decision_seconds_count",
            vec![("outcome", "expired")],
        ),
        (
            "skillbox_tool_calls_total",
            [&tool[..], &[("outcome", "success")]].concat(),
        ),
        (
            "skillbox_tool_calls_total",
            [&tool[..], &[("outcome", "resource_limit")]].concat(),
        ),
        (
            "skillbox_tool_calls_total",
            [&tool[..], &[("outcome", "approval_denied")]].concat(),
        ),
        ("skillbox_tool_call_duration_seconds_count", tool.to_vec()),
    ] {
        assert_eq!(
            sample(&text, name, &labels),
            Some("0"),
            "{name} {labels:?} in\n{text}"
        );
    }
}

#[test]
fn call_duration_buckets_reach_past_the_approval_timeout() {
    let m = Metrics::new();
    let text = m.encode(&Scrape {
        tools: vec![("notes".into(), "add".into())],
        ..Scrape::default()
    });
    let finite: Vec<f64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("skillbox_tool_call_duration_seconds_bucket{"))
        .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next()?.parse().ok())
        .filter(|le: &f64| le.is_finite())
        .collect();
    // A write call that waited out the approval timeout and then ran still lands in a
    // finite bucket, not only in +Inf.
    let waited = Duration::from_millis(DEFAULT_TIMEOUT_MS + 10_000).as_secs_f64();
    assert!(finite.iter().any(|le| *le >= waited), "{finite:?}");
    assert!(finite.iter().any(|le| *le > 600.0), "{finite:?}");
    assert!(finite.iter().any(|le| *le <= 0.005), "{finite:?}");
}

#[test]
fn prometheus_text_names_counters_by_their_total_sample_and_has_no_eof() {
    let m = Metrics::new();
    m.observe_route("selected", Duration::from_micros(80));
    let scrape = Scrape {
        tools: vec![("notes".into(), "add".into())],
        ..Scrape::default()
    };
    let text = m.encode_as(&scrape, Format::Prometheus);
    assert!(
        text.contains("# TYPE skillbox_routes_total counter\n"),
        "{text}"
    );
    assert!(
        text.contains("skillbox_routes_total{outcome=\"selected\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE skillbox_tool_call_duration_seconds histogram\n"),
        "{text}"
    );
    assert!(!text.contains("# EOF"), "{text}");
    assert!(m.encode(&Scrape::default()).ends_with("# EOF\n"));
}
