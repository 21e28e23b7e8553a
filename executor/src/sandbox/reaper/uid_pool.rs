//! The pool of per-call user ids: one id per call in flight, claimed with a `flock` on a
//! host-wide lock file so that executors on one host never share an id, killed clean when
//! taken and when given back.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use nix::fcntl::{openat, Flock, FlockArg, OFlag, AT_FDCWD};
use nix::sys::stat::Mode;

use super::kill::{kill_user, kill_user_until_gone};

/// Default first user id of the per-call pool for an executor in the host's PID namespace.
pub const DEFAULT_UID_BASE: u32 = 2_000_000;

/// Default first user id of the per-call pool for an executor in a PID namespace of its
/// own (a container). User ids are the kernel's, not the namespace's: an executor in the
/// host's PID namespace sees a container's processes and kills every process of an id
/// it takes, so an executor in a container must not use the host's ids. Executors in
/// PID namespaces of their own cannot see each other's processes, so sharing this range
/// among them costs nothing but a shared process limit per id.
pub const CONTAINED_UID_BASE: u32 = 3_000_000;

/// The first user id of the pool when none is configured: [`DEFAULT_UID_BASE`] in the
/// host's PID namespace, [`CONTAINED_UID_BASE`] in one of its own.
pub fn default_uid_base() -> u32 {
    match in_initial_pid_namespace() {
        true => DEFAULT_UID_BASE,
        false => CONTAINED_UID_BASE,
    }
}

/// Whether this process is in the host's (initial) PID namespace: only there are the
/// kernel's own threads seen, and pid 2 is one (`kthreadd`, `PF_KTHREAD` in its flags). In
/// a namespace of its own pid 2 is a process or a thread of pid 1 (`/proc/<tid>` answers
/// for threads too), never a kernel thread. An unreadable `/proc` counts as a namespace
/// of its own, which keeps clear of the host's ids.
pub fn in_initial_pid_namespace() -> bool {
    /// `PF_KTHREAD` of `include/linux/sched.h`.
    const PF_KTHREAD: u64 = 0x0020_0000;
    let Ok(stat) = std::fs::read_to_string("/proc/2/stat") else {
        return false;
    };
    // After the command's closing parenthesis: state, ppid, pgrp, session, tty, tpgid,
    // flags.
    let flags = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.split_whitespace().nth(6))
        .and_then(|f| f.parse::<u64>().ok());
    flags.is_some_and(|f| f & PF_KTHREAD != 0)
}

/// A pool of user ids, one per call in flight. Ids are claimed with an exclusive `flock`
/// on `<lock_dir>/uid-<id>.lock` in a host-wide folder, so several executors (or test
/// processes) on one host never share an id.
///
/// Whatever a holder left running under an id (an executor killed mid-call leaves its
/// tools behind) is killed by the next holder when it takes the id: the check
/// ([`user_has_process`](super::user_has_process)) costs one system call, so no mark in the lock file is needed.
#[derive(Debug)]
pub struct UserPool {
    base: u32,
    /// How many ids; `base + size` fits a `u32` (checked in [`UserPool::new`]).
    size: u32,
    /// The lock folder, opened once: each lock file is opened relative to it, with no
    /// walk of the folder's path.
    dir: OwnedFd,
    next: AtomicU32,
    /// Ids this executor still holds the lock of, no call using them (last released
    /// first): taking one again needs no open, lock and close of its file. At most
    /// [`MAX_IDLE_IDS`], and never more than were in use at once.
    pub(super) idle: Mutex<Vec<(u32, Flock<File>)>>,
}

/// Most ids kept locked while no call uses them.
pub const MAX_IDLE_IDS: usize = 64;

/// A user id held by one call; returned to the pool on drop, after its processes are
/// killed.
#[derive(Debug)]
pub struct CallUser {
    /// The user (and group) id.
    pub uid: u32,
    lock: Option<Flock<File>>,
    pool: Arc<UserPool>,
    /// Whether [`CallUser::kill`] ran: the drop then does not kill again.
    killed: bool,
}

impl UserPool {
    /// A pool of `size` ids starting at `base`, locked through files in `lock_dir`.
    /// Refused (`InvalidInput`) when the ids would run past the largest user id.
    pub fn new(base: u32, size: usize, lock_dir: PathBuf) -> std::io::Result<Arc<Self>> {
        let size = u32::try_from(size)
            .ok()
            .filter(|size| base.checked_add(*size).is_some())
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{size} user ids from {base} run past the largest user id; lower the uid base or the pool size"),
                )
            })?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&lock_dir)?;
        let dir = openat(
            AT_FDCWD,
            &lock_dir,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Arc::new(Self {
            base,
            size,
            dir,
            next: AtomicU32::new(0),
            idle: Mutex::new(Vec::new()),
        }))
    }

    /// Kills what earlier executors left running under ids that no one holds now (an
    /// executor killed mid-call leaves its tools behind).
    pub fn sweep(&self) {
        for slot in 0..self.size {
            let uid = self.base + slot;
            if let Some(lock) = self.try_lock(uid) {
                kill_user_until_gone(uid);
                drop(lock);
            }
        }
    }

    /// The exclusive lock of `uid`, when no one else holds it. The file is opened without
    /// `O_CREAT` first: creating takes the folder's lock, which every other claim and
    /// release of an id waits on; only an id's first use creates its file.
    fn try_lock(&self, uid: u32) -> Option<Flock<File>> {
        let name = format!("uid-{uid}.lock");
        let flags = OFlag::O_RDWR | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW;
        let fd = match openat(&self.dir, name.as_str(), flags, Mode::empty()) {
            Err(nix::errno::Errno::ENOENT) => openat(
                &self.dir,
                name.as_str(),
                flags | OFlag::O_CREAT,
                Mode::from_bits_truncate(0o600),
            ),
            other => other,
        }
        .ok()?;
        Flock::lock(File::from(fd), FlockArg::LockExclusiveNonblock).ok()
    }

    /// Takes a free id, killing any process left under it. `None` when all are in use.
    pub fn acquire(self: &Arc<Self>) -> Option<CallUser> {
        let kept = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        if let Some((uid, lock)) = kept {
            // No check here: its last call's release found nothing left, or sent what it
            // found SIGKILL in one pass that no fork escapes (see `kill_user`), and no
            // process of the id can start after that.
            return Some(CallUser {
                uid,
                lock: Some(lock),
                pool: Arc::clone(self),
                killed: false,
            });
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..self.size {
            let uid = self.base + start.wrapping_add(i) % self.size;
            let Some(lock) = self.try_lock(uid) else {
                continue;
            };
            // A holder that ended its call cleanly killed what was left; a crashed one did
            // not. Either way, anything still running as this id dies now.
            kill_user(uid);
            return Some(CallUser {
                uid,
                lock: Some(lock),
                pool: Arc::clone(self),
                killed: false,
            });
        }
        None
    }

    /// Takes `uid` back when this executor keeps it idle (locked, no call using it), so
    /// that a context's next call runs as the user its kept files already belong to and
    /// nothing has to be given to another (docs/hot-path.md). `None` when the id is in
    /// use or not kept. Nothing of it runs: its last release killed what was left.
    pub fn acquire_idle(self: &Arc<Self>, uid: u32) -> Option<CallUser> {
        let mut idle = self.idle.lock().ok()?;
        let at = idle.iter().position(|(id, _)| *id == uid)?;
        let (uid, lock) = idle.remove(at);
        Some(CallUser {
            uid,
            lock: Some(lock),
            pool: Arc::clone(self),
            killed: false,
        })
    }
}

impl CallUser {
    /// The group id, equal to the user id.
    pub fn gid(&self) -> u32 {
        self.uid
    }

    /// Kills every process of the user now (see [`kill_user`]: one pass leaves none), so
    /// that what the call leaves can be moved before the id goes back to the pool; the
    /// drop then hands the id back without a second kill.
    pub fn kill(&mut self) {
        kill_user(self.uid);
        self.killed = true;
    }
}

impl Drop for CallUser {
    fn drop(&mut self) {
        if !self.killed {
            kill_user(self.uid);
        }
        let Some(lock) = self.lock.take() else { return };
        // Kept locked for the next call, unless enough are.
        if let Ok(mut idle) = self.pool.idle.lock() {
            if idle.len() < MAX_IDLE_IDS {
                idle.push((self.uid, lock));
            }
        }
    }
}
