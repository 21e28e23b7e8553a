//! The egress record of a call: one entry per connection its programs made through the
//! egress proxy (docs/sandbox.md), kept in the `calls` row as JSON (`egress_json`), the
//! first [`MAX_LISTED`] connections listed and the rest counted.

use serde::{Deserialize, Serialize};

/// Connections listed per call; more are only counted (`egress_unlisted`).
pub const MAX_LISTED: usize = 200;

/// Whether the proxy's policy let a connection through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EgressVerdict {
    /// The host was allowed and the proxy carried (or tried to carry) its bytes.
    Allowed,
    /// The proxy refused: undeclared host, IP literal, private address, mismatched TLS
    /// server name, a limit, or a request it does not serve.
    Refused,
}

/// One connection through the egress proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressEntry {
    /// The host asked for (`CONNECT host:port` or the absolute URL's host); empty when the
    /// request could not be read.
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// The policy's verdict.
    pub verdict: EgressVerdict,
    /// Why it was refused; for an allowed connection, why it ended early (a limit, the
    /// server unreachable), absent when it ended normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Bytes from the program to the server.
    pub bytes_out: u64,
    /// Bytes from the server to the program.
    pub bytes_in: u64,
    /// When the connection was opened, Unix milliseconds.
    pub started_ms: i64,
    /// How long it lasted.
    pub duration_ms: u64,
    /// Requests of a dependency build on it that the download cache answered, upstream
    /// not asked (docs/sandbox.md, "Dependencies").
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_hits: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A call's connections as stored: the first [`MAX_LISTED`], and how many more there were.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallEgress {
    /// The connections, in the order they ended.
    pub connections: Vec<EgressEntry>,
    /// Connections past [`MAX_LISTED`], counted only.
    #[serde(default)]
    pub unlisted: u64,
}

impl CallEgress {
    /// Adds a connection: listed while there is room, else counted.
    pub fn push(&mut self, entry: EgressEntry) {
        if self.connections.len() < MAX_LISTED {
            self.connections.push(entry);
        } else {
            self.unlisted = self.unlisted.saturating_add(1);
        }
    }

    /// Whether no connection was made.
    pub fn is_empty(&self) -> bool {
        self.connections.is_empty() && self.unlisted == 0
    }

    /// The `egress_json` column: `NULL` for a call without connections.
    pub(super) fn to_column(&self) -> Option<String> {
        (!self.is_empty())
            .then(|| serde_json::to_string(self).ok())
            .flatten()
    }

    /// Reads the column back; an unreadable one reads as none rather than hiding the call.
    pub(super) fn from_column(text: Option<String>) -> Self {
        text.and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: u16) -> EgressEntry {
        EgressEntry {
            host: "api.test".into(),
            port: n,
            verdict: EgressVerdict::Allowed,
            reason: None,
            bytes_out: 1,
            bytes_in: 2,
            started_ms: 3,
            duration_ms: 4,
            cache_hits: 0,
        }
    }

    #[test]
    fn connections_past_the_listed_ones_are_counted() {
        let mut egress = CallEgress::default();
        assert_eq!(egress.to_column(), None);
        for n in 0..u16::try_from(MAX_LISTED + 5).unwrap() {
            egress.push(entry(n));
        }
        assert_eq!((egress.connections.len(), egress.unlisted), (MAX_LISTED, 5));
        let back = CallEgress::from_column(egress.to_column());
        assert_eq!(back, egress);
        let json = serde_json::to_value(&egress.connections[0]).unwrap();
        assert_eq!(json["verdict"], "allowed");
        assert!(json.get("reason").is_none());
    }
}
