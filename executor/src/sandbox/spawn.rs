//! Starting a tool: `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)` instead of `fork`.
//!
//! A fork copies the executor's page tables (tens of megabytes of mappings on a busy
//! executor) only for the child to throw them away at `execve`; docs/hot-path.md measured it
//! as the largest piece of a call's spawn. Here the child borrows the executor's memory
//! while the calling thread sleeps (CLONE_VFORK: it resumes once the child has exec'd or
//! exited), runs [`ChildSetup::apply`] on a stack of its own and execs the tool. The kernel
//! hands back a pidfd, so waiting and killing never race with pid reuse. The child shares
//! the executor's descriptor table too (CLONE_FILES) and, first thing, unshares only its
//! bottom, where the spawning thread put the descriptors the child needs ([`child_fds`]).
//!
//! Between clone and exec the child shares the executor's memory, so it may only make raw
//! system calls on data prepared before the clone: no allocation, no lock, no libc wrapper
//! that keeps state (glibc's `setresuid` would broadcast the change to the *executor's*
//! threads; [`ChildSetup`] calls the kernel directly for that reason). std's and tokio's
//! `Command` cannot be used: with `pre_exec` they fork.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};

use super::child::{ChildSetup, Seccomp};
use super::child_process::SandboxChild;
use own_fds::OwnFds;
use stack::{ChildStack, STACK};

/// Bytes of the child's stack (it runs `ChildSetup::apply`: a few frames of system calls).
const STACK_BYTES: usize = 256 * 1024;

/// The highest signal number (`_NSIG - 1` on Linux).
const MAX_SIGNAL: libc::c_int = 64;

/// `CLOSE_RANGE_UNSHARE` as the `c_int` flags `close_range` takes.
// The flag is `1 << 1`: it fits a c_int and the cast cannot wrap.
#[allow(clippy::cast_possible_wrap)]
const CLOSE_RANGE_UNSHARE: libc::c_int = libc::CLOSE_RANGE_UNSHARE as libc::c_int;

/// A tool's command line, environment and setup, converted for `execve` ahead of the clone.
pub struct Launch {
    program: CString,
    cwd: CString,
    /// Owners of the strings `argv_ptrs` and `envp_ptrs` point into.
    _strings: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    envp_ptrs: Vec<*const libc::c_char>,
    setup: ChildSetup,
    stdio: ChildStdio,
}

/// How a child's stdin, stdout and stderr are connected.
#[derive(Debug, Default)]
pub enum ChildStdio {
    /// Three pipes (a tool call).
    #[default]
    Piped,
    /// A stdin pipe and one pipe for both stdout and stderr, interleaved as written (a
    /// command session); [`SandboxChild::stderr`] is `None`.
    Merged,
    /// The terminal whose other side the executor holds (a command session with a
    /// pseudo-terminal): on 0, 1 and 2, made the controlling terminal of the child's new
    /// session; the child has no pipes.
    Terminal(OwnedFd),
}

// SAFETY: the raw pointers point into `_strings`, owned by the same value and never
// changed after `Launch::new`; nothing else aliases them.
unsafe impl Send for Launch {}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("program", &self.program)
            .field("cwd", &self.cwd)
            .field("args", &self.argv_ptrs.len().saturating_sub(1))
            .field("env", &self.envp_ptrs.len().saturating_sub(1))
            .finish_non_exhaustive()
    }
}

/// Which step of the child failed (reported with its errno).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Step {
    Stdio = 1,
    Chdir = 2,
    Setup = 3,
    Exec = 4,
    MountNamespace = 5,
}

impl Step {
    fn from_code(code: i64) -> &'static str {
        match code {
            1 => "connecting stdio",
            2 => "entering the working directory",
            3 => "confining the process",
            5 => "joining the call's mount namespace",
            _ => "executing the program",
        }
    }
}

/// What the child reads: everything prepared, and where to report a failure.
struct ChildContext<'a> {
    launch: &'a mut Launch,
    /// The pipe ends to put on 0, 1 and 2, as numbered in the child's table.
    stdio: [RawFd; 3],
    /// The Landlock ruleset as numbered in the child's table, when the spawn moved it.
    ruleset: Option<RawFd>,
    /// The network namespace as numbered in the child's table, when the spawn moved it.
    netns: Option<RawFd>,
    /// The mount namespace as numbered in the child's table, when the spawn moved it.
    mntns: Option<RawFd>,
    /// The memory cgroup's `cgroup.procs` as numbered in the child's table, when moved.
    cgroup: Option<RawFd>,
    /// The child shares the executor's table at clone and unshares it first thing,
    /// keeping the descriptors below this number ([`child_fds`]).
    unshare_below: Option<RawFd>,
    /// `step << 32 | errno`, 0 while nothing failed.
    failure: &'a AtomicI64,
    /// This thread's bounding set, and so the child's, is empty: nothing to drop.
    bounding_set_empty: bool,
}

impl Launch {
    /// Converts the command for `execve`. `program` is an absolute path (or one relative
    /// to `cwd`); `env` is the whole environment.
    pub fn new<'a>(
        program: &Path,
        args: impl IntoIterator<Item = &'a String>,
        env: impl IntoIterator<Item = (String, String)>,
        cwd: &Path,
        setup: ChildSetup,
    ) -> io::Result<Self> {
        let c = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the command")
            })
        };
        let program = c(program.as_os_str().as_bytes())?;
        let cwd = c(cwd.as_os_str().as_bytes())?;
        let mut strings = vec![program.clone()];
        for a in args {
            strings.push(c(a.as_bytes())?);
        }
        let argc = strings.len();
        // Later entries of a repeated name win, as with `Command::envs`.
        let mut vars: Vec<(String, String)> = Vec::new();
        for (k, v) in env {
            if k.is_empty() || k.contains('=') {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("invalid environment variable name {k:?}"),
                ));
            }
            match vars.iter_mut().find(|(name, _)| *name == k) {
                Some(slot) => slot.1 = v,
                None => vars.push((k, v)),
            }
        }
        for (k, v) in vars {
            let mut entry = OsString::from(k);
            entry.push("=");
            entry.push(v);
            strings.push(c(entry.as_bytes())?);
        }
        let ptrs = |s: &[CString]| {
            let mut p: Vec<*const libc::c_char> = s.iter().map(|s| s.as_ptr()).collect();
            p.push(std::ptr::null());
            p
        };
        let argv_ptrs = ptrs(&strings[..argc]);
        let envp_ptrs = ptrs(&strings[argc..]);
        Ok(Self {
            program,
            cwd,
            _strings: strings,
            argv_ptrs,
            envp_ptrs,
            setup,
            stdio: ChildStdio::Piped,
        })
    }

    /// Connects the child's stdio as `stdio` says instead of three pipes. A terminal
    /// makes the child start a session of its own with it as its controlling terminal.
    pub fn with_stdio(mut self, stdio: ChildStdio) -> Self {
        if matches!(stdio, ChildStdio::Terminal(_)) {
            self.setup.controlling_terminal = true;
        }
        self.stdio = stdio;
        self
    }

    /// Whether the process joins a network call's namespace ([`ChildSetup::netns`]).
    pub fn joins_namespace(&self) -> bool {
        self.setup.netns.is_some()
    }

    /// Whether the process must inherit its seccomp filters from a spawner thread
    /// ([`super::spawner`]).
    pub fn inherits_seccomp(&self) -> bool {
        matches!(self.setup.seccomp, Seccomp::Inherit)
    }

    /// Starts the tool with stdin, stdout and stderr piped. Needs a tokio runtime (the
    /// pipes and the pidfd register with its reactor). A failure in the child before exec
    /// (a sandbox step the kernel refused, a missing program) comes back as the error.
    pub fn spawn(self) -> io::Result<SandboxChild> {
        self.start()?.into_child()
    }

    /// Starts the tool as [`Launch::spawn`] does, without a runtime: the process and the
    /// executor's ends of its pipes, to hand to a runtime with [`Started::into_child`].
    /// A launch that inherits its seccomp filters is refused on a thread without them.
    pub fn start(mut self) -> io::Result<Started> {
        if self.inherits_seccomp() && !on_filtered_thread() {
            return Err(io::Error::other(
                "refusing to start a sandboxed tool on a thread without the seccomp filters (it must go through the sandbox's spawner)",
            ));
        }
        // The child's ends (closed here once it has exec'd) and the executor's.
        let (child_ends, parent_ends) = stdio_ends(std::mem::take(&mut self.stdio))?;
        let failure = AtomicI64::new(0);
        let bounding_set_empty = super::child::bounding_set_empty(self.setup.cap_last);
        let own = OwnFds::of(&self.setup, &child_ends);
        let mut pidfd: libc::c_int = -1;
        let pid = child_fds::with(|kept| {
            // The child's descriptors on this thread's kept numbers, or (none kept) where
            // they are, for a child that copies the whole table.
            let placed = kept.and_then(|k| k.place(own.all()).ok().map(|p| (k.end(), p)));
            let mut context = ChildContext {
                launch: &mut self,
                stdio: [own.fds[0], own.fds[1], own.fds[2]],
                ruleset: None,
                netns: None,
                mntns: None,
                cgroup: None,
                unshare_below: None,
                failure: &failure,
                bounding_set_empty,
            };
            let mut flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
            if let Some((end, placed)) = &placed {
                context.stdio = [placed.number(0), placed.number(1), placed.number(2)];
                context.ruleset = own.ruleset_at.map(|i| placed.number(i));
                context.netns = own.netns_at.map(|i| placed.number(i));
                context.mntns = own.mntns_at.map(|i| placed.number(i));
                context.cgroup = own.cgroup_at.map(|i| placed.number(i));
                context.unshare_below = Some(*end);
                flags |= libc::CLONE_FILES;
            }
            clone_child(&mut context, flags, &mut pidfd)
            // `placed` drops here: the kept numbers go back to their placeholders.
        })?;
        // The child's ends, and with them the parent's copies, close here.
        drop(child_ends);
        // SAFETY: CLONE_PIDFD stored a new pidfd (O_CLOEXEC) that nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        let reported = failure.load(Ordering::SeqCst);
        if reported != 0 {
            return Err(reap_failed(pid, reported));
        }
        Ok(Started {
            pid: Some(pid),
            pidfd: Some(pidfd),
            stdio: Some(parent_ends),
        })
    }
}

/// The child's ends of its stdio (closed in the executor once it has exec'd) and the
/// executor's, as `stdio` asks: three pipes, a stdin pipe and one for stdout and stderr,
/// or a terminal.
fn stdio_ends(stdio: ChildStdio) -> io::Result<(Vec<OwnedFd>, [Option<OwnedFd>; 3])> {
    Ok(match stdio {
        ChildStdio::Piped => {
            let (stdin_read, stdin_write) = pipe()?;
            let (stdout_read, stdout_write) = pipe()?;
            let (stderr_read, stderr_write) = pipe()?;
            (
                vec![stdin_read, stdout_write, stderr_write],
                [Some(stdin_write), Some(stdout_read), Some(stderr_read)],
            )
        }
        ChildStdio::Merged => {
            let (stdin_read, stdin_write) = pipe()?;
            let (out_read, out_write) = pipe()?;
            (
                vec![stdin_read, out_write],
                [Some(stdin_write), Some(out_read), None],
            )
        }
        ChildStdio::Terminal(slave) => (vec![slave], [None, None, None]),
    })
}

/// Clones the child with `flags` to run [`in_child::child_main`] on this thread's child
/// stack with `context`; its pidfd goes to `pidfd`. Returns once the child has exec'd or
/// exited (CLONE_VFORK).
fn clone_child(
    context: &mut ChildContext,
    flags: libc::c_int,
    pidfd: &mut libc::c_int,
) -> io::Result<libc::pid_t> {
    STACK.with(|stack| {
        let mut stack = stack.borrow_mut();
        let stack = match stack.as_mut() {
            Some(s) => s,
            None => stack.insert(ChildStack::new()?),
        };
        // SAFETY: every signal but SIGCHLD is blocked around the clone so that no
        // handler of the executor runs on the child's stack before it reset them
        // ([`clone_window_mask`]); clone runs `child_main` on `stack` (this
        // thread's own, unused until the child has exec'd or exited, since
        // CLONE_VFORK suspends this thread until then) with a pointer to
        // `context`, which outlives the child's use of it for the same reason.
        // With CLONE_FILES the child changes no descriptor before it unshared the
        // table ([`run_child`]).
        unsafe {
            let all = clone_window_mask();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            let pid = libc::clone(
                in_child::child_main,
                stack.top(),
                flags,
                (context as *mut ChildContext).cast(),
                pidfd as *mut libc::c_int,
            );
            let clone_error = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            if pid < 0 {
                Err(clone_error)
            } else {
                Ok(pid)
            }
        }
    })
}

/// The child `pid` exited without exec, having `reported` its failed step and errno
/// (`step << 32 | errno`): reaps it and says why.
fn reap_failed(pid: libc::pid_t, reported: i64) -> io::Error {
    // The child exited without exec: reap it before reporting why.
    let mut status = 0;
    // SAFETY: waits for our own child, whose pid nothing else reaps.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let errno = (reported & 0xffff_ffff) as i32;
    let step = Step::from_code(reported >> 32);
    let os = io::Error::from_raw_os_error(errno);
    io::Error::new(os.kind(), format!("{step}: {os}"))
}

/// A started tool process not yet tied to a runtime: its pid, its pidfd and the executor's
/// ends of its pipes. Dropped without [`Started::into_child`], it kills and reaps the
/// process.
#[derive(Debug)]
pub struct Started {
    pid: Option<libc::pid_t>,
    pidfd: Option<OwnedFd>,
    stdio: Option<[Option<OwnedFd>; 3]>,
}

impl Started {
    /// Registers the pidfd and the pipes with the calling thread's tokio runtime.
    pub fn into_child(mut self) -> io::Result<SandboxChild> {
        let (Some(pid), Some(pidfd), Some([stdin, stdout, stderr])) =
            (self.pid.take(), self.pidfd.take(), self.stdio.take())
        else {
            return Err(io::Error::other("a started process handed over twice"));
        };
        SandboxChild::new(pid, pidfd, stdin, stdout, stderr)
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let (Some(pid), Some(pidfd)) = (self.pid.take(), self.pidfd.take()) {
            // SAFETY: signals and reaps our own child through its pidfd and pid, which
            // nothing else reaps.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
            }
        }
    }
}

/// The signal mask a thread holds while it clones a child that shares its memory: every
/// signal but SIGCHLD. SIGCHLD has no handler in the executor (its default action is to
/// ignore it), so it can run nothing on the child's stack; left blocked, the SIGCHLD of
/// any child exiting meanwhile (a kill helper always exits inside its parent's window)
/// was not discarded at once but queued for the process and woke some other thread of
/// the executor to be discarded there, about two wake-ups per call.
pub(super) fn clone_window_mask() -> libc::sigset_t {
    // SAFETY: sigfillset and sigdelset on a set owned here.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::sigdelset(&mut set, libc::SIGCHLD);
        set
    }
}

/// A pipe whose both ends close on exec.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two new descriptors into `fds`, which we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are new descriptors owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub mod child_fds;
mod in_child;
mod own_fds;
mod stack;

thread_local! {
    /// Set on a spawner thread ([`super::spawner`]) once its tool filters are installed.
    static FILTERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as one whose tool filters are installed (`true`) or not: a
/// spawner thread does, right after installing them.
pub fn mark_filtered_thread(filtered: bool) {
    FILTERED.with(|f| f.set(filtered));
}

/// Whether the calling thread is a spawner thread with the tool filters installed.
pub fn on_filtered_thread() -> bool {
    FILTERED.with(std::cell::Cell::get)
}

#[cfg(test)]
mod tests;
