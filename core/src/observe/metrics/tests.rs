//! The metrics' counting, the gauges of a scrape, the outcome labels set to 0, the call
//! buckets, and the Prometheus text format.

#![allow(clippy::unwrap_used)]

use skillbox_protocol::result::ErrorKind;

use super::*;
use crate::approvals::DEFAULT_TIMEOUT_MS;

fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines().find(|l| l.starts_with(prefix))
}

#[test]
fn calls_are_counted_by_skill_tool_and_outcome() {
    let m = Metrics::new();
    let ok = ToolResult::ok("c1", serde_json::json!({}), 3);
    let denied = ToolResult::failed("c2", ErrorKind::ApprovalDenied, "no", 1);
    m.observe_call("notes", "add", &ok, Duration::from_millis(3));
    m.observe_call("notes", "add", &ok, Duration::from_millis(4));
    m.observe_call("notes", "add", &denied, Duration::from_millis(1));
    let text = m.encode(&Scrape::default());
    assert_eq!(
        line(
            &text,
            "skillbox_tool_calls_total{skill=\"notes\",tool=\"add\",outcome=\"success\"}"
        ),
        Some("skillbox_tool_calls_total{skill=\"notes\",tool=\"add\",outcome=\"success\"} 2")
    );
    assert!(
        text.contains(
            "skillbox_tool_calls_total{skill=\"notes\",tool=\"add\",outcome=\"approval_denied\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("skillbox_tool_call_duration_seconds_count{skill=\"notes\",tool=\"add\"} 3"),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[test]
fn gauges_follow_each_scrape_and_forget_gone_executors() {
    let m = Metrics::new();
    let text = m.encode(&Scrape {
        approvals_pending: 2,
        executors: vec![
            ("10.0.0.1:7071".into(), true),
            ("10.0.0.2:7071".into(), false),
        ],
        disabled_skills: 1,
        tools: Vec::new(),
    });
    assert!(text.contains("skillbox_approvals_pending 2\n"), "{text}");
    assert!(text.contains("skillbox_disabled_skills 1\n"), "{text}");
    assert!(text.contains("skillbox_executor_healthy{executor=\"10.0.0.1:7071\"} 1\n"));
    assert!(text.contains("skillbox_executor_healthy{executor=\"10.0.0.2:7071\"} 0\n"));
    let text = m.encode(&Scrape {
        executors: vec![("10.0.0.1:7071".into(), true)],
        ..Scrape::default()
    });
    assert!(text.contains("skillbox_approvals_pending 0\n"), "{text}");
    assert!(!text.contains("10.0.0.2"), "{text}");
}

#[test]
fn routes_fetches_spawns_and_decisions_are_recorded() {
    let m = Metrics::new();
    m.observe_route("selected", Duration::from_micros(80));
    m.observe_route("no_skill", Duration::from_micros(40));
    m.observe_fetch("ok");
    m.observe_fetch("permission_denied");
    m.observe_fetch("permission_denied");
    m.observe_spawn(Duration::from_millis(2));
    m.observe_decision("approved", Duration::from_secs(5));
    let text = m.encode(&Scrape::default());
    for want in [
        "skillbox_routes_total{outcome=\"selected\"} 1",
        "skillbox_route_latency_seconds_count 2",
        "skillbox_fetch_requests_total{outcome=\"permission_denied\"} 2",
        "skillbox_executor_spawn_seconds_count 1",
        "skillbox_approval_decision_seconds_count{outcome=\"approved\"} 1",
    ] {
        assert!(text.contains(want), "{want} missing from\n{text}");
    }
}

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
