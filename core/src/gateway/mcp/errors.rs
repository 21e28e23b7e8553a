//! Why an MCP request got a JSON-RPC error instead of a result: one enum whose variants
//! name what was wrong, and the one mapping from a variant to its JSON-RPC code, its
//! `data` and the HTTP status the answer goes out with (docs/mcp.md, "Errors").
//!
//! A tool that ran and failed is not an error here: it is a `tools/call` result with
//! `isError: true` ([`super::tools`]).

use http::StatusCode;
use serde_json::{json, Value};

use super::versions::SUPPORTED_VERSIONS;

/// JSON-RPC: the body is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a valid request object (or a batch).
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: no such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: bad parameters (also an unknown tool, skill or resource).
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the server failed.
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP 2026-07-28: an `MCP-Protocol-Version`, `Mcp-Method` or `Mcp-Name` header disagrees
/// with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// MCP: the protocol version asked for is not served.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A refused MCP request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The body is not JSON.
    #[error("the request body is not JSON ({0}); send one JSON-RPC 2.0 request object")]
    NotJson(String),
    /// The body is a JSON array (a JSON-RPC batch).
    #[error("batch requests are not served; send one JSON-RPC request object per POST")]
    Batch,
    /// The body is over `gateway.max_request_bytes`.
    #[error("request body over the {0}-byte limit (gateway.max_request_bytes)")]
    TooLarge(usize),
    /// The body did not arrive within `gateway.body_timeout_ms`.
    #[error("{0}")]
    BodyTimeout(String),
    /// The body is JSON but not a JSON-RPC 2.0 request or notification.
    #[error("not a JSON-RPC 2.0 request: {0}")]
    NotARequest(String),
    /// The `Origin` header names an origin not in `[mcp] allowed_origins`.
    #[error(
        "requests from origin {0:?} are refused; add it to [mcp] allowed_origins in skillbox.toml \
         if that web page may use this server (docs/mcp.md)"
    )]
    OriginRefused(String),
    /// No such method (in this protocol era).
    #[error("method {method:?} is not served{hint}; docs/mcp.md lists the methods")]
    NoSuchMethod {
        /// The method asked for.
        method: String,
        /// Why, when the method exists in the other era.
        hint: String,
    },
    /// The parameters are missing or of the wrong shape.
    #[error("invalid params: {0}")]
    BadParams(String),
    /// A routing header disagrees with the body (2026-07-28).
    #[error("{0}")]
    HeaderMismatch(String),
    /// The protocol version asked for is not served.
    #[error(
        "protocol version {requested:?} is not supported; this server speaks {}",
        SUPPORTED_VERSIONS.join(", ")
    )]
    UnsupportedVersion {
        /// The version asked for.
        requested: String,
    },
    /// `tools/call` of a name that is no tool here.
    #[error("unknown tool {name:?}: {why}; tools/list lists the tools this endpoint serves")]
    UnknownTool {
        /// The name as the client wrote it.
        name: String,
        /// What is missing.
        why: String,
    },
    /// `skills/get` of a uri that is no skill here.
    #[error("unknown skill {uri:?}; skills/list lists the skills (skill://<name>/SKILL.md)")]
    UnknownSkill {
        /// The uri as the client wrote it.
        uri: String,
    },
    /// `resources/read` of a uri that is no resource here.
    #[error("unknown resource {uri:?}; resources/list lists the resources")]
    UnknownResource {
        /// The uri as the client wrote it.
        uri: String,
    },
    /// `resources/read` of a file the skill folder holds but never serves (a hard link, a
    /// file of the core's state folder under another name).
    #[error("resource {uri:?} is refused: {reason}")]
    ResourceRefused {
        /// The uri as the client wrote it.
        uri: String,
        /// Why, and what to do.
        reason: String,
    },
    /// A local skill's files cannot be listed (a symbolic link, an unreadable file).
    #[error("the files of skill {skill:?} cannot be listed ({why}); a skill folder holds regular files and folders only: replace links with copies of the files")]
    FilesUnlisted {
        /// The skill.
        skill: String,
        /// What is wrong.
        why: String,
    },
    /// A skill's files no longer match the digest it was installed with.
    #[error("skill {skill:?} changed on disk since it was installed ({why}); reinstall it with `skillbox skill install`")]
    NotAsInstalled {
        /// The skill.
        skill: String,
        /// What differs.
        why: String,
    },
    /// The server failed (a store read, a blocking task).
    #[error("{0}")]
    Internal(String),
}

impl McpError {
    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            McpError::NotJson(_) => PARSE_ERROR,
            McpError::Batch
            | McpError::TooLarge(_)
            | McpError::BodyTimeout(_)
            | McpError::NotARequest(_)
            | McpError::OriginRefused(_) => INVALID_REQUEST,
            McpError::NoSuchMethod { .. } => METHOD_NOT_FOUND,
            McpError::BadParams(_)
            | McpError::UnknownTool { .. }
            | McpError::UnknownSkill { .. }
            | McpError::UnknownResource { .. }
            | McpError::ResourceRefused { .. } => INVALID_PARAMS,
            McpError::HeaderMismatch(_) => HEADER_MISMATCH,
            McpError::UnsupportedVersion { .. } => UNSUPPORTED_PROTOCOL_VERSION,
            McpError::NotAsInstalled { .. }
            | McpError::FilesUnlisted { .. }
            | McpError::Internal(_) => INTERNAL_ERROR,
        }
    }

    /// The HTTP status the error answer goes out with: the transport's own refusals
    /// (size, origin) keep theirs; protocol errors follow the MCP Streamable HTTP mapping
    /// (400, 404 for an unknown method); errors of a well-formed request about the server's
    /// content (unknown tool, skill or resource) are 200, as a JSON-RPC error of a request
    /// the server understood.
    pub fn status(&self) -> StatusCode {
        match self {
            McpError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            McpError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            McpError::OriginRefused(_) => StatusCode::FORBIDDEN,
            McpError::NoSuchMethod { .. } => StatusCode::NOT_FOUND,
            McpError::NotJson(_)
            | McpError::Batch
            | McpError::NotARequest(_)
            | McpError::BadParams(_)
            | McpError::HeaderMismatch(_)
            | McpError::UnsupportedVersion { .. } => StatusCode::BAD_REQUEST,
            McpError::UnknownTool { .. }
            | McpError::UnknownSkill { .. }
            | McpError::UnknownResource { .. }
            | McpError::ResourceRefused { .. } => StatusCode::OK,
            McpError::NotAsInstalled { .. }
            | McpError::FilesUnlisted { .. }
            | McpError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The error's `data`, when it has one (the versions served, for a version refusal).
    pub fn data(&self) -> Option<Value> {
        match self {
            McpError::UnsupportedVersion { requested } => {
                Some(json!({"supported": SUPPORTED_VERSIONS, "requested": requested}))
            }
            _ => None,
        }
    }

    /// The JSON-RPC error object.
    pub fn to_error_object(&self) -> Value {
        let mut e = json!({"code": self.code(), "message": self.to_string()});
        if let Some(data) = self.data() {
            e["data"] = data;
        }
        e
    }
}
