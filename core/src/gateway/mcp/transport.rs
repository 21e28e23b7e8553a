//! Streamable HTTP, the JSON-response form: one JSON-RPC message per `POST`, answered
//! with one JSON body (a request) or `202 Accepted` (a notification or a client's
//! response). Reads the body within `gateway.max_request_bytes` and `body_timeout_ms`, checks `Origin`, and
//! turns a message into an [`Incoming`] for [`super::methods`].

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use std::time::Duration;

use http_body_util::Full;
use serde_json::{json, Map, Value};

use super::errors::McpError;
use crate::gateway::web::error::json_response;
use crate::gateway::web::request::{read_bounded, Body, BodyReadError};

/// One JSON-RPC message from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: it gets an answer.
    Request {
        /// Its id, echoed in the answer.
        id: Value,
        /// The method.
        method: String,
        /// The params (an empty object when absent).
        params: Map<String, Value>,
    },
    /// A notification, or a response to a server request: no answer.
    Notification {
        /// The method (empty for a response).
        method: String,
    },
}

/// Reads the body, at most `limit` bytes (refused from its declared length before
/// reading), within `timeout` ([`read_bounded`]).
pub async fn read_body(body: Body, limit: usize, timeout: Duration) -> Result<Bytes, McpError> {
    read_bounded(body, limit, timeout)
        .await
        .map_err(|e| match e {
            BodyReadError::TooLarge { limit } => McpError::TooLarge(limit),
            BodyReadError::TimedOut { .. } => McpError::BodyTimeout(e.to_string()),
            BodyReadError::Broken(b) => McpError::NotJson(b.to_string()),
        })
}

/// Refuses a request whose `Origin` is present and not among `allowed` (a browser page
/// of another site must not drive the tools; non-browser clients send no `Origin`).
pub fn check_origin(headers: &HeaderMap, allowed: &[String]) -> Result<(), McpError> {
    let Some(origin) = headers.get(http::header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("(not visible ASCII)");
    let same = |a: &str| a.trim_end_matches('/').eq_ignore_ascii_case(origin);
    if allowed.iter().any(|a| same(a)) {
        Ok(())
    } else {
        Err(McpError::OriginRefused(origin.to_string()))
    }
}

/// The id of `bytes` when it is a request object with one (for the error answer of a
/// request refused after parsing).
pub fn request_id(bytes: &[u8]) -> Value {
    serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .filter(|id| id.is_string() || id.is_number())
        .unwrap_or(Value::Null)
}

/// Parses one JSON-RPC 2.0 message.
pub fn parse(bytes: &[u8]) -> Result<Incoming, McpError> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| McpError::NotJson(e.to_string()))?;
    let obj = match value {
        Value::Object(obj) => obj,
        Value::Array(_) => return Err(McpError::Batch),
        other => {
            return Err(McpError::NotARequest(format!(
                "the body is a JSON {}, not an object",
                kind_of(&other)
            )))
        }
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(McpError::NotARequest(
            "\"jsonrpc\" must be \"2.0\"".to_string(),
        ));
    }
    let Some(method) = obj.get("method") else {
        if obj.contains_key("id") && (obj.contains_key("result") || obj.contains_key("error")) {
            return Ok(Incoming::Notification {
                method: String::new(),
            });
        }
        return Err(McpError::NotARequest("\"method\" is missing".to_string()));
    };
    let Some(method) = method.as_str().map(str::to_string) else {
        return Err(McpError::NotARequest(
            "\"method\" must be a string".to_string(),
        ));
    };
    let params = match obj.get("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(other) => {
            return Err(McpError::BadParams(format!(
                "params must be an object, not a JSON {}",
                kind_of(other)
            )))
        }
    };
    match obj.get("id") {
        None => Ok(Incoming::Notification { method }),
        Some(id @ (Value::String(_) | Value::Number(_))) => Ok(Incoming::Request {
            id: id.clone(),
            method,
            params,
        }),
        Some(_) => Err(McpError::NotARequest(
            "\"id\" must be a string or a number".to_string(),
        )),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The answer of request `id`: its result (200), or its error with the status of its kind.
pub fn answer(id: Value, outcome: Result<Value, McpError>) -> Response<Full<Bytes>> {
    match outcome {
        Ok(result) => json_response(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        ),
        Err(e) => error_answer(id, &e),
    }
}

/// A JSON-RPC error answer with the status [`McpError::status`] gives it.
pub fn error_answer(id: Value, e: &McpError) -> Response<Full<Bytes>> {
    json_response(
        e.status(),
        &json!({"jsonrpc": "2.0", "id": id, "error": e.to_error_object()}),
    )
}

/// `202 Accepted` with no body: a notification or a response was taken.
pub fn accepted() -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::ACCEPTED;
    r
}
