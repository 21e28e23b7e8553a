//! `[gateway]`: where the gateway listens and what bounds a request and a connection
//! (docs/http-api.md, "Limits"; docs/cli.md lists the keys).

use serde::{Deserialize, Serialize};

/// `[gateway]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayConfig {
    /// Listen address.
    pub listen: String,
    /// Largest request body; a larger `Content-Length` is refused before reading (413).
    pub max_request_bytes: usize,
    /// Longest wait for a request head, from when the connection waits for one (a new
    /// connection, or a kept-alive one after its last answer) to the head's end.
    pub header_timeout_ms: u64,
    /// Longest wait for a whole request body once its handler reads it (408 after).
    pub body_timeout_ms: u64,
    /// A kept-alive connection with no request in progress is closed after this long.
    pub idle_timeout_ms: u64,
    /// Connections served at once; more are refused (503) but for the health reserve.
    pub max_connections: usize,
    /// Connections over `max_connections` that may still ask `GET /healthz` (one request
    /// each, anything else answered 503).
    pub healthz_reserve_connections: usize,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:7070".into(),
            max_request_bytes: 1024 * 1024,
            header_timeout_ms: 10_000,
            body_timeout_ms: 30_000,
            idle_timeout_ms: 5_000,
            max_connections: 512,
            healthz_reserve_connections: 16,
        }
    }
}
