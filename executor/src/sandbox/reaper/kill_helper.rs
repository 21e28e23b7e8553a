//! The kill helper: a `clone(CLONE_VM | CLONE_VFORK | CLONE_FILES)` child that switches to
//! a call's user id and sends SIGKILL to everything that user may signal (`kill(-1)`),
//! using raw system calls only on a stack prepared before the clone.

use std::sync::atomic::{AtomicU64, Ordering};

use nix::sys::wait::waitpid;
use nix::unistd::Pid;

/// Starts a helper that switches to `uid` and calls `kill(-1, SIGKILL)`, and waits for it.
///
/// The helper is a `clone(CLONE_VM | CLONE_VFORK | CLONE_FILES)` child, as `posix_spawn`
/// starts its children (and sharing the descriptor table too): it shares the executor's memory instead of copying its page tables, so the
/// executor pays neither the copy nor the copy-on-write faults a `fork` of a large,
/// multi-threaded process costs on every call (docs/hot-path.md measured the releaser
/// thread, which runs this, above the tool itself). The calling thread sleeps until the
/// helper exits. The helper makes raw system calls only — no libc wrapper that keeps state
/// (glibc's `setresuid` would broadcast to the executor's threads), no allocation — on a
/// stack allocated here, with every signal but SIGCHLD (which has no handler) blocked, inherited from this thread's mask.
pub(super) fn kill_as(uid: u32) {
    const STACK_BYTES: usize = 16 * 1024;
    KILL_HELPERS.fetch_add(1, Ordering::Relaxed);
    let mut stack = vec![0u8; STACK_BYTES];
    let mut args = KillArgs { uid };
    // The stack grows down: pass its 16-byte aligned top.
    let top = (stack.as_mut_ptr() as usize + STACK_BYTES) & !0xf;
    let all = crate::sandbox::spawn::clone_window_mask();
    let mut old: libc::sigset_t = unsafe_zeroed_sigset();
    // SAFETY: pthread_sigmask on sigsets owned here; clone runs `kill_helper`
    // on `stack`, which outlives the child (CLONE_VFORK: this thread resumes only after
    // the child exited), with a pointer to `args`, which lives until after that too; the
    // child touches nothing else of the shared memory.
    let pid = unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            kill_helper,
            top as *mut libc::c_void,
            // CLONE_FILES: the helper opens and closes nothing, so it shares the
            // executor's descriptor table instead of copying it at clone and closing
            // every copy at exit (most of the helper's cost on a busy executor).
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_FILES | libc::SIGCHLD,
            (&mut args as *mut KillArgs).cast(),
        );
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        pid
    };
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        tracing::error!(uid, error = %e, "cannot start the process killer");
        return;
    }
    let _ = waitpid(Pid::from_raw(pid), None);
    drop(stack);
}

/// Kill helpers started by this process.
static KILL_HELPERS: AtomicU64 = AtomicU64::new(0);

/// How many kill helpers this process has started (tests and benches compare it around
/// calls).
pub fn kill_helpers_started() -> u64 {
    KILL_HELPERS.load(Ordering::Relaxed)
}

/// What [`kill_helper`] reads: the user to become.
#[repr(C)]
struct KillArgs {
    uid: u32,
}

/// The helper's body (see [`kill_as`]): raw system calls only; returning exits the helper.
extern "C" fn kill_helper(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points to the KillArgs that `kill_as` keeps alive until this child
    // exited; only raw system calls with integer arguments follow.
    unsafe {
        let args = &*(arg as *const KillArgs);
        let uid = libc::c_long::from(args.uid);
        if libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0 {
            return 1;
        }
        libc::syscall(
            libc::SYS_kill,
            -1 as libc::c_long,
            libc::c_long::from(libc::SIGKILL),
        );
    }
    0
}

fn unsafe_zeroed_sigset() -> libc::sigset_t {
    // SAFETY: sigset_t is a plain bit array; all zeroes is the empty set.
    unsafe { std::mem::zeroed() }
}
