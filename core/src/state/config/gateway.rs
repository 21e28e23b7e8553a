//! `[gateway]`: where the gateway listens and what bounds a request and a connection
//! (docs/http-api.md, "Limits"; docs/cli.md lists the keys).

use serde::{Deserialize, Serialize};

/// The default connection cap takes this share of the open-file limit (1 in N): the
/// rest is left to the executors' channel, the egress and fetch proxies' connections, the
/// store and the skills' files.
pub const FD_SHARE_DIVISOR: u64 = 2;
/// The default connection cap is at most this, whatever the open-file limit: each idle
/// connection holds a task and a read buffer (docs/http-api.md, "Limits", for the memory
/// measured), so this bounds the memory a flood can take.
pub const MAX_CONNECTIONS_CEILING: usize = 16_384;
/// The default per-peer cap, when half the connection cap is not smaller.
pub const MAX_CONNECTIONS_PER_PEER: usize = 1024;
/// The open-file limit assumed when it cannot be read (the usual soft limit).
pub const FALLBACK_FD_LIMIT: u64 = 1024;

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
    /// The head timeout of a connection accepted while `high_water_connections` are open,
    /// and of every connection of the health reserve.
    pub header_timeout_under_load_ms: u64,
    /// Longest wait for a whole request body once its handler reads it (408 after).
    pub body_timeout_ms: u64,
    /// A kept-alive connection with no request in progress is closed after this long.
    pub idle_timeout_ms: u64,
    /// Connections served at once; more are refused (503) but for the health reserve.
    /// Unset: derived from the open-file limit ([`GatewayConfig::max_connections_for`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<usize>,
    /// Connections of one peer address at once; past it, a new connection of that peer
    /// evicts the peer's oldest connection with no request in progress (503 when each of
    /// them has one). Unset: [`MAX_CONNECTIONS_PER_PEER`], or half the connection
    /// cap when that is smaller.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections_per_peer: Option<usize>,
    /// While this many connections are open, a new one gets `header_timeout_under_load_ms`.
    /// Unset: half the connection cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub high_water_connections: Option<usize>,
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
            header_timeout_under_load_ms: 1_000,
            body_timeout_ms: 30_000,
            idle_timeout_ms: 5_000,
            max_connections: None,
            max_connections_per_peer: None,
            high_water_connections: None,
            healthz_reserve_connections: 16,
        }
    }
}

impl GatewayConfig {
    /// The range each of its limits allows ([`super::KeyRange`]); an unset connection cap
    /// is derived at the start, always in range.
    pub(crate) fn ranges(&self) -> Vec<super::KeyRange> {
        vec![
            (
                "gateway.header_timeout_ms",
                self.header_timeout_ms as f64,
                100.0,
                600_000.0,
            ),
            (
                "gateway.body_timeout_ms",
                self.body_timeout_ms as f64,
                100.0,
                3_600_000.0,
            ),
            (
                "gateway.idle_timeout_ms",
                self.idle_timeout_ms as f64,
                100.0,
                3_600_000.0,
            ),
            (
                "gateway.header_timeout_under_load_ms",
                self.header_timeout_under_load_ms as f64,
                100.0,
                600_000.0,
            ),
            // Unset: derived at the start, always in range.
            (
                "gateway.max_connections",
                self.max_connections.map_or(1.0, |v| v as f64),
                1.0,
                1_000_000.0,
            ),
            (
                "gateway.max_connections_per_peer",
                self.max_connections_per_peer.map_or(1.0, |v| v as f64),
                1.0,
                1_000_000.0,
            ),
            (
                "gateway.high_water_connections",
                self.high_water_connections.map_or(1.0, |v| v as f64),
                1.0,
                1_000_000.0,
            ),
            (
                "gateway.healthz_reserve_connections",
                self.healthz_reserve_connections as f64,
                1.0,
                1024.0,
            ),
        ]
    }

    /// The connection cap: `max_connections` when set, else 1 in [`FD_SHARE_DIVISOR`] of
    /// `fd_limit` (the core's open-file limit), at most [`MAX_CONNECTIONS_CEILING`].
    pub fn max_connections_for(&self, fd_limit: u64) -> usize {
        self.max_connections.unwrap_or_else(|| {
            let share = usize::try_from(fd_limit / FD_SHARE_DIVISOR).unwrap_or(usize::MAX);
            share.clamp(1, MAX_CONNECTIONS_CEILING)
        })
    }

    /// The per-peer cap under the connection cap `max`.
    pub fn max_connections_per_peer_for(&self, max: usize) -> usize {
        self.max_connections_per_peer
            .unwrap_or_else(|| (max / 2).clamp(1, MAX_CONNECTIONS_PER_PEER))
    }

    /// The high-water mark under the connection cap `max`.
    pub fn high_water_for(&self, max: usize) -> usize {
        self.high_water_connections
            .unwrap_or_else(|| (max / 2).max(1))
    }
}
