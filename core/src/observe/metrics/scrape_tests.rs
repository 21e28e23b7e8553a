//! The outcome labels set to 0 before they happen, the call-duration buckets past the
//! approval timeout, and the Prometheus text format of the registry.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use skillbox_protocol::result::{ErrorKind, ToolResult};

use super::*;
use crate::approvals::DEFAULT_TIMEOUT_MS;

#[test]
fn every_known_outcome_is_zero_before_it_happens() {
    let m = Metrics::new();
    let text = m.encode(&Scrape {
        tools: vec![("notes".into(), "add".into())],
        ..Scrape::default()
    });
    for want in [
        "skillbox_routes_total{outcome=\"no_skill\"} 0\n",
        "skillbox_fetch_requests_total{outcome=\"timeout\"} 0\n",
        "skillbox_approval_decision_seconds_count{outcome=\"expired\"} 0\n",
        "skillbox_tool_calls_total{skill=\"notes\",tool=\"add\",outcome=\"success\"} 0\n",
        "skillbox_tool_calls_total{skill=\"notes\",tool=\"add\",outcome=\"resource_limit\"} 0\n",
        "skillbox_tool_call_duration_seconds_count{skill=\"notes\",tool=\"add\"} 0\n",
    ] {
        assert!(text.contains(want), "{want} missing from\n{text}");
    }
}

#[test]
fn a_call_that_waited_out_the_approval_timeout_lands_in_a_finite_bucket() {
    let m = Metrics::new();
    let waited = Duration::from_millis(DEFAULT_TIMEOUT_MS + 10_000);
    let denied = ToolResult::failed("c1", ErrorKind::ApprovalDenied, "expired", 0);
    m.observe_call("notes", "add", &denied, waited);
    let text = m.encode(&Scrape::default());
    let finite: Vec<(f64, u64)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("skillbox_tool_call_duration_seconds_bucket{"))
        .filter_map(|l| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            let count = l.rsplit(' ').next()?.parse().ok()?;
            Some((le.parse::<f64>().ok()?, count))
        })
        .filter(|(le, _)| le.is_finite())
        .collect();
    let first_holding = finite.iter().find(|(_, n)| *n == 1).unwrap();
    assert!(first_holding.0 >= waited.as_secs_f64(), "{finite:?}");
    assert!(finite.last().unwrap().0 > 600.0, "{finite:?}");
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
