//! Requests through the route table against a gateway over a test dispatcher (no server,
//! no executor): the approval routes' answers and the one error mapping.

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use skillbox_protocol::skill::{Catalog, Security};

use super::web::request::Body;
use super::{table, Gateway};
use crate::state::store::{ApprovalRecord, ApprovalStatus};

fn gateway(ws: &std::path::Path) -> Gateway {
    super::test_gateway(
        ws,
        Catalog::default(),
        ws.join("skills"),
        "gateway-token-3f9a1c77e2",
        1024,
        super::console::Console::new(&Default::default()),
    )
}

/// `method path` with `body`, answered through the table as the server would.
async fn send(
    gw: &Gateway,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let body: Body = Full::new(Bytes::from(bytes))
        .map_err(|never| match never {})
        .boxed();
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q.to_string())),
        None => (path, None),
    };
    let asked = table::Asked {
        method: &method,
        path,
        caller: Some(crate::auth::Caller::Operator),
    };
    let r = match table::dispatch(gw, asked, query, http::HeaderMap::new(), body).await {
        Ok(r) => r,
        Err(e) => e.into_response().map(Into::into),
    };
    let status = r.status();
    let bytes = r.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

fn pending(gw: &Gateway, id: &str) {
    gw.calls
        .pipeline
        .store()
        .insert_approval(&ApprovalRecord {
            id: id.to_string(),
            skill: "notes".into(),
            tool: "append".into(),
            args_hash: "0".repeat(64),
            args: json!({}),
            security: Security::Write,
            status: ApprovalStatus::Pending,
            created_at: crate::state::store::unix_ms_now(),
            decided_at: None,
            reason: None,
            requested_by: "operator".into(),
            context_id: None,
            decided_by: None,
        })
        .unwrap();
}

/// Makes every later approval query fail as a broken database would.
fn break_approvals_table(ws: &std::path::Path) {
    let db = crate::state::Workspace::new(ws).db_file();
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch("DROP TABLE approvals").unwrap();
}

#[test]
fn gateway_debug_does_not_print_the_api_token() {
    let ws = tempfile::tempdir().unwrap();
    let gw = gateway(ws.path());
    let debug = format!("{gw:?}");
    assert!(!debug.contains("gateway-token-3f9a1c77e2"), "{debug}");
    assert!(debug.contains("token: ***"), "{debug}");
}

#[tokio::test]
async fn decide_with_a_broken_store_is_503_unavailable_not_409() {
    let ws = tempfile::tempdir().unwrap();
    let gw = gateway(ws.path());
    pending(&gw, "ap_store");
    break_approvals_table(ws.path());
    let (status, body) = send(
        &gw,
        Method::POST,
        "/v1/approvals/ap_store",
        Some(json!({"decision": "approve"})),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error_kind"], "unavailable", "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("approvals"),
        "names the failing table: {body}"
    );
}

#[tokio::test]
async fn listing_approvals_with_a_broken_store_is_503_unavailable() {
    let ws = tempfile::tempdir().unwrap();
    let gw = gateway(ws.path());
    break_approvals_table(ws.path());
    let (status, body) = send(&gw, Method::GET, "/v1/approvals?status=pending", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error_kind"], "unavailable", "{body}");
}

#[tokio::test]
async fn decide_parses_approve_and_deny_with_a_reason() {
    let ws = tempfile::tempdir().unwrap();
    let gw = gateway(ws.path());
    pending(&gw, "ap_yes");
    pending(&gw, "ap_no");
    let (status, body) = send(
        &gw,
        Method::POST,
        "/v1/approvals/ap_yes",
        Some(json!({"decision": "approve"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "approved", "{body}");
    let (status, body) = send(
        &gw,
        Method::POST,
        "/v1/approvals/ap_no",
        Some(json!({"decision": "deny", "reason": "not today"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "denied", "{body}");
    assert_eq!(body["reason"], "not today", "{body}");
}

#[tokio::test]
async fn decide_refuses_an_unknown_decision_naming_the_two_it_takes() {
    let ws = tempfile::tempdir().unwrap();
    let gw = gateway(ws.path());
    pending(&gw, "ap_1");
    for decision in [json!("maybe"), json!("Approve"), json!("")] {
        let (status, body) = send(
            &gw,
            Method::POST,
            "/v1/approvals/ap_1",
            Some(json!({ "decision": decision })),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{decision}: {body}");
        assert_eq!(body["error_kind"], "invalid_args", "{body}");
        let error = body["error"].as_str().unwrap();
        assert!(
            error.starts_with("request body: unknown variant")
                && error.contains("expected `approve` or `deny`"),
            "{decision}: {error}"
        );
    }
    let (status, body) = send(
        &gw,
        Method::POST,
        "/v1/approvals/ap_1",
        Some(json!({ "decision": true })),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error_kind"], "invalid_args", "{body}");
    // Nothing was decided.
    let record = gw.approvals.approvals.get("ap_1").unwrap();
    assert_eq!(record.status, ApprovalStatus::Pending);
}

#[tokio::test]
async fn decide_refuses_a_missing_decision_or_an_unknown_field() {
    let ws = tempfile::tempdir().unwrap();
    let gw = gateway(ws.path());
    pending(&gw, "ap_1");
    for (body, word) in [
        (json!({"reason": "x"}), "missing field `decision`"),
        (
            json!({"decision": "approve", "force": true}),
            "unknown field `force`",
        ),
    ] {
        let (status, answer) = send(&gw, Method::POST, "/v1/approvals/ap_1", Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert_eq!(answer["error_kind"], "invalid_args", "{answer}");
        assert!(answer["error"].as_str().unwrap().contains(word), "{answer}");
    }
}

#[tokio::test]
async fn decide_on_an_unknown_approval_is_404() {
    let ws = tempfile::tempdir().unwrap();
    let gw = gateway(ws.path());
    let (status, body) = send(
        &gw,
        Method::POST,
        "/v1/approvals/ap_none",
        Some(json!({"decision": "deny"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error_kind"], "not_found", "{body}");
}

#[tokio::test]
async fn oversized_body_is_413_resource_limit() {
    let ws = tempfile::tempdir().unwrap();
    let gw = gateway(ws.path());
    let big = json!({"decision": "approve", "reason": "x".repeat(2048)});
    let (status, body) = send(&gw, Method::POST, "/v1/approvals/ap_1", Some(big)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["error_kind"], "resource_limit", "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("1024-byte limit"),
        "{body}"
    );
}

#[tokio::test]
async fn put_on_a_skill_is_405_listing_get_and_delete() {
    let ws = tempfile::tempdir().unwrap();
    let gw = gateway(ws.path());
    let (status, body) = send(&gw, Method::PUT, "/v1/skills/echo", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
    assert_eq!(
        body["error"],
        "/v1/skills/echo does not take PUT; use GET, DELETE (docs/http-api.md)"
    );
}

#[tokio::test]
async fn repair_records_of_a_skill_are_readable() {
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(dir.path());
    let (status, body) = send(&gw, Method::GET, "/v1/skills/notes/repairs", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"repairs": []}));
    gw.calls
        .pipeline
        .store()
        .record_repair(&crate::state::store::RepairRecord {
            id: "rp_1".into(),
            skill: "notes".into(),
            run_id: "rt_1".into(),
            attempt: 0,
            error_signature: "KeyError".into(),
            root_cause: "a renamed field".into(),
            patched_files: vec!["skill.yaml".into()],
            expected_effect: "the call succeeds".into(),
            outcome: crate::state::store::RepairOutcome::Refused,
            check: Some("budget".into()),
            reason: Some("over budget".into()),
            at: 1,
        })
        .unwrap();
    let (status, body) = send(&gw, Method::GET, "/v1/skills/notes/repairs", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["repairs"][0]["id"], "rp_1", "{body}");
    assert_eq!(body["repairs"][0]["outcome"], "refused", "{body}");
    let (_, other) = send(&gw, Method::GET, "/v1/skills/mail/repairs", None).await;
    assert_eq!(other, json!({"repairs": []}));
}

#[tokio::test]
async fn reload_reads_secrets_env_again_without_answering_its_values() {
    let ws = tempfile::tempdir().unwrap();
    let gw = gateway(ws.path());
    assert!(gw
        .calls
        .availability
        .secrets()
        .get("RELOADED_KEY_Z9")
        .is_none());
    let state = crate::state::Workspace::new(ws.path()).state_dir();
    std::fs::write(
        state.join("secrets.env"),
        "RELOADED_KEY_Z9=sk-after-reload-81\n",
    )
    .unwrap();
    // No executor listens here: the reload answers 503 for it, after the core's own load.
    let (_status, body) = send(&gw, Method::POST, "/v1/skills/reload", None).await;
    assert_eq!(
        gw.calls
            .availability
            .secrets()
            .get("RELOADED_KEY_Z9")
            .unwrap()
            .0,
        "sk-after-reload-81"
    );
    assert!(!body.to_string().contains("sk-after-reload-81"), "{body}");
}

#[tokio::test]
async fn a_tool_name_that_is_neither_skill_tool_nor_a_builtin_is_refused_at_the_edge() {
    let ws = tempfile::tempdir().unwrap();
    let gw = gateway(ws.path());
    for bad in ["st", "echo.echo", ":x"] {
        let (status, body) = send(
            &gw,
            Method::POST,
            "/v1/tools/call",
            Some(json!({"tool": bad})),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["error_kind"], "invalid_args", "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("is not a tool name"),
            "{body}"
        );
    }
}
