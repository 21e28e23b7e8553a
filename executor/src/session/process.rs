//! One session's process: started through the same sandbox as a call
//! ([`Sandbox::prepare`], then the spawner), its stdout and stderr on one pipe or on a
//! pseudo-terminal whose master the executor reads; and the task that reads its output,
//! waits for its end, ends it on close, idle timeout or lifetime, and then kills every
//! process of the session's user and releases its user id and scratch dir.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::time::Instant;

use super::output::Kept;
use crate::sandbox::{CallGuard, SandboxChild};

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndReason {
    /// Its command exited (or a signal ended it).
    Exited,
    /// `session.close`, or the executor stopping.
    Closed,
    /// Nobody wrote to it or polled it for `idle_timeout_ms`.
    Idle(u64),
    /// It ran for `lifetime_ms`.
    Lifetime(u64),
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndReason::Exited => f.write_str("its command exited"),
            EndReason::Closed => f.write_str("it was closed"),
            EndReason::Idle(ms) => write!(
                f,
                "nobody wrote to it or polled it for {ms} ms (idle_timeout_ms)"
            ),
            EndReason::Lifetime(ms) => {
                write!(f, "it ran for its lifetime of {ms} ms (lifetime_ms)")
            }
        }
    }
}

/// How a session ended.
#[derive(Debug, Clone)]
pub struct Ended {
    /// The exit code (128 + signal for a signal).
    pub exit_code: i32,
    /// Why.
    pub why: EndReason,
}

/// What the answers and the task share.
#[derive(Debug)]
pub struct Shared {
    /// Output since the last answer.
    pub out: Mutex<Kept>,
    /// Set once the process ended and everything of it was killed.
    pub ended: Mutex<Option<Ended>>,
    /// Woken on new output and on the end.
    pub changed: tokio::sync::Notify,
    /// Asks the task to end the session.
    pub kill: tokio::sync::Notify,
    /// Last write or poll.
    pub touched: Mutex<Instant>,
}

impl Shared {
    /// New state for a session that keeps `kept` bytes of output.
    pub fn new(kept: u64) -> Self {
        Self {
            out: Mutex::new(Kept::new(kept)),
            ended: Mutex::new(None),
            changed: tokio::sync::Notify::new(),
            kill: tokio::sync::Notify::new(),
            touched: Mutex::new(Instant::now()),
        }
    }

    /// How it ended, once it did.
    pub fn ended(&self) -> Option<Ended> {
        self.ended.lock().ok().and_then(|e| e.clone())
    }

    /// Records a write or poll (the idle clock starts over).
    pub fn touch(&self) {
        if let Ok(mut t) = self.touched.lock() {
            *t = Instant::now();
        }
    }
}

/// Where input goes: the stdin pipe, or the terminal's master.
#[derive(Debug)]
pub enum Input {
    /// A pipe (closed once the process ended).
    Pipe(tokio::sync::Mutex<Option<pipe::Sender>>),
    /// The terminal.
    Terminal(Arc<AsyncFd<OwnedFd>>),
}

impl Input {
    /// Writes `bytes`, waiting at most `limit` for room.
    pub async fn write(&self, bytes: &[u8], limit: Duration) -> std::io::Result<()> {
        let work = async {
            match self {
                Input::Pipe(pipe) => match pipe.lock().await.as_mut() {
                    Some(p) => p.write_all(bytes).await,
                    None => Err(std::io::ErrorKind::BrokenPipe.into()),
                },
                Input::Terminal(fd) => {
                    let mut rest = bytes;
                    while !rest.is_empty() {
                        let mut ready = fd.writable().await?;
                        match ready.try_io(|f| {
                            nix::unistd::write(f.get_ref(), rest).map_err(std::io::Error::from)
                        }) {
                            Ok(Ok(n)) => rest = &rest[n..],
                            Ok(Err(e)) => return Err(e),
                            Err(_would_block) => continue,
                        }
                    }
                    Ok(())
                }
            }
        };
        tokio::time::timeout(limit, work)
            .await
            .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
    }
}

/// A pseudo-terminal: the master (non-blocking, for the executor) and the slave (for the
/// child), both close-on-exec in the executor.
pub fn open_terminal() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let size = nix::pty::Winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(&size, None).map_err(std::io::Error::from)?;
    for fd in [&pty.master, &pty.slave] {
        // SAFETY: fcntl on a descriptor owned here, setting FD_CLOEXEC.
        let r = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // SAFETY: fcntl on the master owned here: non-blocking for the reactor.
    let r = unsafe { libc::fcntl(pty.master.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((pty.master, pty.slave))
}

/// Where output comes from.
pub enum Output {
    /// The merged stdout+stderr pipe.
    Pipe(pipe::Receiver),
    /// The terminal's master.
    Terminal(Arc<AsyncFd<OwnedFd>>),
}

impl Output {
    /// A second descriptor of the output's read side, for [`pending_bytes`] (it keeps
    /// nothing open that the end of the output depends on: only writers do).
    pub fn watcher(&self) -> Option<OwnedFd> {
        use std::os::fd::AsFd;
        match self {
            Output::Pipe(p) => p.as_fd().try_clone_to_owned().ok(),
            Output::Terminal(fd) => fd.get_ref().try_clone().ok(),
        }
    }

    /// Reads some output; 0 at its end (a terminal whose every slave closed reads EIO).
    async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Output::Pipe(p) => AsyncReadExt::read(p, buf).await,
            Output::Terminal(fd) => loop {
                let mut ready = fd.readable().await?;
                match ready
                    .try_io(|f| nix::unistd::read(f.get_ref(), buf).map_err(std::io::Error::from))
                {
                    Ok(Ok(n)) => return Ok(n),
                    Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Ok(0),
                    Ok(Err(e)) => return Err(e),
                    Err(_would_block) => continue,
                }
            },
        }
    }
}

/// Bytes written to the output and not read yet (`FIONREAD` on `watcher`); `None` when
/// the kernel does not say.
pub fn pending_bytes(watcher: &OwnedFd) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int into the live local.
    let r = unsafe { libc::ioctl(watcher.as_raw_fd(), libc::FIONREAD, &mut n) };
    (r == 0).then(|| usize::try_from(n).unwrap_or(0))
}

/// How long output is still read after the command exited (a process it left running
/// may hold the pipe open; it dies with the session).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(100);

/// What a session's end does with its scratch dir once every process of its user is gone,
/// before the dir is removed (the work folder kept for the context's next call).
pub type Keep = Box<dyn FnOnce(&std::path::Path) + Send + 'static>;

/// The session's task: reads output, waits for the end (exit, kill, idle, lifetime), then
/// kills everything and, unless closed, calls `finish` (the final sync, which may answer
/// a [`Keep`]) before marking the session ended. Releases the user id and scratch dir
/// last. When the kernel killed a process of the session for passing its memory limit,
/// `oom_note` ends the output.
#[allow(clippy::too_many_arguments)]
pub async fn run<F, Fut>(
    mut child: SandboxChild,
    guard: CallGuard,
    mut output: Output,
    shared: Arc<Shared>,
    idle: Duration,
    lifetime: Duration,
    oom_note: String,
    finish: F,
) where
    F: FnOnce(EndReason) -> Fut,
    Fut: std::future::Future<Output = Option<Keep>>,
{
    let started = Instant::now();
    let mut buf = vec![0u8; 16 * 1024];
    let mut eof = false;
    let mut exited: Option<Instant> = None;
    let why = loop {
        let touched = shared.touched.lock().map(|t| *t).unwrap_or(started);
        let idle_at = touched + idle;
        let drain_until = exited.map(|at| at + DRAIN_AFTER_EXIT);
        if exited.is_some() && eof {
            break EndReason::Exited;
        }
        tokio::select! {
            n = output.read(&mut buf), if !eof => match n {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => {
                    if let Ok(mut out) = shared.out.lock() {
                        out.push(&buf[..n]);
                    }
                    shared.changed.notify_waiters();
                }
            },
            _ = child.wait(), if exited.is_none() => exited = Some(Instant::now()),
            _ = tokio::time::sleep_until(drain_until.unwrap_or(started)), if drain_until.is_some() => {
                break EndReason::Exited;
            }
            _ = shared.kill.notified() => break EndReason::Closed,
            _ = tokio::time::sleep_until(idle_at), if exited.is_none() => {
                let again = shared.touched.lock().map(|t| *t).unwrap_or(started);
                if again + idle <= Instant::now() {
                    break EndReason::Idle(millis(idle));
                }
            }
            _ = tokio::time::sleep_until(started + lifetime), if exited.is_none() => {
                break EndReason::Lifetime(millis(lifetime));
            }
        }
    };
    let _ = child.start_kill();
    guard.kill_now(child.id());
    let status = child.wait().await.ok();
    child.reap();
    drop(output);
    let exit_code = status.map_or(-1, |s| {
        use std::os::unix::process::ExitStatusExt;
        s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
    });
    if guard.oom_killed() {
        if let Ok(mut out) = shared.out.lock() {
            out.push(oom_note.as_bytes());
        }
    }
    let keep = match why {
        EndReason::Closed => None,
        _ => finish(why.clone()).await,
    };
    match keep {
        Some(keep) => guard.release_then(keep),
        None => guard.release(),
    }
    if let Ok(mut ended) = shared.ended.lock() {
        *ended = Some(Ended { exit_code, why });
    }
    shared.changed.notify_waiters();
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
