//! Finished calls recorded off the call's path. [`Store::queue_call`] only queues the
//! record; a writer thread inserts what is queued in batches, one transaction per batch.
//! Nothing is lost and nothing is seen late:
//!
//! - every reader of the calls and the skill stats ([`Store::get_call`],
//!   [`Store::skill_stats`], [`Store::all_skill_stats`] and any later one) first waits until
//!   everything queued before it is written ([`Store::flush_calls`]);
//! - `skillbox up` flushes on a clean stop (SIGTERM, Ctrl-C) before it exits;
//! - the queue is bounded ([`MAX_QUEUED`]): a call that finds it full waits for the writer
//!   instead of dropping its record.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::{CallRecord, Store};

/// Most records waiting for the writer; more wait for room.
pub const MAX_QUEUED: usize = 4096;

/// The queue between the calls and the writer thread.
#[derive(Debug, Default)]
pub(super) struct CallLog {
    state: Mutex<LogState>,
    /// Signalled when records are queued (the writer waits) and when a batch is written
    /// (flushes and full queues wait).
    changed: Condvar,
}

#[derive(Debug, Default)]
struct LogState {
    queue: Vec<CallRecord>,
    /// Records ever queued.
    queued: u64,
    /// Records ever written (or given up on, logged).
    written: u64,
    /// Whether the writer thread runs.
    writer: bool,
}

impl CallLog {
    fn lock(&self) -> MutexGuard<'_, LogState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, guard: MutexGuard<'a, LogState>) -> MutexGuard<'a, LogState> {
        self.changed
            .wait(guard)
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Store {
    /// Queues a finished call's record for the writer thread (started on first use) and
    /// returns at once, unless [`MAX_QUEUED`] records already wait.
    pub fn queue_call(&self, call: CallRecord) {
        let log = &self.inner.call_log;
        let mut state = log.lock();
        while state.queue.len() >= MAX_QUEUED {
            state = log.wait(state);
        }
        state.queue.push(call);
        state.queued += 1;
        if !state.writer {
            state.writer = self.start_writer();
        }
        if !state.writer {
            // No thread could be started: write here rather than lose the record.
            let batch = std::mem::take(&mut state.queue);
            drop(state);
            self.write_batch(&batch);
            let mut state = log.lock();
            state.written += batch.len() as u64;
            log.changed.notify_all();
            return;
        }
        log.changed.notify_all();
    }

    /// Waits until every record queued before this call is written.
    pub fn flush_calls(&self) {
        let log = &self.inner.call_log;
        let mut state = log.lock();
        let target = state.queued;
        while state.written < target {
            state = log.wait(state);
        }
    }

    fn start_writer(&self) -> bool {
        let store = self.clone();
        std::thread::Builder::new()
            .name("call-log".into())
            .spawn(move || store.run_writer())
            .map_err(|e| tracing::error!(error = %e, "cannot start the call-log writer"))
            .is_ok()
    }

    fn run_writer(&self) {
        let log = &self.inner.call_log;
        loop {
            let batch = {
                let mut state = log.lock();
                while state.queue.is_empty() {
                    state = log.wait(state);
                }
                std::mem::take(&mut state.queue)
            };
            self.write_batch(&batch);
            let mut state = log.lock();
            state.written += batch.len() as u64;
            log.changed.notify_all();
        }
    }

    /// Writes `batch` in one transaction ([`Store::record_calls`]); a record that fails,
    /// logged, does not take the others with it.
    fn write_batch(&self, batch: &[CallRecord]) {
        for result in self.record_calls(batch) {
            if let Err(e) = result {
                tracing::error!(error = %e, "cannot record the call");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::state::store::DB_FILE;

    fn record(id: usize, success: bool) -> CallRecord {
        CallRecord {
            call_id: format!("c{id}"),
            skill: "s".into(),
            tool: "t".into(),
            started_at: 1,
            duration_ms: 2,
            success,
            error_kind: None,
        }
    }

    #[test]
    fn queued_calls_are_seen_by_every_reader_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join(DB_FILE)).unwrap();
        let writers: Vec<_> = (0..4)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        store.queue_call(record(t * 1000 + i, i % 5 != 0));
                    }
                })
            })
            .collect();
        writers.into_iter().for_each(|w| w.join().unwrap());
        // No explicit flush: the readers wait for what was queued before them.
        let stats = store.skill_stats("s").unwrap().unwrap();
        assert_eq!((stats.successes, stats.failures), (160, 40));
        assert!(store.get_call("c3049").unwrap().is_some());
        assert_eq!(store.all_skill_stats().unwrap().len(), 1);
    }

    #[test]
    fn flushed_calls_are_on_disk_for_another_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE);
        let store = Store::open(&path).unwrap();
        for i in 0..300 {
            store.queue_call(record(i, true));
        }
        store.flush_calls();
        let other = rusqlite::Connection::open(&path).unwrap();
        let n: i64 = other
            .query_row("SELECT COUNT(*) FROM calls", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 300);
    }

    #[test]
    fn a_record_that_fails_is_logged_and_the_queue_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join(DB_FILE)).unwrap();
        store.queue_call(record(1, true));
        // The same call id again: its insert fails (logged), the next one is written.
        store.queue_call(record(1, true));
        store.queue_call(record(2, false));
        let stats = store.skill_stats("s").unwrap().unwrap();
        assert_eq!((stats.successes, stats.failures), (1, 1));
        assert!(store.get_call("c2").unwrap().is_some());
    }
}
