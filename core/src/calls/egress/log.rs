//! What the egress proxy keeps of one call while it runs: its connections open now (the
//! connections limit), the bytes moved (the bytes limit), and the record of every
//! connection, which the pipeline stores with the call.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::state::store::{CallEgress, EgressEntry};

/// One call's egress, shared by the call (which stores it when it ends) and the proxy
/// (which serves its connections). Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct EgressLog(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    /// Bytes moved both ways over all the call's connections.
    bytes: AtomicU64,
    /// Connections open now.
    open: AtomicUsize,
    /// The record of the connections that ended.
    record: Mutex<CallEgress>,
}

impl EgressLog {
    /// The connections so far, as stored with the call.
    pub fn snapshot(&self) -> CallEgress {
        self.0
            .record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Adds the record of a connection that ended.
    pub(super) fn push(&self, entry: EgressEntry) {
        self.0
            .record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(entry);
    }

    /// Takes one of at most `max` connection slots, held until the guard drops; `None`
    /// when all are taken.
    pub(super) fn open(&self, max: usize) -> Option<OpenSlot> {
        self.0
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| OpenSlot(self.clone()))
    }

    /// Counts `n` more bytes against the call's `max`; `false` (the bytes must not pass)
    /// once the total would exceed it.
    pub(super) fn spend(&self, n: u64, max: u64) -> bool {
        let before = self.0.bytes.fetch_add(n, Ordering::AcqRel);
        before.saturating_add(n) <= max
    }
}

/// A connection slot of a call ([`EgressLog::open`]).
#[derive(Debug)]
pub(super) struct OpenSlot(EgressLog);

impl Drop for OpenSlot {
    fn drop(&mut self) {
        self.0 .0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_bounded_and_given_back() {
        let log = EgressLog::default();
        let a = log.open(2).unwrap();
        let _b = log.open(2).unwrap();
        assert!(log.open(2).is_none());
        drop(a);
        assert!(log.open(2).is_some());
    }

    #[test]
    fn bytes_past_the_limit_are_refused() {
        let log = EgressLog::default();
        assert!(log.spend(6, 10));
        assert!(log.spend(4, 10));
        assert!(!log.spend(1, 10));
    }
}
