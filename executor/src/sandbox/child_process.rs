//! A started tool process, held by its pidfd: piped stdio, waiting without a SIGCHLD
//! handler (the pidfd turns readable when the process exits), killing without a pid-reuse
//! race, and killed and reaped when dropped.
//!
//! Waiting observes the exit without reaping (`WNOWAIT`): the exited process stays a
//! zombie until [`SandboxChild::reap`], so its pid, and the process group id the call's
//! end kills by, cannot be given to another process meanwhile.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

/// A tool process started by [`super::spawn::Launch::spawn`].
#[derive(Debug)]
pub struct SandboxChild {
    pid: libc::pid_t,
    pidfd: Option<AsyncFd<OwnedFd>>,
    /// The exit, once observed.
    status: Option<ExitStatus>,
    /// The largest resident set of the process (or of a child it waited for), in KiB,
    /// read with the exit.
    peak_rss_kib: Option<u64>,
    /// Whether the exited process was reaped (its pid free for reuse).
    reaped: bool,
    /// The tool's stdin.
    pub stdin: Option<pipe::Sender>,
    /// The tool's stdout.
    pub stdout: Option<pipe::Receiver>,
    /// The tool's stderr (`None` when it shares stdout's pipe or a terminal).
    pub stderr: Option<pipe::Receiver>,
}

impl SandboxChild {
    pub(super) fn new(
        pid: libc::pid_t,
        pidfd: OwnedFd,
        stdin: Option<OwnedFd>,
        stdout: Option<OwnedFd>,
        stderr: Option<OwnedFd>,
    ) -> io::Result<Self> {
        // Owned from here: dropping on an error below kills and reaps the process.
        let mut child = Self {
            pid,
            pidfd: None,
            status: None,
            peak_rss_kib: None,
            reaped: false,
            stdin: None,
            stdout: None,
            stderr: None,
        };
        // SAFETY: an OwnedFd stays open and names the same pidfd until it is dropped with
        // the AsyncFd.
        let registered =
            unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) };
        child.pidfd = Some(registered.map_err(|e| e.into_parts().1)?);
        child.stdin = stdin.map(pipe::Sender::from_owned_fd).transpose()?;
        child.stdout = stdout.map(pipe::Receiver::from_owned_fd).transpose()?;
        child.stderr = stderr.map(pipe::Receiver::from_owned_fd).transpose()?;
        Ok(child)
    }

    /// The process id while the process is not reaped: while it is `Some`, no other
    /// process can have this id (or a process group by it).
    pub fn id(&self) -> Option<u32> {
        if self.reaped {
            return None;
        }
        u32::try_from(self.pid).ok()
    }

    /// Sends SIGKILL (through the pidfd: never to a process that reused the pid).
    pub fn start_kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        let Some(pidfd) = &self.pidfd else {
            return Ok(());
        };
        send_kill(pidfd.get_ref())
    }

    /// The largest resident set the process had (or a child of it that it waited for), in
    /// bytes, once its exit was observed: how a crash under the memory rlimits is told
    /// from any other crash ([`crate::exit_cause`]).
    pub fn peak_rss_bytes(&self) -> Option<u64> {
        self.peak_rss_kib.map(|k| k.saturating_mul(1024))
    }

    /// The exit status if the process has ended, without waiting and without reaping it.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let id = libc::id_t::try_from(self.pid)
            .map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
        // SAFETY: all zeroes is a valid siginfo_t.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: all zeroes is a valid rusage.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // The system call rather than libc's wrapper, which has no rusage argument: with
        // WNOWAIT the kernel still fills it for the exited child (its own and its waited-for
        // children's peak resident set).
        // SAFETY: waitid fills `info` and `usage` for our own child and leaves it waitable
        // (WNOWAIT).
        let r = unsafe {
            libc::syscall(
                libc::SYS_waitid,
                libc::P_PID,
                id,
                &mut info as *mut libc::siginfo_t,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                &mut usage as *mut libc::rusage,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: waitid filled `info` for a child state change (si_pid 0: none yet).
        let (pid, code, value) = unsafe { (info.si_pid(), info.si_code, info.si_status()) };
        if pid == 0 {
            return Ok(None);
        }
        let raw = match code {
            libc::CLD_EXITED => (value & 0xff) << 8,
            libc::CLD_DUMPED => value | 0x80,
            _ => value,
        };
        let status = ExitStatus::from_raw(raw);
        self.status = Some(status);
        self.peak_rss_kib = u64::try_from(usage.ru_maxrss).ok();
        Ok(Some(status))
    }

    /// Reaps the process once its exit was observed ([`SandboxChild::wait`],
    /// [`SandboxChild::try_wait`]); its pid is free for reuse after this. Does nothing
    /// before that.
    pub fn reap(&mut self) {
        if self.reaped || self.status.is_none() {
            return;
        }
        let mut raw = 0;
        // SAFETY: our own child, exited (observed above), which nothing else reaps: the
        // wait returns at once.
        unsafe { libc::waitpid(self.pid, &mut raw, 0) };
        self.reaped = true;
    }

    /// Waits for the process to end (without reaping it: [`SandboxChild::reap`]).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            let Some(pidfd) = &self.pidfd else {
                return Err(io::Error::other("the process has no pidfd"));
            };
            let mut ready = pidfd.readable().await?;
            ready.clear_ready();
        }
    }
}

fn send_kill(pidfd: &OwnedFd) -> io::Result<()> {
    // SAFETY: pidfd_send_signal on a pidfd we own, with no siginfo.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        )
    };
    match r {
        0 => Ok(()),
        // Exited already (a zombie still accepts signals; ESRCH means it is gone).
        _ if io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

impl Drop for SandboxChild {
    /// Kills a process that was not waited for and reaps it: on the runtime when there is
    /// one (when the pidfd turns readable), else on a thread of its own.
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.start_kill();
            let _ = self.try_wait();
        }
        if self.status.is_some() {
            self.reap();
            return;
        }
        let pid = self.pid;
        let pidfd = self.pidfd.take();
        let reap = move || {
            let mut raw = 0;
            // SAFETY: a blocking wait for our own child, which nothing else reaps.
            unsafe { libc::waitpid(pid, &mut raw, 0) };
        };
        match (tokio::runtime::Handle::try_current(), pidfd) {
            (Ok(runtime), Some(pidfd)) => {
                runtime.spawn(async move {
                    let _ = pidfd.readable().await;
                    reap();
                });
            }
            _ => {
                let _ = std::thread::Builder::new()
                    .name("skillbox-reap".into())
                    .spawn(reap);
            }
        }
    }
}
