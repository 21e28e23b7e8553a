//! The child's side of the spawn, between clone and exec: raw system calls on data
//! prepared before the clone, no allocation, no lock (see the parent module's doc).

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

use super::{ChildContext, Step, CLOSE_RANGE_UNSHARE, MAX_SIGNAL};

/// The child's body: reset signals, connect stdio, enter the skill folder, confine, exec.
/// Returns (and so exits) only on failure, after reporting the step and errno.
pub(super) extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the ChildContext `spawn` keeps alive until this child exec'd or
    // exited; only raw system calls on prepared data follow.
    let context = unsafe { &mut *(arg as *mut ChildContext) };
    let (step, errno) = match run_child(context) {
        Ok(never) => match never {},
        Err(failed) => failed,
    };
    context.failure.store(
        ((step as i64) << 32) | i64::from(errno.max(1)),
        Ordering::SeqCst,
    );
    // SAFETY: ends this child process only (it is its own thread group).
    unsafe { libc::_exit(127) }
}

/// The steps after clone; returns only on failure.
fn run_child(context: &mut ChildContext) -> Result<std::convert::Infallible, (Step, i32)> {
    let errno = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    // SAFETY: raw system calls on integers and structures on this stack.
    unsafe {
        // Cloned sharing the executor's descriptor table: a private copy of its bottom
        // (the kept numbers among them) before any descriptor is touched.
        if let Some(end) = context.unshare_below {
            let Ok(end) = libc::c_uint::try_from(end) else {
                return Err((Step::Stdio, libc::EBADF));
            };
            let r = libc::close_range(end, libc::c_uint::MAX, CLOSE_RANGE_UNSHARE);
            if r != 0 {
                return Err((Step::Stdio, errno()));
            }
        }
        // Handlers are the executor's code: back to the default before anything can run
        // them in this child; SIGPIPE too (the Rust runtime ignores it, a tool must not).
        for signal in 1..=MAX_SIGNAL {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                std::ptr::null::<libc::sigaction>(),
                &mut old as *mut libc::sigaction,
                8usize,
            ) != 0
            {
                continue;
            }
            if old.sa_sigaction != libc::SIG_DFL
                && (old.sa_sigaction != libc::SIG_IGN || signal == libc::SIGPIPE)
            {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    signal,
                    &default as *const libc::sigaction,
                    std::ptr::null_mut::<libc::sigaction>(),
                    8usize,
                );
            }
        }
        let empty: libc::sigset_t = std::mem::zeroed();
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &empty as *const libc::sigset_t,
            std::ptr::null_mut::<libc::sigset_t>(),
            8usize,
        );
        for (target, fd) in (0..).zip(context.stdio.iter()) {
            let ret = if *fd == target {
                // Already in place: only its close-on-exec flag must go.
                libc::fcntl(target, libc::F_SETFD, 0)
            } else {
                libc::dup2(*fd, target)
            };
            if ret < 0 {
                return Err((Step::Stdio, errno()));
            }
        }
        // The call's mount namespace (UNIX sockets: its own /tmp), while the process is
        // still root with CAP_SYS_ADMIN and CAP_SYS_CHROOT; it moves the process to the
        // namespace's root, so before the working directory is entered.
        let own = context.launch.setup.mntns.as_ref();
        if let Some(mntns) = context.mntns.or(own.map(|fd| fd.as_raw_fd())) {
            if libc::setns(mntns, libc::CLONE_NEWNS) != 0 {
                return Err((Step::MountNamespace, errno()));
            }
        }
        if libc::chdir(context.launch.cwd.as_ptr()) < 0 {
            return Err((Step::Chdir, errno()));
        }
    }
    let moved = super::super::child::MovedFds {
        ruleset: context.ruleset,
        netns: context.netns,
        cgroup: context.cgroup,
    };
    if let Err(e) = (context.launch.setup).apply(context.bounding_set_empty, moved) {
        return Err((Step::Setup, e.raw_os_error().unwrap_or(libc::EPERM)));
    }
    // SAFETY: execve with NUL-terminated arrays of pointers to live C strings.
    unsafe {
        libc::execve(
            context.launch.program.as_ptr(),
            context.launch.argv_ptrs.as_ptr(),
            context.launch.envp_ptrs.as_ptr(),
        );
    }
    Err((Step::Exec, errno()))
}
