//! The gateway's bearer token: every route but `/healthz` needs it.

use serde_json::json;

use crate::harness::http;
use crate::harness::{Options, Skillbox};

fn assert_unauthorized(r: &http::Response, what: &str) {
    assert_eq!(r.status, 401, "{what}: {}", r.body);
    let body = r.json();
    assert_eq!(body["error_kind"], "permission_denied", "{what}: {body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("missing or wrong bearer token"),
        "{what}: {body}"
    );
}

#[test]
fn gateway_refuses_calls_without_or_with_a_wrong_token_but_serves_healthz() {
    let sb = Skillbox::start(Options::default());
    let call = json!({"tool": "echo:echo", "args": {"text": "x"}});

    let r = http::request(&sb.addr, "POST", "/v1/tools/call", &[], Some(&call)).unwrap();
    assert_unauthorized(&r, "no token");
    let r = http::request(&sb.addr, "GET", "/v1/tools", &[], None).unwrap();
    assert_unauthorized(&r, "no token on /v1/tools");
    let r = http::request(&sb.addr, "GET", "/v1/approvals", &[], None).unwrap();
    assert_unauthorized(&r, "no token on /v1/approvals");

    let wrong = format!("Bearer {}x", sb.token);
    let r = http::request(
        &sb.addr,
        "POST",
        "/v1/tools/call",
        &[("Authorization", wrong.as_str())],
        Some(&call),
    )
    .unwrap();
    assert_unauthorized(&r, "wrong token");

    let prefix = format!("Bearer {}", &sb.token[..sb.token.len() - 1]);
    let r = http::request(
        &sb.addr,
        "GET",
        "/v1/tools",
        &[("Authorization", prefix.as_str())],
        None,
    )
    .unwrap();
    assert_unauthorized(&r, "a prefix of the token");

    let basic = format!("Basic {}", sb.token);
    let r = http::request(
        &sb.addr,
        "GET",
        "/v1/tools",
        &[("Authorization", basic.as_str())],
        None,
    )
    .unwrap();
    assert_unauthorized(&r, "the token under another scheme");

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
