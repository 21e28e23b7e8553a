//! One path for every call: the same call through REST (`POST /v1/tools/call`), MCP
//! (`tools/call`) and `POST /v1/route/execute` reaches the pipeline's one entry, so the same
//! bad call gets the same refusal and a call id of its own through each, and the caller's
//! `traceparent` reaches the executor through each.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use skillbox_protocol::result::ToolResult;
use skillbox_protocol::skill::{discover, Catalog, DiscoveryOptions};

use super::web::request::Body;
use super::{table, Gateway};
use crate::auth::{Bot, Caller};

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// What the fake executor saw: each call's skill and `traceparent`.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

fn fixture() -> (tempfile::TempDir, Gateway, Seen) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let skills = ws.join("skills");
    for name in ["notes", "mail"] {
        let d = skills.join(name);
        std::fs::create_dir_all(d.join("scripts")).unwrap();
        std::fs::write(
            d.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: The {name} skill, for {name} things.\n---\n# {name}\n"),
        )
        .unwrap();
        std::fs::write(
            d.join("skill.yaml"),
            format!("name: {name}\ndescription: The {name} skill, for {name} things.\ntools:\n  - name: run\n    description: run {name}\n    command: [\"python3\", \"scripts/run.py\"]\n"),
        )
        .unwrap();
        std::fs::write(d.join("scripts/run.py"), "print(1)\n").unwrap();
    }
    let catalog: Catalog = discover(std::slice::from_ref(&skills), DiscoveryOptions::default());
    let mut gw = super::test_gateway(
        &ws,
        Catalog::default(),
        skills,
        "op",
        64 * 1024,
        super::console::Console::new(&Default::default()),
    );
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    let d = crate::calls::test_dispatcher(&ws, catalog).with_fake_transport(move |p| {
        log.lock()
            .unwrap()
            .push((p.skill.clone(), p.traceparent.clone()));
        Ok(ToolResult::ok(p.call_id.clone(), json!({"ran": p.tool}), 1))
    });
    gw.set_parts(super::test_parts(d));
    (dir, gw, seen)
}

async fn send(gw: &Gateway, caller: &Caller, path: &str, body: Value) -> (StatusCode, Value) {
    let mut headers = HeaderMap::new();
    headers.insert("traceparent", TRACE.parse().unwrap());
    let body: Body = Full::new(Bytes::from(body.to_string()))
        .map_err(|never| match never {})
        .boxed();
    let asked = table::Asked {
        method: &Method::POST,
        path,
        caller: Some(caller.clone()),
    };
    let r = table::dispatch(gw, asked, None, headers, body)
        .await
        .unwrap_or_else(|e| e.into_response().map(Into::into));
    let status = r.status();
    let bytes = r.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// The same call of `notes:run` through each entry: (error, call id) of each.
async fn through_every_entry(gw: &Gateway, caller: &Caller) -> Vec<(Option<String>, String)> {
    let (_, rest) = send(gw, caller, "/v1/tools/call", json!({"tool": "notes:run"})).await;
    let rest = (
        rest["error"].as_str().map(str::to_string),
        rest["call_id"].as_str().unwrap_or_default().to_string(),
    );
    let mcp_call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "notes.run", "arguments": {}}});
    let (_, mcp) = send(gw, caller, "/mcp", mcp_call).await;
    let result = &mcp["result"];
    let mcp = (
        (result["isError"] == true).then(|| {
            result["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        }),
        result["_meta"]["dev.skillbox/callId"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    );
    let (_, run) = send(
        gw,
        caller,
        "/v1/route/execute",
        json!({"query": "notes things", "tool": "run"}),
    )
    .await;
    let step = &run["steps"][0]["result"];
    let executed = (
        step["error"].as_str().map(str::to_string),
        step["call_id"].as_str().unwrap_or_default().to_string(),
    );
    vec![rest, mcp, executed]
}

#[tokio::test]
async fn a_refused_call_gets_the_same_refusal_and_a_call_id_through_rest_mcp_and_route_execute() {
    let (_dir, gw, seen) = fixture();
    // A bot limited to `mail` whose routing still reaches `notes` cannot exist (it routes
    // over its skills), so the refusal here is a context's: pinned to `mail`, which allows
    // only its own tool.
    let bot = Caller::Bot(Arc::new(Bot {
        name: "tg".into(),
        skills: None,
    }));
    std::fs::write(
        gw.calls.load.catalog().get("mail").unwrap().dir.join("SKILL.md"),
        "---\nname: mail\ndescription: The mail skill, for mail things.\nallowed-tools: [\"run\"]\n---\n# mail\n",
    )
    .unwrap();
    let skills = gw.trust.skills_root.clone();
    let catalog = discover(std::slice::from_ref(&skills), DiscoveryOptions::default());
    gw.calls.load.set_catalog(catalog, None);
    crate::contexts::enter(&gw.records.store, &bot, "c1").unwrap();
    crate::contexts::pin(&gw.records.store, &gw.calls.load.catalog(), "c1", "mail").unwrap();
    let rest = send(
        &gw,
        &bot,
        "/v1/tools/call",
        json!({"tool": "notes:run", "context_id": "c1"}),
    )
    .await
    .1;
    let mcp_call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "notes.run", "arguments": {}}});
    let mcp = send(&gw, &bot, "/mcp/c1", mcp_call).await.1;
    let run = send(
        &gw,
        &bot,
        "/v1/route/execute",
        json!({"query": "notes things", "tool": "run", "context_id": "c1"}),
    )
    .await
    .1;
    let refusals = [
        (
            rest["error"].clone(),
            rest["call_id"].clone(),
            rest["error_kind"].clone(),
        ),
        (
            mcp["result"]["content"][0]["text"].clone(),
            mcp["result"]["_meta"]["dev.skillbox/callId"].clone(),
            mcp["result"]["_meta"]["dev.skillbox/errorKind"].clone(),
        ),
        (
            run["steps"][0]["result"]["error"].clone(),
            run["steps"][0]["result"]["call_id"].clone(),
            run["steps"][0]["result"]["error_kind"].clone(),
        ),
    ];
    let first = refusals[0].0.as_str().unwrap().to_string();
    assert!(first.contains("is not active in context \"c1\""), "{first}");
    let mut ids = Vec::new();
    for (entry, (error, id, kind)) in ["REST", "MCP", "route/execute"].iter().zip(&refusals) {
        assert_eq!(
            error.as_str(),
            Some(first.as_str()),
            "{entry}: {refusals:?}"
        );
        assert_eq!(kind, "permission_denied", "{entry}");
        let id = id.as_str().unwrap_or_default().to_string();
        assert_eq!(id.len(), 24, "{entry}: a call id of its own: {id:?}");
        ids.push(id);
    }
    ids.dedup();
    assert_eq!(ids.len(), 3, "one id per call: {ids:?}");
    // route/execute goes on to its fallback (mail, allowed in the context); notes never ran.
    let ran: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(s, _)| s.clone())
        .collect();
    assert!(
        !ran.iter().any(|s| s == "notes"),
        "a refused call reached the executor: {ran:?}"
    );
}

#[tokio::test]
async fn the_callers_trace_reaches_the_executor_through_rest_mcp_and_route_execute() {
    let (_dir, gw, seen) = fixture();
    let outcomes = through_every_entry(&gw, &Caller::Operator).await;
    for (entry, (error, id)) in ["REST", "MCP", "route/execute"].iter().zip(&outcomes) {
        assert_eq!(error, &None, "{entry}: {outcomes:?}");
        assert_eq!(id.len(), 24, "{entry}: {outcomes:?}");
    }
    let traces: Vec<Option<String>> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, t)| t.clone())
        .collect();
    assert_eq!(traces, vec![Some(TRACE.to_string()); 3], "{outcomes:?}");
}
