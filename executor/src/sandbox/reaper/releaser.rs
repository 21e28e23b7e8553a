//! The releaser thread: ends calls off their critical path (kill what a call's user still
//! runs, unlock its id, move its scratch folder aside) while the result is on its way.

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// Ends calls off their critical path: a thread of its own runs each queued release
/// (kill what the call's user still runs, unlock the user id, move the scratch dir aside)
/// while the call's result is already on its way. A user id stays locked until its
/// release has run, so no call gets it before its processes are dead.
#[derive(Debug)]
pub struct Releaser {
    queue: Mutex<Sender<Job>>,
    pending: Arc<(Mutex<usize>, Condvar)>,
}

type Job = Box<dyn FnOnce() + Send>;

impl Releaser {
    /// The process's releaser, started on first use.
    pub fn global() -> &'static Releaser {
        static RELEASER: OnceLock<Releaser> = OnceLock::new();
        RELEASER.get_or_init(Releaser::start)
    }

    fn start() -> Self {
        let (queue, jobs) = mpsc::channel::<Job>();
        let pending = Arc::new((Mutex::new(0usize), Condvar::new()));
        let counter = Arc::clone(&pending);
        let spawned = std::thread::Builder::new()
            .name("call-releaser".into())
            .spawn(move || {
                for job in jobs {
                    job();
                    done(&counter);
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the call releaser; calls end in line");
        }
        Self {
            queue: Mutex::new(queue),
            pending,
        }
    }

    /// Queues `job`; runs it here when the thread is gone.
    pub fn release(&self, job: impl FnOnce() + Send + 'static) {
        if let Ok(mut n) = self.pending.0.lock() {
            *n += 1;
        }
        let sent = match self.queue.lock() {
            Ok(queue) => queue.send(Box::new(job)).map_err(|e| e.0),
            Err(_) => Err(Box::new(job) as Job),
        };
        if let Err(job) = sent {
            job();
            done(&self.pending);
        }
    }

    /// Waits until a queued release has run, at most until `deadline`. False when none is
    /// queued (nothing will free a user id) or the deadline passed.
    pub fn wait_one(&self, deadline: std::time::Instant) -> bool {
        let (lock, changed) = &*self.pending;
        let Ok(mut n) = lock.lock() else { return false };
        let before = *n;
        while *n >= before && before > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            n = match changed.wait_timeout(n, left) {
                Ok((n, _)) => n,
                Err(_) => return false,
            };
        }
        before > 0
    }

    /// Waits until every queued release has run (before the executor exits).
    pub fn wait_idle(&self) {
        let (lock, changed) = &*self.pending;
        let Ok(mut n) = lock.lock() else { return };
        while *n > 0 {
            n = match changed.wait(n) {
                Ok(n) => n,
                Err(_) => return,
            };
        }
    }
}

fn done(pending: &(Mutex<usize>, Condvar)) {
    if let Ok(mut n) = pending.0.lock() {
        *n = n.saturating_sub(1);
    }
    pending.1.notify_all();
}
