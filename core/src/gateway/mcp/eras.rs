//! The two protocol eras a request can belong to, told apart per request (the server
//! keeps no session):
//!
//! - **2026-07-28** (stateless): every request carries `params._meta` with
//!   `io.modelcontextprotocol/protocolVersion` and `…/clientCapabilities`; over HTTP its
//!   `MCP-Protocol-Version`, `Mcp-Method` and (for `tools/call`, `resources/read`)
//!   `Mcp-Name` headers must agree with the body. Results carry `resultType`, lists
//!   `ttlMs` and `cacheScope`.
//! - **handshake** (2025-06-18, 2025-11-25): `initialize` negotiates the version, later
//!   requests carry it in the `MCP-Protocol-Version` header (absent: accepted, as the
//!   spec's backwards-compatibility rule asks).

use http::HeaderMap;
use serde_json::{json, Map, Value};

use super::errors::McpError;

pub use super::versions::{HANDSHAKE_VERSIONS, MODERN_VERSION, SUPPORTED_VERSIONS};

/// `_meta` key of the protocol version (2026-07-28).
pub const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client's capabilities (2026-07-28).
pub const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the server's identity on results (2026-07-28).
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// How long a client may cache a list result: 0, because a reload, an install or a pin
/// changes the lists at any moment.
pub const LIST_TTL_MS: u64 = 0;

/// The era of one request, with what the client declared.
#[derive(Debug, Clone, PartialEq)]
pub enum Era {
    /// 2026-07-28, with the client's capabilities from `_meta`.
    Modern {
        /// `io.modelcontextprotocol/clientCapabilities`.
        client_capabilities: Value,
    },
    /// The handshake era, at `version` (from the header, or the latest when absent).
    Handshake {
        /// The negotiated version.
        version: &'static str,
    },
}

impl Era {
    /// Whether the request is of the stateless revision.
    pub fn is_modern(&self) -> bool {
        matches!(self, Era::Modern { .. })
    }

    /// Whether the client declared URL-mode elicitation.
    pub fn client_takes_url_elicitation(&self) -> bool {
        match self {
            Era::Modern {
                client_capabilities,
            } => client_capabilities
                .get("elicitation")
                .is_some_and(|e| e.get("url").is_some()),
            Era::Handshake { .. } => false,
        }
    }

    /// `result` as this era sends it: 2026-07-28 results get `resultType`, the server's
    /// identity in `_meta`, and (lists) the cache hints.
    pub fn decorate(&self, mut result: Value, cacheable: bool) -> Value {
        if !self.is_modern() {
            return result;
        }
        if let Some(obj) = result.as_object_mut() {
            obj.entry("resultType").or_insert_with(|| "complete".into());
            let meta = obj.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(SERVER_INFO_KEY.into(), server_info());
            }
            if cacheable && obj.get("resultType").and_then(Value::as_str) == Some("complete") {
                obj.insert("ttlMs".into(), LIST_TTL_MS.into());
                obj.insert("cacheScope".into(), "private".into());
            }
        }
        result
    }
}

/// The server's name and version.
pub fn server_info() -> Value {
    json!({"name": "skillbox", "version": env!("CARGO_PKG_VERSION")})
}

/// The value of header `name` as a string (a value that is not visible ASCII reads as
/// absent-and-wrong: it can never match the body).
fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<Result<&'a str, ()>> {
    headers.get(name).map(|v| v.to_str().map_err(|_| ()))
}

/// A header value as the client encodes it: verbatim, or `=?base64?…?=` for values that
/// are not plain visible ASCII.
fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine;
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        None => Some(value.to_string()),
        Some(payload) => base64::engine::general_purpose::STANDARD
            .decode(payload)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
    }
}

/// The params key mirrored in `Mcp-Name` for `method`.
fn name_param(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// The era of a request for `method` with `params`, checking the version it names and,
/// when `headers` are given (HTTP), that the routing headers agree with the body.
pub fn classify(
    method: &str,
    params: &Map<String, Value>,
    headers: Option<&HeaderMap>,
) -> Result<Era, McpError> {
    let meta = params.get("_meta").and_then(Value::as_object);
    let modern_version = meta.and_then(|m| m.get(PROTOCOL_VERSION_KEY));
    if method == "initialize" {
        // The handshake negotiates its version in the body; `_meta` is not the envelope.
        return Ok(Era::Handshake {
            version: HANDSHAKE_VERSIONS[1],
        });
    }
    let Some(version) = modern_version else {
        if method == "server/discover" {
            return Err(McpError::BadParams(format!(
                "server/discover needs params._meta with {PROTOCOL_VERSION_KEY:?} and \
                 {CLIENT_CAPABILITIES_KEY:?} (the 2026-07-28 request envelope)"
            )));
        }
        return handshake(headers);
    };
    let meta = meta.cloned().unwrap_or_default();
    let Some(client_capabilities) = meta.get(CLIENT_CAPABILITIES_KEY).cloned() else {
        return Err(McpError::BadParams(format!(
            "params._meta is missing the required envelope key {CLIENT_CAPABILITIES_KEY:?}"
        )));
    };
    if let Some(headers) = headers {
        check_headers(headers, method, params, version)?;
    }
    let Some(version) = version.as_str() else {
        return Err(McpError::BadParams(format!(
            "{PROTOCOL_VERSION_KEY:?} must be a string"
        )));
    };
    if version != MODERN_VERSION {
        return Err(McpError::UnsupportedVersion {
            requested: version.to_string(),
        });
    }
    Ok(Era::Modern {
        client_capabilities,
    })
}

/// A request without the 2026-07-28 envelope: the handshake era, at the version of its
/// `MCP-Protocol-Version` header.
fn handshake(headers: Option<&HeaderMap>) -> Result<Era, McpError> {
    let Some(value) = headers.and_then(|h| header(h, "mcp-protocol-version")) else {
        return Ok(Era::Handshake {
            version: HANDSHAKE_VERSIONS[1],
        });
    };
    let requested = value.unwrap_or("(not visible ASCII)");
    match HANDSHAKE_VERSIONS.iter().find(|v| **v == requested) {
        Some(version) => Ok(Era::Handshake { version }),
        None if requested == MODERN_VERSION => Err(McpError::BadParams(format!(
            "MCP-Protocol-Version is {MODERN_VERSION} but params._meta lacks \
             {PROTOCOL_VERSION_KEY:?}; 2026-07-28 requests carry the envelope in _meta"
        ))),
        None => Err(McpError::UnsupportedVersion {
            requested: requested.to_string(),
        }),
    }
}

/// `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` against the body.
fn check_headers(
    headers: &HeaderMap,
    method: &str,
    params: &Map<String, Value>,
    version: &Value,
) -> Result<(), McpError> {
    for name in ["mcp-protocol-version", "mcp-method", "mcp-name"] {
        if headers.get_all(name).iter().count() > 1 {
            return Err(McpError::HeaderMismatch(format!(
                "the {name} header is sent more than once; send it once"
            )));
        }
    }
    let agrees = |name: &str, want: Option<&str>| match (header(headers, name), want) {
        (Some(Ok(got)), Some(want)) => decode_header_value(got).as_deref() == Some(want),
        _ => false,
    };
    if !agrees("mcp-protocol-version", version.as_str()) {
        return Err(McpError::HeaderMismatch(format!(
            "the MCP-Protocol-Version header does not match params._meta[{PROTOCOL_VERSION_KEY:?}] \
             ({version}); send the same version in both"
        )));
    }
    if !agrees("mcp-method", Some(method)) {
        return Err(McpError::HeaderMismatch(format!(
            "the Mcp-Method header does not match the body's method {method:?}; send the same method in both"
        )));
    }
    if let Some(key) = name_param(method) {
        if let Some(want) = params.get(key).and_then(Value::as_str) {
            if !agrees("mcp-name", Some(want)) {
                return Err(McpError::HeaderMismatch(format!(
                    "the Mcp-Name header does not match the body's {key} {want:?}; send the same {key} in both"
                )));
            }
        }
    }
    Ok(())
}
