//! The gateway's bearer token: every route but `/healthz` needs it.

use serde_json::json;

use crate::harness::http;
use crate::harness::{Options, Skillbox};

fn assert_unauthorized(sb: &Skillbox, r: &http::Response, what: &str) {
    assert_eq!(r.status, 401, "{what}: {}", r.body);
    let body = r.json();
    assert_eq!(body["error_kind"], "permission_denied", "{what}: {body}");
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("missing or wrong bearer token"),
        "{what}: {body}"
    );
    // How a bot gets a token, and no path: neither the host's nor the operator's token.
    assert!(
        error.contains("skillbox tokens create NAME"),
        "{what}: {body}"
    );
    let token_file = sb.state().join("api-token");
    assert!(
        !error.contains(token_file.to_str().unwrap()) && !error.contains("api-token"),
        "{what}: {body}"
    );
    assert!(!error.contains(sb.ws.to_str().unwrap()), "{what}: {body}");
}

#[test]
fn gateway_refuses_calls_without_or_with_a_wrong_token_but_serves_healthz() {
    let sb = Skillbox::start(Options::default());
    let call = json!({"tool": "echo:echo", "args": {"text": "x"}});

    let r = http::request(&sb.addr, "POST", "/v1/tools/call", &[], Some(&call)).unwrap();
    assert_unauthorized(&sb, &r, "no token");
    let r = http::request(&sb.addr, "GET", "/v1/tools", &[], None).unwrap();
    assert_unauthorized(&sb, &r, "no token on /v1/tools");
    let r = http::request(&sb.addr, "GET", "/v1/approvals", &[], None).unwrap();
    assert_unauthorized(&sb, &r, "no token on /v1/approvals");

    let wrong = format!("Bearer {}x", sb.token);
    let r = http::request(
        &sb.addr,
        "POST",
        "/v1/tools/call",
        &[("Authorization", wrong.as_str())],
        Some(&call),
    )
    .unwrap();
    assert_unauthorized(&sb, &r, "wrong token");

    let prefix = format!("Bearer {}", &sb.token[..sb.token.len() - 1]);
    let r = http::request(
        &sb.addr,
        "GET",
        "/v1/tools",
        &[("Authorization", prefix.as_str())],
        None,
    )
    .unwrap();
    assert_unauthorized(&sb, &r, "a prefix of the token");

    let basic = format!("Basic {}", sb.token);
    let r = http::request(
        &sb.addr,
        "GET",
        "/v1/tools",
        &[("Authorization", basic.as_str())],
        None,
    )
    .unwrap();
    assert_unauthorized(&sb, &r, "the token under another scheme");

    let r = http::request(&sb.addr, "GET", "/healthz", &[], None).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "ok");
    assert_eq!(r.json()["executor"], "ok");

    // The right token works.
    assert_eq!(
        sb.call_ok("echo:echo", json!({"text": "x"}))["echo"]["text"],
        "x"
    );
}

#[test]
fn gateway_answers_405_to_a_known_path_asked_with_the_wrong_method() {
    let sb = Skillbox::start(Options::default());
    for (method, path, allow) in [
        ("GET", "/v1/tools/call", "POST"),
        ("POST", "/v1/tools", "GET"),
        ("GET", "/v1/contexts/c1/skills/echo", "PUT, DELETE"),
    ] {
        let r = sb.request(method, path, None);
        assert_eq!(r.status, 405, "{method} {path}: {}", r.body);
        let body = r.json();
        assert_eq!(body["error_kind"], "invalid_args", "{body}");
        assert!(
            body["error"].as_str().unwrap().contains(allow),
            "{method} {path}: {body}"
        );
    }
    let r = sb.request("GET", "/v1/nothing-here", None);
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(r.json()["error_kind"], "not_found");
}
