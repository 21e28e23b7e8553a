//! Reaping what a call's processes leave behind.
//!
//! A tool's process that forks and exits leaves its children to be adopted; by default
//! the host's init adopts them, and when they die (killed at the end of the call) they
//! stay zombies until init reaps them. Some inits reap only every few seconds, and a
//! zombie still counts against its user's process limit (`RLIMIT_NPROC`): the next call
//! given that user id found its budget spent by the last call's dead processes.
//!
//! [`run_adopting_orphans`] makes the executor the subreaper of everything it starts and
//! reaps the adopted on the main thread. The kernel hands an orphan to the first live
//! thread of the subreaper, the main thread, and the main thread waits with
//! `__WNOTHREAD`, for its own children only; the executor's work runs on another thread,
//! and every process it starts (tools from the spawner threads, kill helpers from the
//! releaser) is a child of that other thread, whose status no one else can take.

use std::time::Duration;

/// How often the main thread looks for adopted processes that have died.
const POLL: Duration = Duration::from_millis(5);

/// The executor's work thread's stack: what the main thread would have had.
const WORK_STACK_BYTES: usize = 8 * 1024 * 1024;

/// Runs `work` on a new thread while this (main) thread reaps every process the executor
/// adopts, and returns what `work` returns. Call from the main thread, before any other
/// thread starts processes. Without subreapers (a kernel before 3.4) the work runs all the
/// same, and orphans go to the host's init as before, with a warning.
pub fn run_adopting_orphans<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    // SAFETY: prctl with integer arguments, affecting this process only.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        let e = std::io::Error::last_os_error();
        tracing::warn!(error = %e, "cannot adopt what tools leave behind; the host's init reaps it");
        return work();
    }
    let worker = std::thread::Builder::new()
        .name("executor".into())
        .stack_size(WORK_STACK_BYTES)
        .spawn(work);
    let worker = match worker {
        Ok(worker) => worker,
        Err(e) => {
            // Nothing started yet: the executor cannot run without threads anyway.
            tracing::error!(error = %e, "cannot start the executor's thread");
            std::process::exit(1);
        }
    };
    while !worker.is_finished() {
        reap_adopted();
        std::thread::sleep(POLL);
    }
    reap_adopted();
    match worker.join() {
        Ok(value) => value,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Reaps every child of this thread that has died, without waiting.
fn reap_adopted() {
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a pointer to a local. __WNOTHREAD: this thread's children
        // only, which are the adopted (see the module comment); __WALL: whatever their
        // exit signal.
        let r = unsafe {
            libc::waitpid(
                -1,
                &mut status,
                libc::WNOHANG | libc::__WALL | libc::__WNOTHREAD,
            )
        };
        if r <= 0 {
            return;
        }
    }
}
