//! Who may do what, through the gateway's authentication and route table: every operator
//! route refused to a bot, a bot limited to its skills, its contexts, its calls and routes,
//! approvals a bot may and may not decide, revoked and expired tokens.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use skillbox_protocol::skill::{discover, Catalog, DiscoveryOptions, Security};

use super::web::request::Body;
use super::{table, Gateway};
use crate::random::SystemSource;
use crate::state::store::{unix_ms_now, ApprovalRecord, ApprovalStatus};

mod files;

const OPERATOR_TOKEN: &str = "operator-token-5be1";

fn write_skill(root: &Path, name: &str) {
    let d = root.join(name);
    std::fs::create_dir_all(d.join("scripts")).unwrap();
    std::fs::write(
        d.join("SKILL.md"),
        format!(
            "---\nname: {name}\ndescription: The {name} skill, for {name} things.\n---\n# {name}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        d.join("skill.yaml"),
        format!(
            "name: {name}\ndescription: The {name} skill, for {name} things.\ntools:\n  - name: run\n    description: run {name}\n    command: [\"python3\", \"scripts/run.py\"]\n"
        ),
    )
    .unwrap();
    std::fs::write(d.join("scripts/run.py"), "print(1)\n").unwrap();
}

struct Fixture {
    _dir: tempfile::TempDir,
    gw: Gateway,
}

fn fixture(confirm_write: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let skills = ws.join("skills");
    for name in ["notes", "mail"] {
        write_skill(&skills, name);
    }
    let catalog: Catalog = discover(std::slice::from_ref(&skills), DiscoveryOptions::default());
    assert!(catalog.skipped.is_empty(), "{:?}", catalog.skipped);
    let mut gw = super::test_gateway(
        &ws,
        catalog,
        skills,
        OPERATOR_TOKEN,
        64 * 1024,
        super::console::Console::new(&Default::default()),
    );
    if confirm_write {
        let policy = crate::approvals::ApprovalPolicy {
            bots_confirm_write: true,
            ..Default::default()
        };
        let approvals = crate::approvals::Approvals::new(gw.records.store.clone(), policy);
        let d = crate::calls::test_dispatcher_with_approvals(&ws, std::sync::Arc::new(approvals));
        gw.set_parts(super::test_parts(d));
    }
    Fixture { _dir: dir, gw }
}

impl Fixture {
    fn bot(&self, name: &str, skills: Option<&[&str]>) -> String {
        let skills = skills.map(|s| s.iter().map(|x| x.to_string()).collect());
        (self.gw.bots)
            .create(&SystemSource::default(), name, skills, None)
            .unwrap()
            .0
    }

    /// `method path` with `token` as the bearer, authenticated and dispatched as the
    /// server does.
    async fn send(
        &self,
        token: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        let reply = match self.gw.authenticate(&headers) {
            Err(e) => Err(e),
            Ok(caller) => {
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
                    caller: Some(caller),
                };
                table::dispatch(&self.gw, asked, query, headers, body).await
            }
        };
        let r = reply.unwrap_or_else(|e| e.into_response().map(Into::into));
        let status = r.status();
        let bytes = r.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// `method path` with raw `bytes` as the body; the status, headers and raw answer.
    async fn send_raw(
        &self,
        token: &str,
        method: Method,
        path: &str,
        bytes: Vec<u8>,
    ) -> (StatusCode, http::HeaderMap, Bytes) {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        let caller = self.gw.authenticate(&headers).unwrap();
        let body: Body = Full::new(Bytes::from(bytes))
            .map_err(|never| match never {})
            .boxed();
        let asked = table::Asked {
            method: &method,
            path,
            caller: Some(caller),
        };
        let r = table::dispatch(&self.gw, asked, None, headers, body)
            .await
            .unwrap_or_else(|e| e.into_response().map(Into::into));
        let (parts, body) = r.into_parts();
        (
            parts.status,
            parts.headers,
            body.collect().await.unwrap().to_bytes(),
        )
    }

    fn approval(&self, id: &str, security: Security, requested_by: &str) {
        self.gw
            .records
            .store
            .insert_approval(&ApprovalRecord {
                id: id.into(),
                skill: "notes".into(),
                tool: "run".into(),
                args_hash: "0".repeat(64),
                args: json!({}),
                security,
                status: ApprovalStatus::Pending,
                created_at: unix_ms_now(),
                decided_at: None,
                reason: None,
                requested_by: requested_by.into(),
                context_id: Some("chat-1".into()),
                decided_by: None,
            })
            .unwrap();
    }
}

/// A path of `pattern` with every capture filled in.
fn sample_path(pattern: &str) -> String {
    pattern
        .split('/')
        .map(|seg| {
            if seg.starts_with("{*") {
                "a/b"
            } else if seg.starts_with('{') {
                "x1"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test]
async fn a_bot_token_is_refused_on_every_operator_route_naming_the_role() {
    let f = fixture(false);
    let bot = f.bot("tg", None);
    let mut refused = Vec::new();
    for route in table::routes() {
        if route.role != Some(crate::auth::Role::Operator) {
            continue;
        }
        let path = sample_path(route.pattern);
        let (status, body) = f
            .send(&bot, route.method.clone(), &path, Some(json!({})))
            .await;
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "{} {path}: {body}",
            route.method
        );
        assert_eq!(body["error_kind"], "permission_denied", "{body}");
        let why = body["error"].as_str().unwrap();
        assert!(
            why.contains("needs the operator role") && why.contains("\"tg\""),
            "{why}"
        );
        refused.push(format!("{} {}", route.method, route.pattern));
    }
    // The routes that change skills, trust, tokens, and read metrics are among them.
    for must in [
        "POST /v1/skills/install",
        "POST /v1/skills/{name}/update",
        "POST /v1/skills/reload",
        "DELETE /v1/skills/{name}",
        "POST /v1/trust/reload",
        "GET /metrics",
        "GET /v1/tokens",
        "POST /v1/tokens",
        "DELETE /v1/tokens/{name}",
    ] {
        assert!(
            refused.iter().any(|r| r == must),
            "{must} is not operator-only: {refused:?}"
        );
    }
}

#[tokio::test]
async fn the_operator_reaches_the_operator_routes() {
    let f = fixture(false);
    let (status, body) = f
        .send(OPERATOR_TOKEN, Method::GET, "/v1/tokens", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = f
        .send(
            OPERATOR_TOKEN,
            Method::POST,
            "/v1/tokens",
            Some(json!({"name": "ci", "skills": ["notes"], "expires_days": 3})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let token = body["token"].as_str().unwrap().to_string();
    assert_eq!(body["skills"], json!(["notes"]));
    let (status, _) = f.send(&token, Method::GET, "/v1/tools", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = f
        .send(OPERATOR_TOKEN, Method::GET, "/v1/tokens", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["tokens"][0]["name"], "ci", "{body}");
    assert!(
        body.to_string().find(&token).is_none(),
        "the list shows a token: {body}"
    );
    let (status, _) = f
        .send(OPERATOR_TOKEN, Method::DELETE, "/v1/tokens/ci", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = f.send(&token, Method::GET, "/v1/tools", None).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a revoked token still works: {body}"
    );
}

#[tokio::test]
async fn a_wrong_or_expired_token_is_401() {
    let f = fixture(false);
    let (status, _) = f
        .send("sbx_bot_forged", Method::GET, "/v1/tools", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let token = f.bot("old", None);
    let store = &f.gw.records.store;
    let mut row = store.bot_tokens().unwrap().remove(0);
    store.delete_bot_token("old").unwrap();
    row.expires_at = Some(unix_ms_now() - 1);
    store.insert_bot_token(&row).unwrap();
    f.gw.bots.reload().unwrap();
    let (status, body) = f.send(&token, Method::GET, "/v1/tools", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("expired"),
        "{body}"
    );
}

/// An unauthenticated caller learns how to get a token, not where the operator's is: the
/// 401 names no host path and no token file, with no token, a wrong one, or none on a
/// route of the table.
#[tokio::test]
async fn unauthenticated_401_names_no_host_path_and_not_the_operators_token_file() {
    let f = fixture(false);
    let mut answers = Vec::new();
    for token in ["sbx_bot_forged", ""] {
        let (status, body) = f.send(token, Method::GET, "/v1/tools", None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        answers.push(body["error"].as_str().unwrap().to_string());
    }
    let missing = f.gw.authenticate(&http::HeaderMap::new()).unwrap_err();
    answers.push(missing.message().to_string());
    let workspace = f._dir.path().display().to_string();
    for error in answers {
        assert!(error.contains("missing or wrong bearer token"), "{error}");
        assert!(error.contains("skillbox tokens create NAME"), "{error}");
        assert!(!error.contains("api-token"), "{error}");
        assert!(!error.contains(".skillbox"), "{error}");
        assert!(!error.contains(&workspace), "{error}");
        let absolute = error
            .split_whitespace()
            .any(|w| w.trim_start_matches(['(', '<', '"', '`']).starts_with('/'));
        assert!(!absolute, "an absolute path in: {error}");
    }
}

#[tokio::test]
async fn a_bot_limited_to_skills_sees_and_calls_only_those() {
    let f = fixture(false);
    let bot = f.bot("tg", Some(&["notes"]));
    let (_, tools) = f.send(&bot, Method::GET, "/v1/tools", None).await;
    let names: Vec<&str> = (tools["tools"].as_array().unwrap().iter())
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"notes:run"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("mail")), "{names:?}");
    let (_, skills) = f.send(&bot, Method::GET, "/v1/skills", None).await;
    assert_eq!(skills["skills"].as_array().unwrap().len(), 1, "{skills}");
    let (status, _) = f.send(&bot, Method::GET, "/v1/skills/mail", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = f
        .send(&bot, Method::GET, "/v1/skills/mail/files/SKILL.md", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for (tool, args) in [
        ("mail:run", json!({})),
        ("load_skill", json!({"name": "mail"})),
        (
            "run_skill_script",
            json!({"name": "mail", "script": "scripts/run.py"}),
        ),
    ] {
        let (status, r) = f
            .send(
                &bot,
                Method::POST,
                "/v1/tools/call",
                Some(json!({"tool": tool, "args": args})),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(r["error_kind"], "permission_denied", "{tool}: {r}");
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("may not use skill \"mail\""),
            "{r}"
        );
    }
    let (_, r) = f
        .send(
            &bot,
            Method::POST,
            "/v1/tools/call",
            Some(json!({"tool": "load_skill", "args": {"name": "notes"}})),
        )
        .await;
    assert_eq!(r["success"], true, "{r}");
    let (status, r) = f
        .send(&bot, Method::PUT, "/v1/contexts/c1/skills/mail", None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{r}");
    let (_, plan) = f
        .send(
            &bot,
            Method::POST,
            "/v1/route",
            Some(json!({"query": "send mail things"})),
        )
        .await;
    assert!(
        !plan.to_string().contains("\"mail\""),
        "the plan names a skill the bot may not use: {plan}"
    );
}

#[tokio::test]
async fn bot_b_gets_404_for_bot_a_s_context_everywhere() {
    let f = fixture(false);
    let a = f.bot("bot-a", None);
    let b = f.bot("bot-b", None);
    let (status, body) = f
        .send(&a, Method::PUT, "/v1/contexts/chat-1/skills/notes", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = f.send(&b, Method::GET, "/v1/contexts/chat-1", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("another caller"),
        "{body}"
    );
    let (status, _) = f
        .send(&b, Method::PUT, "/v1/contexts/chat-1/skills/mail", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = f
        .send(&b, Method::DELETE, "/v1/contexts/chat-1/skills/notes", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, r) = f
        .send(
            &b,
            Method::POST,
            "/v1/tools/call",
            Some(json!({"tool": "notes:run", "context_id": "chat-1"})),
        )
        .await;
    assert_eq!(r["error_kind"], "not_found", "{r}");
    let (status, _) = f
        .send(
            &b,
            Method::POST,
            "/v1/route",
            Some(json!({"query": "notes", "context_id": "chat-1"})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = f
        .send(
            &b,
            Method::POST,
            "/v1/route/execute",
            Some(json!({"query": "notes", "context_id": "chat-1"})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let (_, r) = f.send(&b, Method::POST, "/mcp/chat-1", Some(list)).await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("another caller"),
        "{r}"
    );
    // The owner and the operator still reach it, and the pin is still there.
    let (status, body) = f.send(&a, Method::GET, "/v1/contexts/chat-1", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["pinned"][0]["name"], "notes", "{body}");
    let (status, _) = f
        .send(OPERATOR_TOKEN, Method::GET, "/v1/contexts/chat-1", None)
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_bot_reads_only_its_own_calls_routes_and_approvals() {
    let f = fixture(false);
    let a = f.bot("bot-a", None);
    let b = f.bot("bot-b", None);
    let call = json!({"tool": "notes:nope"});
    let (_, ra) = f
        .send(&a, Method::POST, "/v1/tools/call", Some(call.clone()))
        .await;
    let (_, rb) = f.send(&b, Method::POST, "/v1/tools/call", Some(call)).await;
    let (_, calls) = f.send(&b, Method::GET, "/v1/calls", None).await;
    let ids: Vec<&str> = (calls["calls"].as_array().unwrap().iter())
        .filter_map(|c| c["call_id"].as_str())
        .collect();
    assert_eq!(ids, [rb["call_id"].as_str().unwrap()], "{calls}");
    assert_eq!(calls["calls"][0]["caller"], "bot-b");
    let (_, all) = f.send(OPERATOR_TOKEN, Method::GET, "/v1/calls", None).await;
    assert!(all.to_string().contains(ra["call_id"].as_str().unwrap()));
    // One call: its own with its (empty) egress record, another bot's not at all.
    let own = format!("/v1/calls/{}", rb["call_id"].as_str().unwrap());
    let (status, one) = f.send(&b, Method::GET, &own, None).await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(
        (one["caller"].as_str(), &one["egress"]),
        (Some("bot-b"), &json!([]))
    );
    let other = format!("/v1/calls/{}", ra["call_id"].as_str().unwrap());
    let (status, _) = f.send(&b, Method::GET, &other, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, plan) = f
        .send(
            &a,
            Method::POST,
            "/v1/route",
            Some(json!({"query": "notes things"})),
        )
        .await;
    let route_id = plan["route_id"].as_str().unwrap();
    let (status, _) = f
        .send(&b, Method::GET, &format!("/v1/routes/{route_id}"), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, routes) = f.send(&b, Method::GET, "/v1/routes", None).await;
    assert!(routes["routes"].as_array().unwrap().is_empty(), "{routes}");
    let (status, detail) = f
        .send(&a, Method::GET, &format!("/v1/routes/{route_id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(detail["caller"], "bot-a", "{detail}");
    f.approval("ap-a", Security::Write, "bot-a");
    let (_, listed) = f.send(&b, Method::GET, "/v1/approvals", None).await;
    assert!(
        listed["approvals"].as_array().unwrap().is_empty(),
        "{listed}"
    );
    let (_, listed) = f.send(&a, Method::GET, "/v1/approvals", None).await;
    assert_eq!(listed["approvals"][0]["requested_by"], "bot-a", "{listed}");
}

#[tokio::test]
async fn a_bot_decides_no_approval_by_default() {
    let f = fixture(false);
    let a = f.bot("bot-a", None);
    for (id, security) in [("w", Security::Write), ("s", Security::Sign)] {
        f.approval(id, security, "bot-a");
        let (status, body) = f
            .send(
                &a,
                Method::POST,
                &format!("/v1/approvals/{id}"),
                Some(json!({"decision": "approve"})),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{id}: {body}");
        assert_eq!(body["error_kind"], "permission_denied");
        assert!(
            body["error"].as_str().unwrap().contains("operator role"),
            "{body}"
        );
        let still = f.gw.approvals.approvals.get(id).unwrap();
        assert_eq!(still.status, ApprovalStatus::Pending);
    }
}

#[tokio::test]
async fn bots_confirm_write_lets_a_bot_confirm_its_own_write_calls_only_never_a_sign() {
    let f = fixture(true);
    let a = f.bot("bot-a", None);
    f.approval("own-write", Security::Write, "bot-a");
    f.approval("other-write", Security::Write, "bot-b");
    f.approval("own-sign", Security::Sign, "bot-a");
    let approve = Some(json!({"decision": "approve"}));
    let (status, body) = f
        .send(&a, Method::POST, "/v1/approvals/own-write", approve.clone())
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decided_by"], "bot-a", "{body}");
    let (status, body) = f
        .send(
            &a,
            Method::POST,
            "/v1/approvals/other-write",
            approve.clone(),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("another caller"),
        "{body}"
    );
    let (status, body) = f
        .send(&a, Method::POST, "/v1/approvals/own-sign", approve.clone())
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("never decides a signature"),
        "{body}"
    );
    let (status, body) = f
        .send(
            OPERATOR_TOKEN,
            Method::POST,
            "/v1/approvals/own-sign",
            approve,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decided_by"], "operator");
}

#[test]
fn the_docs_table_of_routes_gives_each_route_the_role_the_table_enforces() {
    let docs = include_str!("../../../../docs/http-api.md");
    for route in table::routes() {
        let pattern = route.pattern.replace("{*path}", "{path}");
        let row = docs
            .lines()
            .find(|l| {
                l.starts_with(&format!("| `{} {pattern}", route.method))
                    && l[2..].split('`').nth(1).is_some_and(|p| {
                        let p = p.split_once('[').map_or(p, |(a, _)| a);
                        p.trim_end_matches(" (no token)") == format!("{} {pattern}", route.method)
                    })
            })
            .unwrap_or_else(|| {
                panic!("docs/http-api.md has no row for {} {pattern}", route.method)
            });
        let role = row.split(" | ").nth(1).unwrap_or_default();
        let want = match route.role {
            None => "anyone",
            Some(r) => r.as_str(),
        };
        assert!(
            role.starts_with(want),
            "{} {pattern}: docs say {role:?}, the table {want}",
            route.method
        );
    }
}
