//! What the gateway knows of one connection between requests: whether a request is in
//! progress (only a connection with none may be evicted), since when none is (the idle
//! timeout reads it), and whether the connection was evicted for a newer one.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// A connection's requests in progress and its eviction.
#[derive(Debug)]
pub(super) struct Activity {
    state: Mutex<State>,
    evicted: Notify,
}

#[derive(Debug)]
struct State {
    in_flight: usize,
    /// When the last request finished (or the connection was accepted).
    idle_since: Instant,
    evicted: bool,
}

/// A request in progress; its drop marks the connection idle from now.
#[derive(Debug)]
pub(super) struct Busy(Arc<Activity>);

impl Activity {
    /// A connection accepted now, waiting for its first head.
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                in_flight: 0,
                idle_since: Instant::now(),
                evicted: false,
            }),
            evicted: Notify::new(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request starts; `None` when the connection was evicted first (the request is
    /// then not served).
    pub(super) fn begin(self: &Arc<Self>) -> Option<Busy> {
        let mut s = self.state();
        if s.evicted {
            return None;
        }
        s.in_flight += 1;
        Some(Busy(Arc::clone(self)))
    }

    /// How long no request has been in progress; `None` while one is.
    pub(super) fn idle_for(&self) -> Option<Duration> {
        let s = self.state();
        (s.in_flight == 0).then(|| s.idle_since.elapsed())
    }

    /// Evicts the connection when no request is in progress on it: its task closes it
    /// ([`Activity::evicted`]) and a request whose head completes now is not served.
    /// Whether it was evicted.
    pub(super) fn evict(&self) -> bool {
        let mut s = self.state();
        if s.in_flight > 0 || s.evicted {
            return false;
        }
        s.evicted = true;
        self.evicted.notify_one();
        true
    }

    /// Completes once the connection is evicted.
    pub(super) async fn evicted(&self) {
        self.evicted.notified().await;
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut s = self.0.state();
        s.in_flight = s.in_flight.saturating_sub(1);
        s.idle_since = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connection_with_a_request_in_progress_is_not_evicted() {
        let a = Activity::new();
        let busy = a.begin().unwrap();
        assert!(a.idle_for().is_none());
        assert!(!a.evict(), "a request is in progress");
        drop(busy);
        assert!(a.idle_for().is_some());
        assert!(a.evict());
        assert!(!a.evict(), "evicted once");
        assert!(a.begin().is_none(), "no request served once evicted");
        // The eviction is seen by a waiter that arrives after it.
        a.evicted().await;
    }
}
