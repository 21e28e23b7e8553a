//! The transport and the eras: every refusal says what was wrong, with its JSON-RPC code
//! and HTTP status, and no tool runs.

use http::StatusCode;
use serde_json::json;

use super::super::errors::{
    HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
};
use super::*;

const DISCOVER_META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

#[tokio::test]
async fn batch_array_is_refused_as_invalid_request() {
    let f = fixture();
    let body = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]"#;
    let a = post_raw(&f.gw, "/mcp", &[], body).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(a.error_code(), INVALID_REQUEST);
    assert!(a.error_message().contains("batch"), "{}", a.body);
    assert_eq!(a.body["id"], Value::Null);
}

#[tokio::test]
async fn oversized_body_is_413_naming_the_limit_key() {
    let f = fixture();
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"pad":"{}"}}}}"#,
        "x".repeat(5000)
    );
    let a = post_raw(&f.gw, "/mcp", &[], &big).await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(a.error_code(), INVALID_REQUEST);
    assert!(
        a.error_message()
            .contains("4096-byte limit (gateway.max_request_bytes)"),
        "{}",
        a.body
    );
}

#[tokio::test]
async fn body_that_is_not_json_is_a_parse_error() {
    let f = fixture();
    let a = post_raw(&f.gw, "/mcp", &[], "{not json").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(a.error_code(), PARSE_ERROR);
}

#[tokio::test]
async fn message_without_jsonrpc_2_or_method_is_invalid_request() {
    let f = fixture();
    for (body, why) in [
        (r#"{"id":1,"method":"tools/list"}"#, "jsonrpc"),
        (r#"{"jsonrpc":"2.0","id":1}"#, "method"),
        (
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#,
            "id",
        ),
        (r#""tools/list""#, "not an object"),
    ] {
        let a = post_raw(&f.gw, "/mcp", &[], body).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(a.error_code(), INVALID_REQUEST, "{body}");
        assert!(a.error_message().contains(why), "{body}: {}", a.body);
    }
}

#[tokio::test]
async fn unknown_method_is_404_method_not_found_naming_it() {
    let f = fixture();
    let a = legacy(&f.gw, "/mcp", "tools/destroy", json!({})).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(a.error_code(), METHOD_NOT_FOUND);
    assert!(
        a.error_message().contains("\"tools/destroy\""),
        "{}",
        a.body
    );
    assert_eq!(a.body["id"], "a", "the error answers the request's id");
}

#[tokio::test]
async fn modern_request_at_an_unsupported_version_is_32022_listing_the_served_ones() {
    let f = fixture();
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{
        "io.modelcontextprotocol/protocolVersion":"2099-01-01",
        "io.modelcontextprotocol/clientCapabilities":{}}}});
    let headers = [
        ("mcp-protocol-version", "2099-01-01"),
        ("mcp-method", "tools/list"),
    ];
    let a = post_raw(&f.gw, "/mcp", &headers, &body.to_string()).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(a.error_code(), UNSUPPORTED_PROTOCOL_VERSION);
    assert_eq!(a.body["error"]["data"]["requested"], "2099-01-01");
    assert_eq!(
        a.body["error"]["data"]["supported"],
        json!(["2025-06-18", "2025-11-25", "2026-07-28"])
    );
}

#[tokio::test]
async fn modern_request_whose_headers_disagree_with_the_body_is_header_mismatch() {
    let f = fixture();
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"notes.search",
        "arguments":{},"_meta":serde_json::from_str::<Value>(DISCOVER_META).unwrap()}});
    let body = body.to_string();
    for (headers, says) in [
        (
            vec![("mcp-method", "tools/call"), ("mcp-name", "notes.search")],
            "MCP-Protocol-Version",
        ),
        (
            vec![
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/list"),
                ("mcp-name", "notes.search"),
            ],
            "Mcp-Method",
        ),
        (
            vec![
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "notes.edit"),
            ],
            "Mcp-Name",
        ),
        (
            vec![
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "notes.search"),
            ],
            "more than once",
        ),
    ] {
        let a = post_raw(&f.gw, "/mcp", &headers, &body).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{headers:?}");
        assert_eq!(a.error_code(), HEADER_MISMATCH, "{headers:?}");
        assert!(a.error_message().contains(says), "{headers:?}: {}", a.body);
    }
    let stats = f.gw.records.store.all_skill_stats().unwrap();
    assert!(
        stats.is_empty(),
        "a refused request runs nothing: {stats:?}"
    );
}

#[tokio::test]
async fn base64_wrapped_mcp_name_matches_the_body() {
    let f = fixture();
    // "notes.search" wrapped as a client wraps names that are not plain ASCII.
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"notes.search",
        "arguments":{"text":1},"_meta":serde_json::from_str::<Value>(DISCOVER_META).unwrap()}});
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "=?base64?bm90ZXMuc2VhcmNo?="),
    ];
    let a = post_raw(&f.gw, "/mcp", &headers, &body.to_string()).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
}

#[tokio::test]
async fn modern_envelope_without_client_capabilities_is_invalid_params() {
    let f = fixture();
    let body = json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{
        "io.modelcontextprotocol/protocolVersion":"2026-07-28"}}});
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "server/discover"),
    ];
    let a = post_raw(&f.gw, "/mcp", &headers, &body.to_string()).await;
    assert_eq!(a.error_code(), INVALID_PARAMS);
    assert!(
        a.error_message().contains("clientCapabilities"),
        "{}",
        a.body
    );
    let bare = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#;
    let a = post_raw(&f.gw, "/mcp", &[], bare).await;
    assert_eq!(a.error_code(), INVALID_PARAMS);
    assert!(a.error_message().contains("_meta"), "{}", a.body);
}

#[tokio::test]
async fn handshake_request_at_an_unsupported_header_version_is_refused() {
    let f = fixture();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let a = post_raw(
        &f.gw,
        "/mcp",
        &[("mcp-protocol-version", "2024-01-01")],
        body,
    )
    .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(a.error_code(), UNSUPPORTED_PROTOCOL_VERSION);
    assert!(a.error_message().contains("2024-01-01"), "{}", a.body);
    // The modern version without the modern envelope says what is missing.
    let a = post_raw(
        &f.gw,
        "/mcp",
        &[("mcp-protocol-version", "2026-07-28")],
        body,
    )
    .await;
    assert_eq!(a.error_code(), INVALID_PARAMS);
    assert!(a.error_message().contains("_meta"), "{}", a.body);
}

#[tokio::test]
async fn initialize_agrees_on_a_served_version_and_offers_the_latest_otherwise() {
    let f = fixture();
    for (asked, agreed) in [
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2024-11-05", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ] {
        let a = legacy(
            &f.gw,
            "/mcp",
            "initialize",
            json!({"protocolVersion": asked,
            "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
        )
        .await;
        assert_eq!(a.result()["protocolVersion"], agreed, "{asked}");
        assert_eq!(a.result()["serverInfo"]["name"], "skillbox");
        assert!(
            a.result().get("resultType").is_none(),
            "no 2026 fields in the handshake era"
        );
    }
    let a = legacy(&f.gw, "/mcp", "initialize", json!({})).await;
    assert_eq!(a.error_code(), INVALID_PARAMS);
}

#[tokio::test]
async fn notification_and_client_response_are_accepted_without_a_body() {
    let f = fixture();
    for body in [
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":5,"result":{}}"#,
    ] {
        let a = post_raw(&f.gw, "/mcp", &[], body).await;
        assert_eq!(a.status, StatusCode::ACCEPTED, "{body}");
        assert_eq!(a.body, Value::Null);
    }
}

#[tokio::test]
async fn discover_declares_versions_skills_extension_and_cache_hints() {
    let f = fixture();
    let a = modern(&f.gw, "/mcp", "server/discover", json!({})).await;
    let r = a.result();
    assert_eq!(
        r["supportedVersions"],
        json!(["2025-06-18", "2025-11-25", "2026-07-28"])
    );
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["ttlMs"], 0);
    assert_eq!(r["cacheScope"], "private");
    assert!(r["capabilities"]["tools"].is_object(), "{r}");
    assert_eq!(
        r["capabilities"]["extensions"]["io.modelcontextprotocol/skills"],
        json!({})
    );
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "skillbox"
    );
}

#[tokio::test]
async fn ping_is_served_in_the_handshake_era_only() {
    let f = fixture();
    assert_eq!(
        legacy(&f.gw, "/mcp", "ping", json!({})).await.result(),
        &json!({})
    );
    let a = modern(&f.gw, "/mcp", "ping", json!({})).await;
    assert_eq!(a.error_code(), METHOD_NOT_FOUND);
    assert!(a.error_message().contains("removed"), "{}", a.body);
}

#[tokio::test]
async fn request_from_an_origin_not_allowed_is_403_naming_the_config_key() {
    let f = fixture();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let a = post_raw(&f.gw, "/mcp", &[("origin", "https://evil.example")], body).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(
        a.error_message().contains("https://evil.example"),
        "{}",
        a.body
    );
    assert!(
        a.error_message().contains("[mcp] allowed_origins"),
        "{}",
        a.body
    );

    let mut config = (*f.gw.calls.load.config()).clone();
    config.mcp.allowed_origins = vec!["https://app.example/".into()];
    let catalog = discover(std::slice::from_ref(&f.skills), DiscoveryOptions::default());
    f.gw.calls.load.set_catalog(catalog, Some(config));
    let a = post_raw(&f.gw, "/mcp", &[("origin", "https://app.example")], body).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let a = post_raw(
        &f.gw,
        "/mcp",
        &[("origin", "https://app.example.evil")],
        body,
    )
    .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
}
