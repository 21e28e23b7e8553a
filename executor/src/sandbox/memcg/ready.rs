//! Call cgroups made ahead of the calls that take them, and kept for another call when
//! their call left nothing in them. Making a cgroup and removing it are the costly part of
//! a call's memory limit (in a v1 `memory` hierarchy here a `mkdir` takes 0.15–0.25 ms,
//! its two limit writes 0.1 ms more, an `rmdir` 0.05–0.1 ms: docs/hot-path.md), so:
//!
//! - when a call ends, the releaser thread keeps its cgroup for a later call if no
//!   process is left in it (a zombie not yet reaped counts) and at most
//!   [`MAX_LEFT_CHARGE`] is still charged to it. Memory a call leaves charged outlives
//!   it only in files: the page cache of what it read or wrote (reclaimed first when the
//!   next call nears its limit), and on a tmpfs the pages of files kept after the call (a
//!   context's folder on the shelf), which without swap cannot be reclaimed and would
//!   count against the next call's limit. A cgroup holding more than that is removed, as
//!   every call's was before; its charges go to the executor's subtree;
//! - the cgroup's OOM-kill count is read when it is kept, and a later call's OOM kill is
//!   one past that ([`CallCgroup::oom_killed`]);
//! - when none is kept, the releaser makes one ahead with the last limit asked for, and a
//!   call rewrites the limit only when it asks for another.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{make_dir, write, write_if_present, CallCgroup, MemcgError, Version};

/// Cgroups made ahead when none is kept: enough for a call and the one right after it; a
/// burst past that makes its cgroups on its own path.
const READY: usize = 2;

/// Most cgroups kept between calls (each is a few pages of the kernel's).
const MAX_KEPT: usize = 32;

/// Most bytes still charged to a cgroup its call has left for it to be kept.
pub(super) const MAX_LEFT_CHARGE: u64 = 2 * 1024 * 1024;

/// Makes the calls' cgroups in the executor's subtree, and keeps a few made ahead.
#[derive(Debug)]
pub(super) struct Maker {
    pub(super) version: Version,
    /// `calls-<pidns>-<pid>` (v2) or `skillbox-<pidns>-<pid>` (v1) in the executor's
    /// cgroup.
    pub(super) base: PathBuf,
    next: AtomicU64,
    ready: Mutex<Ready>,
}

#[derive(Debug, Default)]
struct Ready {
    made: Vec<CallCgroup>,
    /// The limit the last call asked for: the one the next is likely to ask for too.
    last_mb: Option<u64>,
    /// The executor's subtree is going: nothing more is made.
    closed: bool,
}

impl Maker {
    pub(super) fn new(version: Version, base: PathBuf) -> Arc<Self> {
        Arc::new(Self {
            version,
            base,
            next: AtomicU64::new(0),
            ready: Mutex::default(),
        })
    }

    /// A cgroup limited to `memory_mb` MiB for a call: one kept or made ahead (its limit
    /// rewritten when it differs), else a new one.
    pub(super) fn take(self: &Arc<Self>, memory_mb: u64) -> Result<CallCgroup, MemcgError> {
        let kept = self.ready.lock().ok().and_then(|mut ready| {
            ready.last_mb = Some(memory_mb);
            ready.made.pop()
        });
        let mut cgroup = match kept {
            Some(mut kept) => match kept.set_limit(memory_mb) {
                Ok(()) => kept,
                // Dropping it removes it; a new one is made as if none was kept.
                Err(_) => self.make(memory_mb)?,
            },
            None => self.make(memory_mb)?,
        };
        cgroup.maker = Some(Arc::clone(self));
        Ok(cgroup)
    }

    /// Takes `cgroup` back from the call that ended: kept for a later call when nothing of
    /// the call is left in it, else removed (what is left killed first); then tops up.
    pub(super) fn give_back(&self, mut cgroup: CallCgroup) {
        if cgroup.empty_enough() {
            if let Ok(mut ready) = self.ready.lock() {
                if !ready.closed && ready.made.len() < MAX_KEPT {
                    ready.made.push(cgroup);
                    return;
                }
            }
        }
        drop(cgroup);
        self.top_up();
    }

    /// Makes cgroups ahead until [`READY`] wait, with the last limit a call asked for (on
    /// the releaser thread, after a call's cgroup is removed). A failure only means the
    /// next call makes its own, and says why then.
    pub(super) fn top_up(&self) {
        loop {
            let last_mb = match self.ready.lock() {
                Ok(ready) if !ready.closed && ready.made.len() < READY => ready.last_mb,
                _ => return,
            };
            let Some(memory_mb) = last_mb else { return };
            let Ok(made) = self.make(memory_mb) else {
                return;
            };
            let Ok(mut ready) = self.ready.lock() else {
                return;
            };
            if ready.closed || ready.made.len() >= READY {
                return;
            }
            ready.made.push(made);
        }
    }

    /// Removes the cgroups made ahead, and makes none after.
    pub(super) fn close(&self) {
        let made = match self.ready.lock() {
            Ok(mut ready) => {
                ready.closed = true;
                std::mem::take(&mut ready.made)
            }
            Err(_) => return,
        };
        drop(made);
    }

    /// A new cgroup limited to `memory_mb` MiB with no swap, its `cgroup.procs` open.
    fn make(&self, memory_mb: u64) -> Result<CallCgroup, MemcgError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let dir = self.base.join(format!("call-{n}"));
        make_dir(&dir)?;
        // Removed again when a step below fails (dropped).
        let mut cgroup = CallCgroup {
            procs: None,
            version: self.version,
            dir,
            limit_mb: 0,
            oom_base: 0,
            maker: None,
        };
        let bytes = mib(memory_mb);
        match self.version {
            Version::V2 => {
                write(&cgroup.dir.join("memory.max"), &bytes)?;
                // Absent where swap is not accounted (no swap to use, then).
                write_if_present(&cgroup.dir.join("memory.swap.max"), "0")?;
            }
            Version::V1 => {
                write(&cgroup.dir.join("memory.limit_in_bytes"), &bytes)?;
                write_if_present(&cgroup.dir.join("memory.memsw.limit_in_bytes"), &bytes)?;
            }
        }
        cgroup.limit_mb = memory_mb;
        let path = cgroup.dir.join("cgroup.procs");
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|source| MemcgError::Open { path, source })?;
        cgroup.procs = Some(OwnedFd::from(procs));
        Ok(cgroup)
    }
}

impl CallCgroup {
    /// Whether its call left no process in it and at most [`MAX_LEFT_CHARGE`] charged;
    /// then it is made ready for another call: its OOM-kill count read and its
    /// `cgroup.procs` opened again (the call's child took the last descriptor).
    fn empty_enough(&mut self) -> bool {
        let members = std::fs::read_to_string(self.dir.join("cgroup.procs"));
        if !members.is_ok_and(|m| m.trim().is_empty()) {
            return false;
        }
        let usage = match self.version {
            Version::V2 => "memory.current",
            Version::V1 => "memory.usage_in_bytes",
        };
        let charged = std::fs::read_to_string(self.dir.join(usage))
            .ok()
            .and_then(|u| u.trim().parse::<u64>().ok());
        if charged.is_none_or(|c| c > MAX_LEFT_CHARGE) {
            return false;
        }
        let Ok(procs) = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.procs"))
        else {
            return false;
        };
        self.procs = Some(OwnedFd::from(procs));
        self.oom_base = self.oom_count();
        true
    }

    /// Rewrites the limit of a kept cgroup (no process in it) to `memory_mb`. In v1
    /// the memory+swap limit may never be below the memory limit, so the one that moves
    /// away from the other is written second.
    fn set_limit(&mut self, memory_mb: u64) -> Result<(), MemcgError> {
        if memory_mb == self.limit_mb {
            return Ok(());
        }
        let bytes = mib(memory_mb);
        match self.version {
            Version::V2 => write(&self.dir.join("memory.max"), &bytes)?,
            Version::V1 => {
                let memory = self.dir.join("memory.limit_in_bytes");
                let both = self.dir.join("memory.memsw.limit_in_bytes");
                if memory_mb > self.limit_mb {
                    write_if_present(&both, &bytes)?;
                    write(&memory, &bytes)?;
                } else {
                    write(&memory, &bytes)?;
                    write_if_present(&both, &bytes)?;
                }
            }
        }
        self.limit_mb = memory_mb;
        Ok(())
    }
}

fn mib(memory_mb: u64) -> String {
    memory_mb.saturating_mul(1024 * 1024).to_string()
}
