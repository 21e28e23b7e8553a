//! Whether a session is waiting: every process of it asleep (blocked reading its terminal
//! or stdin, or otherwise waiting), none running. An answer after a write goes as soon as
//! the output stopped and the session waits, instead of after a fixed quiet gap: an
//! interactive reply costs one round trip (issue: `write_stdin` echo at 4 ms, 2 of them
//! the gap). The gap stays the bound for a session that keeps running.
//!
//! The processes are the session's first process and its descendants, found through
//! `/proc/<pid>/task/<tid>/children` (no scan of `/proc`); each one's state is the letter
//! after the command name in `/proc/<pid>/stat`, which every user may read (no
//! `CAP_SYS_PTRACE`, unlike `/proc/<pid>/syscall` or `wchan`). A process that left the
//! tree (a daemon re-parented to init) is not waited for.

use std::path::PathBuf;

/// Most processes looked at: a session with more is taken as not waiting.
const MAX_PROCESSES: usize = 256;

/// Whether every process of the tree under `leader` sleeps (`S`, or stopped `T`/`t`); false
/// when one runs or waits on the disk (`R`, `D`), when the tree cannot be read, or when it
/// is larger than [`MAX_PROCESSES`].
pub fn all_waiting(leader: u32) -> bool {
    let mut pending = vec![leader];
    let mut seen = 0;
    while let Some(pid) = pending.pop() {
        seen += 1;
        if seen > MAX_PROCESSES {
            return false;
        }
        match state(pid) {
            Some('S' | 'T' | 't' | 'I') => {}
            // Gone between the listing and the read: nothing of it to wait for.
            Some('Z' | 'X') | None if pid != leader => continue,
            _ => return false,
        }
        if !children(pid, &mut pending) {
            return false;
        }
    }
    true
}

/// The state letter of `pid`.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) S ...`: comm may hold spaces and parentheses; the state follows the last.
    stat.rsplit_once(") ")?.1.chars().next()
}

/// Adds the children of every thread of `pid` to `out`; false when they cannot be read.
fn children(pid: u32, out: &mut Vec<u32>) -> bool {
    let tasks = PathBuf::from(format!("/proc/{pid}/task"));
    let Ok(entries) = std::fs::read_dir(&tasks) else {
        // Gone: no children left.
        return true;
    };
    for task in entries.flatten() {
        let Ok(list) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        out.extend(
            list.split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
    }
    true
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    /// Polls `all_waiting` for up to 5 s until it says `want`.
    fn settles_to(pid: u32, want: bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if all_waiting(pid) == want {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn a_shell_reading_its_input_waits_and_a_busy_child_does_not() {
        let mut sh = Command::new("sh")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pid = sh.id();
        assert!(settles_to(pid, true), "sh blocked reading stdin is waiting");
        let stdin = sh.stdin.as_mut().unwrap();
        // A child of the shell that keeps running: the session is not waiting.
        stdin.write_all(b"while :; do :; done &\n").unwrap();
        stdin.flush().unwrap();
        assert!(settles_to(pid, false), "a running child is not waiting");
        let _ = Command::new("pkill")
            .args(["-P", &pid.to_string()])
            .status();
        let _ = sh.kill();
        let _ = sh.wait();
    }

    #[test]
    fn a_process_that_is_gone_is_not_waiting() {
        assert!(!all_waiting(u32::MAX - 1));
    }
}
