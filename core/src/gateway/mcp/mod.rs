//! The MCP server on the gateway listener (docs/mcp.md): `POST /mcp` serves every tool,
//! `POST /mcp/{context_id}` only that context's active tools. Streamable HTTP with JSON
//! answers, both protocol eras per request ([`eras`]), bearer auth by the gateway (the
//! REST token), `Origin` checked against `[mcp] allowed_origins`.
//!
//! - [`transport`]: body limits, `Origin`, JSON-RPC parsing, answers and statuses;
//! - [`eras`]: 2026-07-28 (`_meta` envelope, routing headers) vs handshake era;
//! - [`tools`]: `tools/list`, `tools/call` over the REST call path;
//! - [`elicitation`]: approval links for clients that take URL-mode elicitation;
//! - [`skills`]: SEP-2640 `skills/list`, `skills/get`, and the `skill://` resources;
//! - [`errors`]: each refusal's JSON-RPC code and HTTP status, in one place.

mod context_files;
mod elicitation;
mod eras;
mod errors;
mod skills;
mod tools;
mod transport;
mod versions;

#[cfg(test)]
mod tests;

use bytes::Bytes;
use http::Response;
use http_body_util::Full;
use serde_json::{json, Map, Value};

use self::eras::{Era, HANDSHAKE_VERSIONS, MODERN_VERSION, SUPPORTED_VERSIONS};
use self::errors::McpError;
use self::transport::Incoming;
use super::web::request::{Reply, Req};
use super::Gateway;
use crate::auth::CallOrigin;

pub use self::elicitation::WaitingCalls;

/// What the server tells a model about itself (`instructions`).
const INSTRUCTIONS: &str = "skillbox runs agent skills' tools in a sandbox. Tools are named \
<skill>.<tool>; load_skill reads a skill's instructions before you use its tools. Tools that \
write wait for an operator's approval.";

/// How `POST /mcp` reads one message, without running it: the method of a request (or
/// `None` for a notification or a response), or the refusal's JSON-RPC error object.
/// `headers` are `(name, value)` pairs; pairs that are not valid HTTP are left out. For
/// the fuzz target `fuzz/fuzz_targets/mcp_message.rs`.
pub fn classify_message(bytes: &[u8], headers: &[(&str, &str)]) -> Result<Option<String>, Value> {
    let mut map = http::HeaderMap::new();
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(value),
        ) {
            map.append(n, v);
        }
    }
    let refused = |e: McpError| e.to_error_object();
    match transport::parse(bytes).map_err(refused)? {
        Incoming::Notification { .. } => Ok(None),
        Incoming::Request { method, params, .. } => {
            eras::classify(&method, &params, Some(&map)).map_err(refused)?;
            Ok(Some(method))
        }
    }
}

/// `POST /mcp`.
pub async fn serve(gw: &Gateway, req: Req) -> Reply {
    let origin = CallOrigin::new(req.caller.clone(), None);
    Ok(handle(gw, origin, req).await)
}

/// `POST /mcp/{context_id}`: only the context's active tools, listed and callable.
pub async fn serve_in_context(gw: &Gateway, req: Req) -> Reply {
    let context_id = req.param("context_id")?.to_string();
    let origin = CallOrigin::new(req.caller.clone(), Some(context_id));
    Ok(handle(gw, origin, req).await)
}

/// One POST for `origin` (the caller, and the endpoint's context): origin header, body,
/// message, answer.
async fn handle(gw: &Gateway, origin: CallOrigin, req: Req) -> Response<Full<Bytes>> {
    let config = gw.calls.load.config();
    if let Err(e) = transport::check_origin(&req.headers, &config.mcp.allowed_origins) {
        tracing::warn!(error = %e, "MCP request refused");
        return transport::error_answer(Value::Null, &e);
    }
    let trace = req.traceparent();
    let headers = req.headers;
    let bytes = match transport::read_body(req.body, req.max_body, req.body_timeout).await {
        Ok(b) => b,
        Err(e) => return transport::error_answer(Value::Null, &e),
    };
    let (id, method, params) = match transport::parse(&bytes) {
        Ok(Incoming::Request { id, method, params }) => (id, method, params),
        Ok(Incoming::Notification { method }) => {
            tracing::debug!(%method, "MCP notification");
            return transport::accepted();
        }
        Err(e) => return transport::error_answer(transport::request_id(&bytes), &e),
    };
    let outcome = match eras::classify(&method, &params, Some(&headers)) {
        Ok(era) => {
            let asked = Asked {
                origin: &origin,
                console_base: console_base(&headers),
                trace,
            };
            call(gw, &asked, &era, &method, &params).await
        }
        Err(e) => Err(e),
    };
    if let Err(e) = &outcome {
        tracing::info!(%method, code = e.code(), error = %e, "MCP request refused");
    }
    transport::answer(id, outcome)
}

/// Runs `method` of `era`.
/// What one MCP request brings besides its message: who asks (and the endpoint's
/// context), where the console is as the client reached the gateway, and the caller's
/// W3C trace context (`traceparent`), carried into the pipeline as REST calls carry it.
pub struct Asked<'a> {
    /// The caller and the endpoint's context.
    pub origin: &'a CallOrigin,
    /// `http://<Host>`, for approval links.
    pub console_base: String,
    /// The request's `traceparent`, when valid.
    pub trace: Option<crate::observe::TraceParent>,
}

async fn call(
    gw: &Gateway,
    asked: &Asked<'_>,
    era: &Era,
    method: &str,
    params: &Map<String, Value>,
) -> Result<Value, McpError> {
    let origin = asked.origin;
    let modern = era.is_modern();
    let caller = &origin.caller;
    let (result, cacheable) = match method {
        "initialize" => (initialize(params)?, false),
        "ping" if !modern => (json!({}), false),
        "server/discover" => (discover(), true),
        "tools/list" => (tools::list(gw, origin).await?, true),
        "tools/call" => (tools::call(gw, asked, era, params).await?, false),
        "resources/list" => (skills::list_resources(gw, caller).await?, true),
        "resources/templates/list" => (json!({"resourceTemplates": []}), true),
        "resources/read" => (skills::read_resource(gw, caller, params).await?, true),
        "skills/list" if modern => (skills::list(gw, caller).await?, true),
        "skills/get" if modern => (skills::get(gw, caller, params).await?, true),
        _ => return Err(no_such_method(method, modern)),
    };
    Ok(era.decorate(result, cacheable))
}

/// Where the console is, as the client reached the gateway (`http://<Host>`).
fn console_base(headers: &http::HeaderMap) -> String {
    let host = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or("127.0.0.1:7070");
    format!("http://{host}")
}

/// The refusal of a method not served in this era, saying where it is served.
fn no_such_method(method: &str, modern: bool) -> McpError {
    let hint = match (method, modern) {
        ("skills/list" | "skills/get", false) => format!(
            " on the handshake era (the {} extension is served on {MODERN_VERSION}; connect with server/discover)",
            skills::EXTENSION
        ),
        ("ping", true) => format!(" on {MODERN_VERSION} (ping was removed in that revision)"),
        _ => String::new(),
    };
    McpError::NoSuchMethod {
        method: method.to_string(),
        hint,
    }
}

/// What the server offers, in either era.
fn capabilities(modern: bool) -> Value {
    let mut caps = json!({
        "tools": {"listChanged": false},
        "resources": {"listChanged": false, "subscribe": false},
    });
    if modern {
        caps["extensions"] = json!({ skills::EXTENSION: {} });
    }
    caps
}

/// `server/discover` (2026-07-28).
fn discover() -> Value {
    json!({
        "supportedVersions": SUPPORTED_VERSIONS,
        "capabilities": capabilities(true),
        "instructions": INSTRUCTIONS,
    })
}

/// `initialize` (handshake era): the client's version when served, else the latest
/// handshake version (the client then decides whether it can go on).
fn initialize(params: &Map<String, Value>) -> Result<Value, McpError> {
    let asked = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            McpError::BadParams("initialize needs \"protocolVersion\" (a string)".into())
        })?;
    let version = HANDSHAKE_VERSIONS
        .iter()
        .find(|v| **v == asked)
        .copied()
        .unwrap_or(HANDSHAKE_VERSIONS[1]);
    Ok(json!({
        "protocolVersion": version,
        "capabilities": capabilities(false),
        "serverInfo": eras::server_info(),
        "instructions": INSTRUCTIONS,
    }))
}
