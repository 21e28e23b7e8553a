//! Running one `git` command as a child: its stdout read whole, the tail of its stderr
//! kept for the error, killed with its whole process group past its time limit.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::super::SourceError;

/// Kills a git command and every process of its group (its transport helpers).
pub(super) fn stop(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.kill();
}

/// A pipe asked for at spawn.
pub(super) fn piped<T>(pipe: Option<T>) -> Result<T, SourceError> {
    pipe.ok_or_else(|| SourceError::Git {
        step: "spawn",
        message: "a pipe to git was not opened".into(),
    })
}

/// Bytes under `dir` (the objects a fetch is writing).
pub(super) fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

pub(super) fn spawn_error(e: std::io::Error) -> SourceError {
    if e.kind() == std::io::ErrorKind::NotFound {
        SourceError::NoGit
    } else {
        git_io("spawn", e)
    }
}

pub(super) fn git_io(step: &'static str, e: std::io::Error) -> SourceError {
    SourceError::Git {
        step,
        message: e.to_string(),
    }
}

/// Runs `git ARGS` in the command's repo and returns its stdout.
pub(super) fn run_out(mut cmd: Command, args: &[&'static str]) -> Result<String, SourceError> {
    cmd.args(args);
    run(
        cmd,
        args.first().copied().unwrap_or("git"),
        Duration::from_secs(120),
    )
}

/// Runs a git command to completion (killed after `timeout`), returning stdout.
pub(super) fn run(
    mut cmd: Command,
    step: &'static str,
    timeout: Duration,
) -> Result<String, SourceError> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(spawn_error)?;
    let mut stdout = piped(child.stdout.take())?;
    let mut stderr = piped(child.stderr.take())?;
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = String::new();
        let _ = stderr.by_ref().take(64 * 1024).read_to_string(&mut v);
        v
    });
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| git_io(step, e))? {
            break s;
        }
        if started.elapsed() > timeout {
            stop(&mut child);
            let _ = child.wait();
            return Err(SourceError::Timeout {
                secs: timeout.as_secs(),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if !status.success() {
        return Err(SourceError::Git {
            step,
            message: last_lines(&stderr),
        });
    }
    String::from_utf8(stdout).map_err(|_| SourceError::Git {
        step,
        message: "output is not UTF-8 (a path in the repository is not UTF-8)".into(),
    })
}

/// The last lines of git's stderr, for an error message.
pub(super) fn last_lines(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = &lines[lines.len().saturating_sub(3)..];
    if tail.is_empty() {
        "git failed without a message".into()
    } else {
        tail.join("; ")
    }
}
