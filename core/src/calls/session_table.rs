//! The core's table of running command sessions: which context, skill, caller and holder
//! (an executor, or a session's container) each belongs to, so `write_stdin` reaches that
//! holder only and a context's end or a bot's revocation ends its sessions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::transport::{ExecutorTransport, Placement};
use super::workfiles::CallFiles;

/// One running session, as the core remembers it.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) context_id: String,
    /// The skill whose envelope it runs under, if any.
    pub(super) skill: Option<String>,
    /// Who started it (`operator` or a bot's name): a revoked bot's sessions end.
    pub(super) caller: String,
    /// The transport that started it, which reaches its holder.
    pub(super) transport: Arc<dyn ExecutorTransport>,
    /// Its holder.
    pub(super) at: Placement,
    pub(super) call_id: String,
    pub(super) files: Arc<CallFiles>,
    pub(super) started: Instant,
    pub(super) last_used: Instant,
}

/// The running sessions of every context.
#[derive(Debug, Default)]
pub struct Sessions {
    pub(super) held: Mutex<HashMap<String, Held>>,
}

impl Sessions {
    pub(super) fn count_in(&self, context_id: &str) -> usize {
        self.held
            .lock()
            .map(|h| h.values().filter(|s| s.context_id == context_id).count())
            .unwrap_or(0)
    }

    /// Takes the sessions `pick` chooses out of the table.
    pub(super) fn take(&self, pick: impl Fn(&str, &Held) -> bool) -> Vec<(String, Held)> {
        let Ok(mut held) = self.held.lock() else {
            return Vec::new();
        };
        let ids: Vec<String> = held
            .iter()
            .filter(|(id, s)| pick(id, s))
            .map(|(id, _)| id.clone())
            .collect();
        ids.into_iter()
            .filter_map(|id| held.remove(&id).map(|s| (id, s)))
            .collect()
    }

    /// Keeps a session that is still running, pinned to its holder.
    pub(super) fn hold(&self, session_id: String, held: Held) {
        if let Ok(mut table) = self.held.lock() {
            table.insert(session_id, held);
        }
    }
}
