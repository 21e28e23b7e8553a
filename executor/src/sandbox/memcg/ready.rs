//! Call cgroups made ahead of the calls that take them. Making a cgroup is the costly part
//! of a call's memory limit (a `mkdir` in a v1 `memory` hierarchy takes 0.15–0.25 ms
//! here, its two limit writes 0.1 ms more: docs/hot-path.md), so the releaser thread,
//! after it removed a call's cgroup, makes a fresh one with the last limit written, and the
//! next call only takes it. A cgroup is never used twice: what a call charged to its
//! cgroup (page cache) and its OOM-kill count go with it.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{make_dir, write, write_if_present, CallCgroup, MemcgError, Version};

/// Cgroups kept made ahead: enough for a call and the one right after it; a burst past
/// that makes its cgroups on its own path, as before.
const READY: usize = 2;

/// Makes the calls' cgroups in the executor's subtree, and keeps a few made ahead.
#[derive(Debug)]
pub(super) struct Maker {
    pub(super) version: Version,
    /// `calls-<pid>` (v2) or `skillbox-<pid>` (v1) in the executor's cgroup.
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

    /// A cgroup limited to `memory_mb` MiB for a call: one made ahead (its limit
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
    /// Rewrites the limit of a cgroup made ahead (no process in it) to `memory_mb`. In v1
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
