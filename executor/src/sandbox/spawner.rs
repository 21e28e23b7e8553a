//! Spawner threads: tools start from threads that carry the seccomp filters themselves.
//!
//! Installing a seccomp filter makes the kernel check, convert and JIT-compile the BPF
//! program and emulate it over every syscall number for its cache; the spawn benchmark
//! measured that at 0.12 ms per tool process, the largest step of the child's setup, and a
//! profile under load at ~6 % of the machine. A filter is inherited at `clone`, shared, not
//! copied: so a few threads of the executor install the tool filters once, at start, on
//! themselves alone (no `TSYNC`: the executor's other threads stay unfiltered), and every
//! sandboxed tool is cloned from one of them ([`Launch::start`] refuses a launch marked
//! [`Seccomp::Inherit`](super::child::Seccomp::Inherit) on any other thread). The child's
//! own setup (user switch, capabilities, rlimits, Landlock) then runs under the filter,
//! which is why the policy allows those calls; each only narrows what the calling process
//! may do, and an unprivileged tool gains nothing from them.
//!
//! A network call's process cannot come from these threads: it must join its network
//! namespace before it is under any filter (the tool filters allow no `setns`). A
//! sandbox that can make namespaces keeps a few more threads without filters
//! ([`Spawner::start_unfiltered`]); its network calls are cloned from them and install
//! their filters themselves ([`Seccomp::Install`](super::child::Seccomp::Install)).
//!
//! A call's task awaits its job ([`Spawner::spawn_async`]), so the runtime's worker is not
//! blocked while the child sets itself up and execs; the prestart pool's filler, a plain
//! thread, blocks ([`Spawner::spawn`]).

use std::collections::VecDeque;
use std::io;
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Condvar, Mutex};

use super::child_process::SandboxChild;
use super::seccomp::ToolFilters;
use super::spawn::{Launch, Started};

/// Spawner threads of a sandbox: a thread is blocked while its child sets itself up and
/// execs (CLONE_VFORK), using no CPU, so there are more than cores.
pub const SPAWNER_THREADS: usize = 4;

/// Most spawner threads.
pub const MAX_SPAWNER_THREADS: usize = 16;

/// Where a job's outcome goes: a thread blocked on it, or a task awaiting it.
enum Reply {
    Blocking(SyncSender<io::Result<Started>>),
    Async(tokio::sync::oneshot::Sender<io::Result<Started>>),
}

struct Job {
    launch: Launch,
    reply: Reply,
}

/// The jobs waiting for a spawner thread. A job wakes one waiting thread: std's channel
/// receiver cannot be shared, and sharing it behind a mutex woke a second thread per job
/// (the next in line for the mutex) only for it to wait again.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct QueueState {
    jobs: VecDeque<Job>,
    closed: bool,
}

impl Queue {
    /// Queues `job` for one thread; false (the job dropped) when the queue is closed.
    fn push(&self, job: Job) -> bool {
        {
            let Ok(mut state) = self.state.lock() else {
                return false;
            };
            if state.closed {
                return false;
            }
            state.jobs.push_back(job);
        }
        self.ready.notify_one();
        true
    }

    /// The next job, waiting for one; `None` once the queue is closed and empty.
    fn pop(&self) -> Option<Job> {
        let mut state = self.state.lock().ok()?;
        loop {
            if let Some(job) = state.jobs.pop_front() {
                return Some(job);
            }
            if state.closed {
                return None;
            }
            state = self.ready.wait(state).ok()?;
        }
    }

    fn close(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.closed = true;
        }
        self.ready.notify_all();
    }
}

/// The spawner threads of one sandbox; dropping the last handle ends them.
pub struct Spawner {
    queue: Arc<Queue>,
    threads: usize,
}

impl Drop for Spawner {
    fn drop(&mut self) {
        self.queue.close();
    }
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawner")
            .field("threads", &self.threads)
            .finish()
    }
}

impl Spawner {
    /// Starts `threads` (1 to [`MAX_SPAWNER_THREADS`]) threads, each with `filters`
    /// installed on itself. Fails if a thread cannot start or the kernel refuses the
    /// filters: the sandbox does not start without them.
    pub fn start(filters: &Arc<ToolFilters>, threads: usize) -> io::Result<Self> {
        Self::start_with(Some(filters), threads)
    }

    /// Starts `threads` threads without filters, for launches that install their own
    /// (a network call's, which joins its namespace first); they refuse launches marked
    /// [`Seccomp::Inherit`](super::child::Seccomp::Inherit) ([`Launch::start`]).
    pub fn start_unfiltered(threads: usize) -> io::Result<Self> {
        Self::start_with(None, threads)
    }

    fn start_with(filters: Option<&Arc<ToolFilters>>, threads: usize) -> io::Result<Self> {
        let threads = threads.clamp(1, MAX_SPAWNER_THREADS);
        // Made first: returning early drops it, which ends the threads already started.
        let spawner = Self {
            queue: Arc::new(Queue::default()),
            threads,
        };
        for _ in 0..threads {
            let (ready, installed) = mpsc::sync_channel::<io::Result<()>>(1);
            let (filters, queue) = (filters.map(Arc::clone), Arc::clone(&spawner.queue));
            std::thread::Builder::new()
                .name("tool-spawner".into())
                .spawn(move || serve(filters.as_deref(), &queue, &ready))?;
            installed
                .recv()
                .map_err(|_| io::Error::other("a tool spawner thread ended before it started"))?
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("installing the seccomp filters on a tool spawner thread: {e}"),
                    )
                })?;
        }
        Ok(spawner)
    }

    /// Starts `launch` on a spawner thread, blocking the calling thread until it ran, and
    /// ties it to the calling thread's tokio runtime.
    pub fn spawn(&self, launch: Launch) -> io::Result<SandboxChild> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.send(launch, Reply::Blocking(reply))?;
        let started = answer.recv().map_err(|_| ended())??;
        started.into_child()
    }

    /// [`Spawner::spawn`] without blocking the calling thread: a runtime's worker goes on
    /// with other tasks while the tool starts.
    pub async fn spawn_async(&self, launch: Launch) -> io::Result<SandboxChild> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.send(launch, Reply::Async(reply))?;
        let started = answer.await.map_err(|_| ended())??;
        started.into_child()
    }

    fn send(&self, launch: Launch, reply: Reply) -> io::Result<()> {
        if self.queue.push(Job { launch, reply }) {
            Ok(())
        } else {
            Err(io::Error::other("the tool spawner threads are gone"))
        }
    }
}

fn ended() -> io::Error {
    io::Error::other("a tool spawner thread ended during a spawn")
}

/// A spawner thread: installs the filters on itself (when given), reports, then starts
/// jobs until the queue closes.
fn serve(filters: Option<&ToolFilters>, queue: &Queue, ready: &SyncSender<io::Result<()>>) {
    // Low numbers for the children's descriptors, kept while the table is still small
    // (a thread without them starts children that copy the whole table).
    // A filtered thread's children never join a namespace: one number fewer.
    let slots = match filters {
        Some(_) => super::spawn::child_fds::SLOTS - 1,
        None => super::spawn::child_fds::SLOTS,
    };
    if let Err(e) = super::spawn::child_fds::reserve(slots) {
        tracing::warn!(error = %e, "a tool spawner keeps no descriptors for its children");
    }
    let installed = filters.map_or(Ok(()), ToolFilters::apply);
    let ok = installed.is_ok();
    let _ = ready.send(installed);
    if !ok {
        return;
    }
    super::spawn::mark_filtered_thread(filters.is_some());
    while let Some(job) = queue.pop() {
        let started = job.launch.start();
        // A caller that is gone drops the process, which kills and reaps it.
        match job.reply {
            Reply::Blocking(reply) => drop(reply.send(started)),
            Reply::Async(reply) => drop(reply.send(started)),
        }
    }
}

#[cfg(test)]
mod tests;
