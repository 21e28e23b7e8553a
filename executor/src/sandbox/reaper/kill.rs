//! Killing by user id, as root: every process of a call's user ([`kill_user`], through a
//! helper that becomes that user, `kill_helper.rs`), the check whether any is left,
//! and the startup sweep's slower kill-until-gone over `/proc`. Also the group kill
//! ([`kill_group`]) for a tool that leads its own process group.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::kill_helper::kill_as;

/// Most kill passes of the startup sweep before giving up on a user whose processes keep
/// reappearing.
const MAX_SWEEP_PASSES: usize = 64;

/// Kills every process running as `uid`: a helper process switches to that user and sends
/// SIGKILL to everything it may signal (`kill(-1)`), which reaches double-forked,
/// `setsid` processes too. One pass leaves no survivor: the kernel walks the whole process
/// list under the tasklist lock, which a fork needs to link its child, and a fork whose
/// parent has a signal pending by then is cancelled; so a child was either linked before
/// the walk and is killed by it, or is never born. (A second pass cost 15 µs of kernel
/// time per call, walking every process of the host again, and found nothing; the tests
/// of forks racing the kill, in `tests/suite/escape*.rs`, run against one pass.)
/// (`kill(-1)` reports success whenever any process exists, so its result proves nothing.)
///
/// Most calls leave nothing behind: when no process of `uid` exists ([`user_has_process`],
/// one system call that usually returns at once) no helper is started, which saves a
/// clone, a user switch, a walk of every host process and an exit per call.
pub fn kill_user(uid: u32) {
    if user_has_process(uid) {
        kill_as(uid);
    }
}

/// Whether any process (a zombie or a dying one too) has real user id `uid`.
///
/// `getpriority(PRIO_USER, uid)` fails with ESRCH exactly when no task of that real user
/// exists; the kernel answers at once when it holds no accounting record for the user and
/// walks the task list otherwise. A call's processes cannot change their user ids (no
/// capabilities, and `setresuid` without one only picks among the ids already held), so
/// "none of real user `uid`" means none of the call is left; and none can appear later,
/// since only a process of that user (there is none) or the executor could start one.
/// Any other answer, an error included, counts as "some": the kill then runs.
pub fn user_has_process(uid: u32) -> bool {
    // SAFETY: getpriority takes two integers and touches no memory of ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getpriority,
            libc::c_long::from(libc::PRIO_USER),
            libc::c_long::from(uid),
        )
    };
    !(r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH))
}

/// Kills every process of `uid` and checks `/proc` until none is left (startup sweep;
/// too slow for every call on a busy host).
pub fn kill_user_until_gone(uid: u32) {
    for pass in 0..MAX_SWEEP_PASSES {
        if !has_live_process(uid) {
            return;
        }
        kill_as(uid);
        if pass > 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    tracing::error!(
        uid,
        "processes of a call user survived {MAX_SWEEP_PASSES} kill passes"
    );
}

/// Whether a process that is not a zombie runs with real or effective user `uid`.
pub fn has_live_process(uid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit()))
        })
        .any(|e| {
            let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
                return false;
            };
            let mut zombie = false;
            let mut matches = false;
            for line in status.lines() {
                if let Some(state) = line.strip_prefix("State:") {
                    zombie =
                        state.trim_start().starts_with('Z') || state.trim_start().starts_with('X');
                } else if let Some(ids) = line.strip_prefix("Uid:") {
                    matches = ids
                        .split_whitespace()
                        .take(2)
                        .any(|id| id.parse::<u32>() == Ok(uid));
                }
            }
            matches && !zombie
        })
}

/// Kills the process group `pid` leads (the tool called `setsid` before exec, so its pid
/// is its group id): one system call, no `/proc` walk. The caller has not reaped `pid`
/// yet, so the id cannot have been reused (no pidfd needed).
pub fn kill_group(pid: u32) {
    let Ok(root) = i32::try_from(pid) else { return };
    if kill(Pid::from_raw(-root), Signal::SIGKILL).is_err() {
        // No such group (setsid is applied before exec, so only a failed spawn gets here).
        let _ = kill(Pid::from_raw(root), Signal::SIGKILL);
    }
}
