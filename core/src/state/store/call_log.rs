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
//!
//! The writer lingers: woken by a first record, it lets more arrive for up to [`LINGER`]
//! (or until [`LINGER_BATCH`] wait) before it writes, unless a reader waits for them. Under
//! load, a batch then holds many calls, and a call wakes no thread: one commit (and its WAL
//! pages) per batch instead of nearly one per call. A crash (not a clean stop) can lose what
//! was queued, as before, now up to [`LINGER`] of it.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::{CallRecord, Store};

/// Most records waiting for the writer; more wait for room.
pub const MAX_QUEUED: usize = 4096;

/// Longest the writer waits for more records after the first before it writes.
pub const LINGER: Duration = Duration::from_millis(5);

/// Records that end the writer's wait at once.
pub const LINGER_BATCH: usize = 256;

/// The queue between the calls and the writer thread.
#[derive(Debug)]
pub(super) struct CallLog {
    /// How long the writer lingers ([`LINGER`]; tests set their own).
    linger: Duration,
    state: Mutex<LogState>,
    /// Signalled when a first record is queued (the writer waits) and when a batch is
    /// written (flushes and full queues wait).
    changed: Condvar,
    /// Signalled when a reader waits for the records (the writer lingers).
    hurry: Condvar,
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
    /// Whether the writer waits for a first record: only then does queuing one wake it
    /// (a condition variable's signal is a system call even when nobody waits).
    writer_idle: bool,
    /// Readers waiting for the queue to be written.
    flushers: usize,
    /// Batches written.
    batches: u64,
    /// Lingers that ran their whole time.
    lingered_out: u64,
}

impl Default for CallLog {
    fn default() -> Self {
        Self {
            linger: LINGER,
            state: Mutex::default(),
            changed: Condvar::new(),
            hurry: Condvar::new(),
        }
    }
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
        let first = state.queue.is_empty();
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
        if first && state.writer_idle {
            // The writer waits for a first record; after it, it lingers without being woken.
            log.changed.notify_all();
        } else if state.queue.len() >= LINGER_BATCH {
            log.hurry.notify_all();
        }
    }

    /// Waits until every record queued before this call is written.
    pub fn flush_calls(&self) {
        let log = &self.inner.call_log;
        let mut state = log.lock();
        let target = state.queued;
        if state.written >= target {
            return;
        }
        state.flushers += 1;
        log.hurry.notify_all();
        while state.written < target {
            state = log.wait(state);
        }
        state.flushers -= 1;
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
                    state.writer_idle = true;
                    state = log.wait(state);
                }
                state.writer_idle = false;
                let until = Instant::now() + log.linger;
                while state.flushers == 0 && state.queue.len() < LINGER_BATCH {
                    let Some(left) = until.checked_duration_since(Instant::now()) else {
                        state.lingered_out += 1;
                        break;
                    };
                    state = log
                        .hurry
                        .wait_timeout(state, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                std::mem::take(&mut state.queue)
            };
            self.write_batch(&batch);
            let mut state = log.lock();
            state.written += batch.len() as u64;
            state.batches += 1;
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
            caller: "operator".into(),
            egress: Vec::new(),
            egress_unlisted: 0,
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

    /// A store whose writer lingers `linger`.
    fn lingering(dir: &std::path::Path, linger: Duration) -> Store {
        let mut store = Store::open(&dir.join(DB_FILE)).unwrap();
        std::sync::Arc::get_mut(&mut store.inner)
            .unwrap()
            .call_log
            .linger = linger;
        store
    }

    #[test]
    fn calls_queued_together_are_written_in_one_batch_when_a_reader_asks() {
        let dir = tempfile::tempdir().unwrap();
        // A linger far longer than the test: only the reader can end it.
        let store = lingering(dir.path(), Duration::from_secs(600));
        for i in 0..20 {
            store.queue_call(record(i, true));
        }
        assert!(store.get_call("c19").unwrap().is_some());
        let state = store.inner.call_log.lock();
        assert_eq!((state.written, state.batches), (20, 1));
        assert_eq!(state.lingered_out, 0, "the reader waited for the linger");
    }

    #[test]
    fn a_full_batch_ends_the_linger_without_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        // A linger far longer than the test: only a full batch can end it.
        let store = lingering(dir.path(), Duration::from_secs(600));
        for i in 0..LINGER_BATCH {
            store.queue_call(record(i, true));
        }
        let log = &store.inner.call_log;
        let mut state = log.lock();
        while state.written < LINGER_BATCH as u64 {
            state = log.wait(state);
        }
        assert_eq!(state.lingered_out, 0, "the writer waited out its linger");
    }

    #[test]
    fn a_linger_ends_by_itself_without_a_reader() {
        let dir = tempfile::tempdir().unwrap();
        let store = lingering(dir.path(), Duration::from_millis(1));
        store.queue_call(record(1, true));
        // Nobody flushes: the writer writes once its linger is over.
        let log = &store.inner.call_log;
        let mut state = log.lock();
        while state.written < 1 {
            state = log.wait(state);
        }
        assert_eq!((state.batches, state.lingered_out), (1, 1));
    }

    #[test]
    fn a_writer_gone_idle_is_woken_by_the_next_record_and_only_then() {
        let dir = tempfile::tempdir().unwrap();
        let store = lingering(dir.path(), Duration::from_millis(1));
        let log = &store.inner.call_log;
        for n in 1..=3u64 {
            // Wait until the writer is idle again, then queue: only the wake can start it.
            let mut state = log.lock();
            while n > 1 && !state.writer_idle {
                drop(state);
                std::thread::sleep(Duration::from_millis(1));
                state = log.lock();
            }
            drop(state);
            store.queue_call(record(usize::try_from(n).unwrap(), true));
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut state = log.lock();
            while state.written < n {
                let left = deadline.checked_duration_since(Instant::now());
                let left = left.expect("the idle writer was not woken by the record");
                state = log.changed.wait_timeout(state, left).unwrap().0;
            }
            assert_eq!(state.batches, n, "one batch per record, each after a wake");
        }
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
