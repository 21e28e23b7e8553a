//! The end of a call ([`CallGuard`]) and how long the steps of preparing and ending it
//! took (the spawn bench reports them).

use std::path::Path;
use std::time::{Duration, Instant};

use super::memcg::CallCgroup;
use super::reaper::{self, CallUser, Releaser};
use super::scratch::Scratch;

/// How long the steps of one [`Sandbox::prepare`] took (the spawn bench reports them).
#[derive(Debug, Clone, Copy, Default)]
pub struct PrepareTimings {
    /// Claiming a user id (lock file; killing leftovers of a crashed holder).
    pub user: Duration,
    /// Making the scratch dir.
    pub scratch: Duration,
    /// Writing the arguments file.
    pub args_file: Duration,
    /// Building the Landlock ruleset.
    pub landlock: Duration,
    /// Building the command and the child setup.
    pub command: Duration,
}

/// How long the in-line part of [`CallGuard::finish`] took.
#[derive(Debug, Clone, Copy, Default)]
pub struct FinishTimings {
    /// Killing the tool's process group.
    pub kill: Duration,
    /// Handing the user id and scratch dir to the releaser.
    pub hand_off: Duration,
}

/// The resources of a call in flight. [`CallGuard::finish`] (or drop) kills every process
/// the call started, then removes its scratch dir.
#[derive(Debug)]
pub struct CallGuard {
    pub(super) user: Option<CallUser>,
    pub(super) scratch: Scratch,
    /// The call's memory cgroup, where it has one.
    pub(super) cgroup: Option<CallCgroup>,
}

impl CallGuard {
    /// Ends the call: [`CallGuard::kill_now`], then [`CallGuard::release`]. Use the two
    /// steps, with the tool reaped between them, where the caller can wait for it: the
    /// release then finds no process left and skips the kill helper.
    pub fn finish(self, pid: Option<u32>) -> FinishTimings {
        let start = Instant::now();
        self.kill_now(pid);
        let killed = Instant::now();
        self.release();
        FinishTimings {
            kill: killed - start,
            hand_off: killed.elapsed(),
        }
    }

    /// Kills at once what can be reached from the tool's pid `pid`, which must not be
    /// reaped yet (the id cannot have been reused): its process group, or without a call
    /// user its whole tree found through parent ids (a reaped tool's children are no
    /// longer linked to it).
    pub fn kill_now(&self, pid: Option<u32>) {
        match (&self.user, pid) {
            // The call's own user: its release kills everything of that user.
            (Some(_), Some(pid)) => reaper::kill_group(pid),
            (None, Some(pid)) => reaper::kill_tree(pid),
            _ => {}
        }
    }

    /// Hands the rest of the call's end to the [`Releaser`] thread, off the call's
    /// critical path: kill every process left under the call's user (nothing is started
    /// when none is left), unlock the user id, remove the scratch dir.
    pub fn release(self) {
        self.release_then(|_| {});
    }

    /// [`CallGuard::release`], running `before_removal` with the scratch dir once no
    /// process of the call's user is left (and its cgroup is gone), before the dir is
    /// removed: what it moves out of the dir is out of every reach of the call.
    pub fn release_then(self, before_removal: impl FnOnce(&Path) + Send + 'static) {
        let CallGuard {
            mut user,
            scratch,
            cgroup,
        } = self;
        Releaser::global().release(move || {
            if let Some(user) = &mut user {
                user.kill();
            }
            if let Some(cgroup) = cgroup {
                cgroup.remove();
            }
            before_removal(scratch.path());
            // The id goes back to the pool only now: no other call runs as it while
            // `before_removal` moves the folder out.
            drop(user);
            drop(scratch);
        });
    }

    /// Whether the kernel killed a process of the call for passing its memory limit
    /// (the call's memory cgroup counted an OOM kill); false without a cgroup.
    pub fn oom_killed(&self) -> bool {
        self.cgroup.as_ref().is_some_and(CallCgroup::oom_killed)
    }

    /// The call's scratch dir.
    pub fn scratch(&self) -> &Path {
        self.scratch.path()
    }

    /// The call's user id, when the executor switches users.
    pub fn uid(&self) -> Option<u32> {
        self.user.as_ref().map(|u| u.uid)
    }
}
