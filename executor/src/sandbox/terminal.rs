//! The controlling terminal: a tool never has one.
//!
//! A tool that shared the executor's controlling terminal (`skillbox up` run in a shell)
//! could read from it, write to it, or get its signals. `setsid` in the tool's process
//! would leave it too, but it also makes the kernel create a scheduler group
//! (an "autogroup") for the new session and free it after an RCU grace period when the
//! tool exits: about 1.5 % of the machine under 16 clients (docs/hot-path.md). So the
//! executor leaves its own terminal once, at start, and a tool then only needs a process
//! group of its own (`setpgid`), which the end of a call kills as one.

use std::sync::OnceLock;

/// Whether a tool must call `setsid` to be without a controlling terminal: true while this
/// process still has one. The first call detaches this process from its terminal when it
/// can: not as a session leader, whose leaving would hang up the terminal's foreground
/// processes.
pub fn tools_need_own_session() -> bool {
    static NEED: OnceLock<bool> = OnceLock::new();
    *NEED.get_or_init(|| {
        if has_controlling_terminal() == Some(false) {
            return false;
        }
        if !detach() {
            return true;
        }
        has_controlling_terminal() != Some(false)
    })
}

/// Whether this process has a controlling terminal (`tty_nr` in `/proc/self/stat`);
/// `None` when that cannot be read.
pub fn has_controlling_terminal() -> Option<bool> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    // After it: state, ppid, pgrp, session, tty_nr.
    let tty: i64 = stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(4)?
        .parse()
        .ok()?;
    Some(tty != 0)
}

/// Gives up this process's controlling terminal (`TIOCNOTTY`), unless it leads its
/// session. True when it did.
fn detach() -> bool {
    // SAFETY: getsid and getpid take and return integers.
    if unsafe { libc::getsid(0) == libc::getpid() } {
        return false;
    }
    // SAFETY: a static NUL-terminated path; the descriptor is closed below.
    let tty = unsafe {
        libc::open(
            c"/dev/tty".as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if tty < 0 {
        return false;
    }
    // SAFETY: TIOCNOTTY takes no argument; `tty` is open here and closed right after.
    let detached = unsafe { libc::ioctl(tty, libc::TIOCNOTTY) } == 0;
    // SAFETY: closes the descriptor opened above.
    unsafe { libc::close(tty) };
    detached
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run with a terminal (`script -qc 'cargo nextest run -p skillbox-executor terminal'`)
    /// this checks the detach; without one, that there was nothing to leave.
    #[test]
    fn after_the_check_this_process_has_no_terminal_unless_it_leads_its_session() {
        let need = tools_need_own_session();
        // SAFETY: getsid and getpid take and return integers.
        let leader = unsafe { libc::getsid(0) == libc::getpid() };
        if leader {
            assert_eq!(need, has_controlling_terminal() != Some(false));
        } else {
            assert_eq!(has_controlling_terminal(), Some(false));
            assert!(
                !need,
                "tools start sessions of their own without a terminal"
            );
        }
    }
}
