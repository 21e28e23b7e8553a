//! `[fetch]`: the limits of the fetch proxy and the operator's private-address exceptions
//! (docs/permissions.md; the proxy is [`crate::proxy::fetch`]).

use serde::{Deserialize, Serialize};

/// Limits and operator exceptions of the fetch proxy: `[fetch]` in `skillbox.toml`, read
/// as it is (every key optional, unknown keys refused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FetchConfig {
    /// `ip:port` or `host:port` pairs (`"127.0.0.1:8080"`, `"[::1]:8080"`,
    /// `"registry.internal:443"`) the operator allows even though they are not public.
    /// The skill must still declare the host in `permissions.network`.
    pub allow_private: Vec<String>,
    /// Largest request body a tool may send, in bytes (default 1 MiB).
    pub max_request_bytes: usize,
    /// Largest response body returned to a tool, in bytes (default 5 MiB).
    pub max_response_bytes: usize,
    /// Deadline for the whole fetch, every redirect and the body included (default 15 s).
    pub timeout_ms: u64,
    /// Most redirects followed (default 5).
    pub max_redirects: usize,
}

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            allow_private: Vec::new(),
            max_request_bytes: 1024 * 1024,
            max_response_bytes: 5 * 1024 * 1024,
            timeout_ms: 15_000,
            max_redirects: 5,
        }
    }
}
