//! `[console]`: the operator console's sessions and sign-in links ([`crate::gateway::console`]).

use serde::{Deserialize, Serialize};

/// `[console]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleSection {
    /// A session ends this long after sign-in.
    pub session_minutes: u64,
    /// Sessions at once; signing in beyond it ends the oldest.
    pub max_sessions: usize,
    /// The one-time sign-in link works this long.
    pub link_seconds: u64,
}

impl Default for ConsoleSection {
    fn default() -> Self {
        Self {
            session_minutes: 480,
            max_sessions: 32,
            link_seconds: 600,
        }
    }
}
