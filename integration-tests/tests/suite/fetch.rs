//! The fetch proxy, driven by a python tool of the `net` skill, which declares
//! `http://127.0.0.1:<allowed>` and `http://127.0.0.1:<private>`; the config allow-lists
//! only `127.0.0.1:<allowed>` and caps responses at 4096 bytes.

use serde_json::{json, Value};

use crate::harness::server::HELLO;
use crate::harness::{Options, Skillbox, MAX_RESPONSE_BYTES};

/// The tool's view of a fetch: `{"ok": true, "result": ...}` or `{"ok": false, "code",
/// "message"}`.
fn fetch(sb: &Skillbox, url: &str) -> Value {
    sb.call_ok("net:fetch", json!({"url": url}))
}

fn assert_refused(r: &Value, code: i64, needles: &[&str]) {
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["code"], code, "{r}");
    let message = r["message"].as_str().unwrap();
    for n in needles {
        assert!(message.contains(n), "{n:?} not in {message:?}");
    }
}

#[test]
fn fetch_reaches_a_local_server_allowed_by_config_and_declared_by_the_skill() {
    let sb = Skillbox::start(Options::default());
    let r = fetch(&sb, &sb.allowed.url("/hello"));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["result"]["status"], 200, "{r}");
    assert_eq!(r["result"]["body"], HELLO, "{r}");
    assert_eq!(sb.allowed.hits(), vec!["/hello".to_string()]);

    // A redirect within the declared, allow-listed origin is followed.
    let r = fetch(
        &sb,
        &sb.allowed
            .url(&format!("/redirect?to={}", sb.allowed.url("/hello"))),
    );
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["result"]["body"], HELLO, "{r}");
}

#[test]
fn fetch_refuses_a_host_the_skill_did_not_declare() {
    let sb = Skillbox::start(Options::default());
    let r = fetch(&sb, "https://example.com/");
    assert_refused(
        &r,
        -32001,
        &[
            "fetch refused",
            "https://example.com",
            "not in the skill's permissions.network",
        ],
    );
    // Same host, a port the skill did not declare.
    let r = fetch(
        &sb,
        &format!("http://127.0.0.1:{}/hello", sb.allowed.port + 1),
    );
    assert_refused(&r, -32001, &["not in the skill's permissions.network"]);
    assert!(sb.allowed.hits().is_empty(), "{:?}", sb.allowed.hits());
}

#[test]
fn fetch_refuses_a_private_address_the_operator_did_not_allow_list() {
    let sb = Skillbox::start(Options::default());
    // Declared by the skill, but 127.0.0.1:<private> is not in [fetch] allow_private.
    let r = fetch(&sb, &sb.private.url("/hello"));
    let key = format!("127.0.0.1:{}", sb.private.port);
    assert_refused(
        &r,
        -32001,
        &["fetch refused", "loopback", "allow_private", key.as_str()],
    );
    assert!(
        sb.private.hits().is_empty(),
        "the refused fetch reached the server: {:?}",
        sb.private.hits()
    );
}

#[test]
fn fetch_refuses_a_redirect_to_a_forbidden_host() {
    let sb = Skillbox::start(Options::default());
    // To a host the skill did not declare.
    let r = fetch(
        &sb,
        &sb.allowed.url("/redirect?to=http://evil.example/steal"),
    );
    assert_refused(
        &r,
        -32001,
        &["fetch refused", "redirect from", "http://evil.example"],
    );
    // To the declared but not allow-listed private server.
    let r = fetch(
        &sb,
        &sb.allowed
            .url(&format!("/redirect?to={}", sb.private.url("/hello"))),
    );
    assert_refused(&r, -32001, &["fetch refused", "loopback", "allow_private"]);
    assert!(sb.private.hits().is_empty(), "{:?}", sb.private.hits());
}

#[test]
fn fetch_refuses_an_oversize_response() {
    let sb = Skillbox::start(Options::default());
    let limit = format!("exceeds the limit of {MAX_RESPONSE_BYTES} bytes");
    // Announced by Content-Length.
    let r = fetch(&sb, &sb.allowed.url("/big"));
    assert_refused(&r, -32602, &["fetch refused", "response body", &limit]);
    // Streamed without a length until the connection closes.
    let r = fetch(&sb, &sb.allowed.url("/big-stream"));
    assert_refused(&r, -32602, &["fetch refused", "response body", &limit]);
}
