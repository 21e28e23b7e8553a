//! What the egress proxy keeps of one call while it runs: its connections open now (the
//! connections limit), the bytes moved (the bytes limit), and the record of every
//! connection, which the pipeline stores with the call.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

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
    /// Connections being served whose record is not in yet.
    serving: AtomicUsize,
    /// Woken when the last of them is in.
    settled: tokio::sync::Notify,
    /// The record of the connections that ended.
    record: Mutex<CallEgress>,
    /// The URLs the dependency cache answered (a build's), in order, at most
    /// [`MAX_FROM_CACHE`].
    from_cache: Mutex<Vec<String>>,
    /// A build's requests the proxy read, by kind (while the download cache is on).
    asked: Asked,
}

/// What a dependency build asked for, as the proxy read its requests.
#[derive(Debug, Default)]
struct Asked {
    /// Other `GET`s: an index's pages (PEP 503's `/simple/NAME/`, npm's `/NAME`), about
    /// one per package the build resolves.
    pages: AtomicU64,
    /// Package files (wheels, archives), from the cache or the server.
    files: AtomicU64,
}

/// What a dependency build has asked for so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AskedSoFar {
    /// Index pages (about one per package resolved).
    pub pages: u64,
    /// Package files.
    pub files: u64,
}

/// The most URLs served from the cache a call's log keeps.
const MAX_FROM_CACHE: usize = 10_000;

impl EgressLog {
    /// The connections so far, as stored with the call.
    pub fn snapshot(&self) -> CallEgress {
        self.0
            .record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Bytes moved both ways over all the call's connections so far (live, not only those
    /// that ended).
    pub fn bytes_so_far(&self) -> u64 {
        self.0.bytes.load(Ordering::Acquire)
    }

    /// How many URLs the dependency cache answered so far.
    pub fn from_cache_count(&self) -> usize {
        (self.0.from_cache.lock())
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Notes that the dependency cache answered `url` (a build's request).
    pub(super) fn served_from_cache(&self, url: &str) {
        let mut urls = (self.0.from_cache.lock()).unwrap_or_else(PoisonError::into_inner);
        if urls.len() < MAX_FROM_CACHE {
            urls.push(url.to_string());
        }
    }

    /// Notes a build's request read by the proxy: a package file (`file`) or a page.
    pub(super) fn asked(&self, file: bool) {
        let counter = if file {
            &self.0.asked.files
        } else {
            &self.0.asked.pages
        };
        counter.fetch_add(1, Ordering::AcqRel);
    }

    /// What a dependency build has asked for so far (zero when its requests are not read:
    /// the download cache is off).
    pub fn asked_so_far(&self) -> AskedSoFar {
        AskedSoFar {
            pages: self.0.asked.pages.load(Ordering::Acquire),
            files: self.0.asked.files.load(Ordering::Acquire),
        }
    }

    /// The URLs the dependency cache answered, in order.
    pub fn from_cache(&self) -> Vec<String> {
        (self.0.from_cache.lock())
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

    /// Marks a connection as being served until the guard drops (after its record is in).
    pub(super) fn serving(&self) -> Serving {
        self.0.serving.fetch_add(1, Ordering::AcqRel);
        Serving(self.clone())
    }

    /// Waits, at most `limit`, until every connection being served has its record in: a
    /// call whose programs ended is stored with the connections they were closing.
    pub async fn settle(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.0.settled.notified();
            if self.0.serving.load(Ordering::Acquire) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
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

/// A connection being served ([`EgressLog::serving`]).
#[derive(Debug)]
pub(super) struct Serving(EgressLog);

impl Drop for Serving {
    fn drop(&mut self) {
        let inner = &self.0 .0;
        if inner.serving.fetch_sub(1, Ordering::AcqRel) == 1 {
            inner.settled.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_record_still_coming_in_is_waited_for() {
        let log = EgressLog::default();
        log.settle(Duration::from_secs(5)).await;
        let serving = log.serving();
        let (pushed, waiter) = (log.clone(), log.clone());
        let wait = tokio::spawn(async move {
            waiter.settle(Duration::from_secs(10)).await;
            waiter.snapshot().connections.len()
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        pushed.push(crate::state::store::EgressEntry {
            host: "a.test".into(),
            port: 443,
            verdict: crate::state::store::EgressVerdict::Refused,
            reason: Some("test".into()),
            bytes_out: 0,
            bytes_in: 0,
            started_ms: 0,
            duration_ms: 0,
            cache_hits: 0,
        });
        drop(serving);
        assert_eq!(
            wait.await.unwrap(),
            1,
            "stored after the last record came in"
        );
        // A connection that never ends is waited for no longer than the limit.
        let _held = log.serving();
        let started = std::time::Instant::now();
        log.settle(Duration::from_millis(50)).await;
        assert!(started.elapsed() < Duration::from_secs(5));
    }

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
