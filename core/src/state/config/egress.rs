//! `[egress]`: the limits of the egress proxy, which carries the network of every program
//! in a sandbox (docs/sandbox.md; the proxy is [`crate::proxy::egress`]), and the names it
//! pins to addresses.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[egress]` in `skillbox.toml` (every key optional, unknown keys refused). The policy
/// itself (which hosts, private addresses) is the skill's `permissions.network` and
/// `[fetch] allow_private`, shared with the fetch capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EgressConfig {
    /// Bytes one call may move through the proxy, both directions and all its connections
    /// together (default 256 MiB). The connection that passes it is closed.
    pub max_bytes_per_call: u64,
    /// Connections one call may have open through the proxy at once (default 64); one
    /// more is refused.
    pub max_connections_per_call: usize,
    /// Longest TCP connect to a server (default 10 s).
    pub connect_timeout_ms: u64,
    /// A connection that carries no byte either way this long is closed (default 60 s).
    pub idle_timeout_ms: u64,
    /// Names pinned to addresses, as curl's `--resolve`: `{"api.example.test" =
    /// "127.0.0.1"}` (tests, split-horizon DNS). A pinned private address still needs
    /// `host:port` or `ip:port` in `[fetch] allow_private`. Also used by `core.fetch`.
    pub resolve: BTreeMap<String, IpAddr>,
    /// PEM files of CA certificates trusted for servers beside the webpki roots (tests,
    /// private APIs; relative to the workspace): by the proxy's own TLS, by `core.fetch`,
    /// and in the bundle a network call's programs trust.
    pub extra_roots: Vec<PathBuf>,
    /// Whether the proxy replaces a bound secret's placeholder in request bodies too
    /// (default false: a placeholder in a body is refused, even toward its bound host).
    pub secrets_in_body: bool,
    /// The largest request body the proxy reads for a skill with bound secrets (default
    /// 16 MiB); a larger one is refused with `413`.
    pub max_inspected_body_bytes: u64,
}

impl Default for EgressConfig {
    fn default() -> Self {
        Self {
            max_bytes_per_call: 256 * 1024 * 1024,
            max_connections_per_call: 64,
            connect_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            resolve: BTreeMap::new(),
            extra_roots: Vec::new(),
            secrets_in_body: false,
            max_inspected_body_bytes: 16 * 1024 * 1024,
        }
    }
}

impl EgressConfig {
    /// The range each of its limits allows ([`super::KeyRange`]).
    pub(crate) fn ranges(&self) -> Vec<super::KeyRange> {
        vec![
            (
                "egress.max_bytes_per_call",
                self.max_bytes_per_call as f64,
                1.0,
                1e15,
            ),
            (
                "egress.max_connections_per_call",
                self.max_connections_per_call as f64,
                1.0,
                65_536.0,
            ),
            (
                "egress.connect_timeout_ms",
                self.connect_timeout_ms as f64,
                100.0,
                600_000.0,
            ),
            (
                "egress.idle_timeout_ms",
                self.idle_timeout_ms as f64,
                100.0,
                86_400_000.0,
            ),
        ]
    }
}
