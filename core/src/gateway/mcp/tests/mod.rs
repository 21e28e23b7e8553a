//! MCP requests through the route table against a gateway over a test dispatcher (no
//! server, no executor): parsing, the eras, every refusal with its code, status and
//! reason ([`protocol`]), and the tools, skills and resources served ([`content`]).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod content;
mod files;
mod protocol;
mod run_skill;

use std::path::Path;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use skillbox_protocol::skill::{discover, Catalog, DiscoveryOptions};

use crate::gateway::web::request::Body;
use crate::gateway::{table, Gateway};

/// A skill folder: SKILL.md (its `allowed-tools` its own tools, so a context pinning it
/// is restricted to them), and a skill.yaml (a tool named `get` declares an output schema) with `tools` as `(name, security)` and
/// `network` permissions.
fn write_skill(root: &Path, name: &str, tools: &[(&str, &str)], network: &[&str]) {
    let d = root.join(name);
    std::fs::create_dir_all(d.join("scripts")).unwrap();
    let allowed: Vec<&str> = tools.iter().map(|(t, _)| *t).collect();
    std::fs::write(
        d.join("SKILL.md"),
        format!(
            "---\nname: {name}\ndescription: The {name} skill.\nlicense: MIT\nallowed-tools: {}\n---\n# {name}\n\nUse it well.\n",
            serde_json::to_string(&allowed).unwrap()
        ),
    )
    .unwrap();
    let mut yaml = format!("name: {name}\ndescription: The {name} skill.\n");
    if !network.is_empty() {
        yaml.push_str(&format!(
            "permissions:\n  network: {}\n",
            serde_json::to_string(network).unwrap()
        ));
    }
    yaml.push_str("tools:\n");
    for (t, security) in tools {
        yaml.push_str(&format!(
            "  - name: {t}\n    description: {t} things\n    command: [\"python3\", \"scripts/{t}.py\"]\n    security: {security}\n    parameters:\n      type: object\n      properties: {{ text: {{ type: string }} }}\n"
        ));
        if *t == "get" {
            yaml.push_str(
                "    output_schema: { type: object, properties: { status: { type: integer } } }\n",
            );
        }
        std::fs::write(d.join(format!("scripts/{t}.py")), "print(1)\n").unwrap();
    }
    std::fs::write(d.join("skill.yaml"), yaml).unwrap();
}

/// A workspace with skills `notes` (read `search`, write `edit`) and `web` (read `get`,
/// network), and a gateway over it.
struct Fixture {
    _dir: tempfile::TempDir,
    skills: std::path::PathBuf,
    gw: Gateway,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let skills = ws.join("skills");
    std::fs::create_dir_all(&skills).unwrap();
    write_skill(
        &skills,
        "notes",
        &[("search", "read"), ("edit", "write")],
        &[],
    );
    write_skill(&skills, "web", &[("get", "read")], &["https://example.com"]);
    let catalog: Catalog = discover(std::slice::from_ref(&skills), DiscoveryOptions::default());
    assert!(catalog.skipped.is_empty(), "{:?}", catalog.skipped);
    let gw = crate::gateway::test_gateway(
        &ws,
        catalog,
        skills.clone(),
        "mcp-test-token",
        4096,
        crate::gateway::console::Console::new(&Default::default()),
    );
    Fixture {
        _dir: dir,
        skills,
        gw,
    }
}

/// An answer: status, headers, JSON body (`null` when empty).
struct Answer {
    status: StatusCode,
    body: Value,
}

impl Answer {
    fn error_code(&self) -> i64 {
        self.body["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("no error: {}", self.body))
    }

    fn error_message(&self) -> String {
        self.body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn result(&self) -> &Value {
        assert!(self.body.get("error").is_none(), "error: {}", self.body);
        &self.body["result"]
    }
}

/// POSTs `body` (as written) to `path` with `headers`.
async fn post_raw(gw: &Gateway, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            http::HeaderValue::from_str(v).unwrap(),
        );
    }
    let body: Body = Full::new(Bytes::from(body.to_string()))
        .map_err(|never| match never {})
        .boxed();
    let asked = table::Asked {
        method: &Method::POST,
        path,
        caller: Some(crate::auth::Caller::Operator),
    };
    let r = match table::dispatch(gw, asked, None, map, body).await {
        Ok(r) => r,
        Err(e) => e.into_response().map(Into::into),
    };
    let status = r.status();
    let bytes = r.into_body().collect().await.unwrap().to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    Answer { status, body }
}

/// A 2026-07-28 request with its envelope and matching routing headers.
async fn modern(gw: &Gateway, path: &str, method: &str, mut params: Value) -> Answer {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let mut headers = vec![
        ("mcp-protocol-version", "2026-07-28".to_string()),
        ("mcp-method", method.to_string()),
    ];
    let name = params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str);
    if let (Some(n), "tools/call" | "resources/read") = (name, method) {
        headers.push(("mcp-name", n.to_string()));
    }
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    post_raw(gw, path, &headers, &body.to_string()).await
}

/// A handshake-era request (after `initialize`) at 2025-11-25.
async fn legacy(gw: &Gateway, path: &str, method: &str, params: Value) -> Answer {
    let body = json!({"jsonrpc": "2.0", "id": "a", "method": method, "params": params});
    post_raw(
        gw,
        path,
        &[("mcp-protocol-version", "2025-11-25")],
        &body.to_string(),
    )
    .await
}
