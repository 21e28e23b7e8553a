//! The operator console and observability against a real `skillbox up`: a browser
//! (Debian's chromium driven by Python Playwright) signs in, decides approvals while bots'
//! calls wait, and is refused cross-site posts (`python/console_browser.py`); the metrics
//! parsed by prometheus-client move by exactly the calls made (`python/console_metrics.py`);
//! calls and routing decisions are listed newest first within their bounds; `[log] format =
//! "json"` and a bot's `traceparent` reach the log lines.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::harness::http;
use crate::harness::python::{python, run_script};
use crate::harness::{poll, Options, Skillbox, POLL_TIMEOUT};

/// Debian's chromium (`CHROMIUM` overrides), or `None` after printing that `test` is
/// skipped; under CI (`CI` set) a missing browser fails.
fn chromium(test: &str) -> Option<PathBuf> {
    let path =
        PathBuf::from(std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()));
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test}: no chromium at {} under CI (.ci/run installs Debian's chromium)",
        path.display()
    );
    println!(
        "SKIPPED {test}: no chromium at {} (apt-get install chromium)",
        path.display()
    );
    None
}

/// The one-time sign-in link `up` printed.
fn sign_in_link(sb: &Skillbox) -> String {
    poll("the sign in: line of `up`", POLL_TIMEOUT, || {
        let text = std::fs::read_to_string(&sb.stdout).ok()?;
        text.lines()
            .find_map(|l| l.trim().strip_prefix("sign in:"))
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_string)
    })
}

#[test]
fn console_in_a_browser_signs_in_decides_approvals_and_refuses_cross_site_posts() {
    let test = "console_in_a_browser_signs_in_decides_approvals_and_refuses_cross_site_posts";
    let (Some(python), Some(chromium)) = (python(test), chromium(test)) else {
        return;
    };
    let sb = Skillbox::start(Options::default());
    let link = sign_in_link(&sb);
    assert!(
        link.starts_with(&format!("http://{}/console/link/", sb.addr)),
        "{link}"
    );
    assert!(
        !link.contains(&sb.token),
        "the API token must never be in a URL"
    );
    let base = format!("http://{}", sb.addr);
    // SKILLBOX_CONSOLE_SCREENSHOT=docs/console-approvals.png refreshes the docs' picture.
    let shot = std::env::var("SKILLBOX_CONSOLE_SCREENSHOT").unwrap_or_default();
    let chromium = chromium.display().to_string();
    // The bot's calls go with a token of its own; the browser decides them as the operator.
    let bot = sb.bot_token("telegram", &[]);
    let out = run_script(
        &python,
        "console_browser.py",
        &[&base, &sb.token, &link, &shot],
        &[
            ("CHROMIUM", &chromium),
            ("BOT_TOKEN", &bot),
            ("BOT_NAME", "telegram"),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(stdout.contains("console browser checks passed"), "{stdout}");
}

#[test]
fn metrics_counters_move_by_exactly_the_calls_made() {
    let Some(python) = python("metrics_counters_move_by_exactly_the_calls_made") else {
        return;
    };
    let sb = Skillbox::start(Options::default());
    let base = format!("http://{}", sb.addr);
    let out = run_script(
        &python,
        "console_metrics.py",
        &[
            &base,
            &sb.token,
            &sb.allowed.url("/hello"),
            &sb.private.url("/hello"),
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("metrics checks passed"), "{stdout}");
}

fn ids(list: &Value, key: &str, id: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}: {list}"))
        .iter()
        .map(|r| r[id].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn routing_decisions_are_listed_newest_first_and_kept_to_the_bound() {
    let sb = Skillbox::start(Options {
        extra_toml: "[observe]\nroutes_kept = 3\nmax_list_limit = 10\n".into(),
        ..Options::default()
    });
    let mut made = Vec::new();
    for q in [
        "echo hi",
        "count words",
        "echo again",
        "count more words",
        "echo last",
    ] {
        let r = sb.request("POST", "/v1/route", Some(&json!({"query": q})));
        assert_eq!(r.status, 200, "{}", r.body);
        made.push(r.json()["route_id"].as_str().unwrap().to_string());
    }
    let r = sb.request("GET", "/v1/routes?limit=10", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let listed = ids(&r.json(), "routes", "route_id");
    let newest: Vec<String> = made.iter().rev().take(3).cloned().collect();
    assert_eq!(listed, newest, "the 3 newest, newest first");
    let r = sb.request("GET", &format!("/v1/routes/{}", made[0]), None);
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.body.contains("routes_kept"), "{}", r.body);
    let r = sb.request("GET", &format!("/v1/routes/{}", made[4]), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let one = r.json();
    assert_eq!(one["query"], "echo last");
    assert_eq!(one["executed"], false);
    assert!(
        one["plan"]["candidates"][0]["breakdown"]["intent_match"].is_number(),
        "{one}"
    );

    // An executed plan carries the state machine's events.
    let r = sb.request(
        "POST",
        "/v1/route/execute",
        Some(&json!({"query": "echo this", "args": {"text": "hi"}})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let route_id = r.json()["plan"]["route_id"].as_str().unwrap().to_string();
    let one = sb
        .request("GET", &format!("/v1/routes/{route_id}"), None)
        .json();
    assert_eq!(one["executed"], true, "{one}");
    assert!(!one["events"].as_array().unwrap().is_empty(), "{one}");
    // One spelling for a transition, here and in the run's answer.
    let (ran, stored) = (&r.json()["transitions"], &one["events"]);
    assert_eq!(stored[0]["from"], ran[0]["from"], "{one}");
    assert_eq!(stored[0]["to"], ran[0]["to"], "{one}");
    assert!(stored[0].get("from_state").is_none(), "{one}");

    // The list limit is bounded and says by which key.
    for bad in ["11", "0", "many"] {
        let r = sb.request("GET", &format!("/v1/routes?limit={bad}"), None);
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert!(r.body.contains("max_list_limit"), "{}", r.body);
    }
}

#[test]
fn calls_are_listed_newest_first_with_their_outcome() {
    let sb = Skillbox::start(Options::default());
    let first = sb.call("echo:echo", json!({"text": "one"}));
    let failed = sb.call("echo:echo", json!({"nope": 1}));
    let last = sb.call("echo:echo", json!({"text": "three"}));
    let r = sb.request("GET", "/v1/calls?limit=2", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let listed = r.json();
    assert_eq!(
        ids(&listed, "calls", "call_id"),
        [
            last["call_id"].as_str().unwrap(),
            failed["call_id"].as_str().unwrap()
        ]
    );
    let f = &listed["calls"][1];
    assert_eq!(f["skill"], "echo");
    assert_eq!(f["tool"], "echo");
    assert_eq!(f["success"], false);
    assert_eq!(f["error_kind"], "invalid_args");
    assert!(f["duration_ms"].is_u64());
    let ok = sb
        .request("GET", "/v1/calls?limit=10&outcome=success&skill=echo", None)
        .json();
    assert_eq!(
        ids(&ok, "calls", "call_id"),
        [
            last["call_id"].as_str().unwrap(),
            first["call_id"].as_str().unwrap()
        ]
    );
    let r = sb.request("GET", "/v1/calls?outcome=bogus", None);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("error kind"), "{}", r.body);
    // Without the token, nothing.
    let r = http::request(&sb.addr, "GET", "/v1/calls", &[], None).unwrap();
    assert_eq!(r.status, 401);
    let r = http::request(&sb.addr, "GET", "/metrics", &[], None).unwrap();
    assert_eq!(r.status, 401);
}

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn stderr_of(sb: &Skillbox) -> String {
    std::fs::read_to_string(&sb.stderr).unwrap_or_default()
}

#[test]
fn traceparent_from_a_bot_reaches_the_executor_log_lines() {
    let sb = Skillbox::start(Options::default());
    let auth = format!("Bearer {}", sb.token);
    // Arguments the executor refuses: it logs a warning inside the call's span.
    let r = http::request(
        &sb.addr,
        "POST",
        "/v1/tools/call",
        &[("Authorization", &auth), ("traceparent", TRACEPARENT)],
        Some(&json!({"tool": "echo:echo", "args": {"nope": 1}})),
    )
    .unwrap();
    assert_eq!(r.json()["error_kind"], "invalid_args", "{}", r.body);
    let line = poll("the executor's warning", POLL_TIMEOUT, || {
        stderr_of(&sb)
            .lines()
            .find(|l| l.contains("tool call refused or failed"))
            .map(str::to_string)
    });
    assert!(
        line.contains(&format!("traceparent={TRACEPARENT}")),
        "{line}"
    );
    // A malformed value is dropped, not forwarded.
    let r = http::request(
        &sb.addr,
        "POST",
        "/v1/tools/call",
        &[("Authorization", &auth), ("traceparent", "00-zz-evil-01")],
        Some(&json!({"tool": "echo:echo", "args": {"nope": 2}})),
    )
    .unwrap();
    assert_eq!(r.json()["error_kind"], "invalid_args");
    poll("the second warning", POLL_TIMEOUT, || {
        (stderr_of(&sb)
            .matches("tool call refused or failed")
            .count()
            == 2)
            .then_some(())
    });
    assert!(
        !stderr_of(&sb).contains("00-zz-evil-01"),
        "{}",
        stderr_of(&sb)
    );
}

#[test]
fn log_format_json_writes_one_json_object_per_line_without_colour() {
    let sb = Skillbox::start(Options {
        extra_toml: "[log]\nformat = \"json\"\n".into(),
        ..Options::default()
    });
    // A core warning (a refused console sign-in) and an executor warning (refused args).
    let r = http::request(
        &sb.addr,
        "POST",
        "/console/signin",
        &[("Origin", "http://evil.example")],
        None,
    )
    .unwrap();
    assert_eq!(r.status, 403, "{}", r.body);
    let auth = format!("Bearer {}", sb.token);
    http::request(
        &sb.addr,
        "POST",
        "/v1/tools/call",
        &[("Authorization", &auth), ("traceparent", TRACEPARENT)],
        Some(&json!({"tool": "echo:echo", "args": {"nope": 1}})),
    )
    .unwrap();
    let text = poll("both warnings", POLL_TIMEOUT, || {
        let t = stderr_of(&sb);
        (t.contains("console request refused") && t.contains("tool call refused or failed"))
            .then_some(t)
    });
    assert!(
        !text.contains('\u{1b}'),
        "colour codes in a log file: {text}"
    );
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not one JSON object per line ({e}): {line}"));
        assert!(v["level"].is_string() && v["fields"].is_object(), "{line}");
    }
    let executor = text
        .lines()
        .find(|l| l.contains("tool call refused or failed"))
        .unwrap();
    let v: Value = serde_json::from_str(executor).unwrap();
    assert_eq!(v["span"]["traceparent"], TRACEPARENT, "{executor}");
}

/// The docs' picture of the approvals page exists (the browser test refreshes it).
#[test]
fn docs_have_the_approvals_screenshot() {
    let png = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/console-approvals.png");
    let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
}
