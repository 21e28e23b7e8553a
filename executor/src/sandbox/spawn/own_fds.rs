//! The descriptors a child needs, gathered in the executor's numbering before the clone
//! (the spawn then puts them on its thread's kept numbers, `child_fds`).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::child_fds;
use crate::sandbox::child::ChildSetup;

/// The descriptors the child needs, as numbered in the executor's table, gathered before
/// the clone.
pub(super) struct OwnFds {
    /// In order: stdio, then the ruleset, the namespaces and the cgroup when it has them.
    pub(super) fds: [RawFd; child_fds::SLOTS],
    /// How many of `fds` are in use.
    pub(super) needed: usize,
    /// The index of the Landlock ruleset in `fds`.
    pub(super) ruleset_at: Option<usize>,
    /// The index of the network namespace in `fds`.
    pub(super) netns_at: Option<usize>,
    /// The index of the mount namespace in `fds`.
    pub(super) mntns_at: Option<usize>,
    /// The index of the memory cgroup's `cgroup.procs` in `fds`.
    pub(super) cgroup_at: Option<usize>,
}

impl OwnFds {
    /// The descriptors of `setup` and the child's stdio ends (`child_ends`: three, two
    /// with stdout and stderr on the same pipe, or one terminal on all three).
    pub(super) fn of(setup: &ChildSetup, child_ends: &[OwnedFd]) -> Self {
        let end = |i: usize| child_ends[i.min(child_ends.len() - 1)].as_raw_fd();
        let ruleset = setup.landlock.as_ref().map(|l| l.as_raw_fd());
        let netns = setup.netns.as_ref().map(|n| n.as_raw_fd());
        let mntns = setup.mntns.as_ref().map(|n| n.as_raw_fd());
        let cgroup = setup.cgroup.as_ref().map(|c| c.as_raw_fd());
        // The child's descriptors in order: stdio, then the ruleset, the namespace and
        // the cgroup when it has them (`ruleset_at`, `netns_at`, `cgroup_at`: indices).
        let mut fds = [end(0), end(1), end(2), -1, -1, -1, -1];
        let mut needed = 3;
        let mut add = |fd: Option<RawFd>| {
            fd.map(|fd| {
                fds[needed] = fd;
                needed += 1;
                needed - 1
            })
        };
        let ruleset_at = add(ruleset);
        let netns_at = add(netns);
        let mntns_at = add(mntns);
        let cgroup_at = add(cgroup);
        Self {
            fds,
            needed,
            ruleset_at,
            netns_at,
            mntns_at,
            cgroup_at,
        }
    }

    /// The descriptors in use.
    pub(super) fn all(&self) -> &[RawFd] {
        &self.fds[..self.needed]
    }
}
