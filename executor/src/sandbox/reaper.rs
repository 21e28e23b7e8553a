//! Process lifetime: every process a call starts dies when the call ends.
//!
//! When the executor is root, each call in flight runs under its own user id from a pool
//! ([`UserPool`]); at the end a short-lived helper switches to that id and sends SIGKILL to
//! every process it may signal (`kill(-1)`), which reaches double-forked, `setsid`
//! grandchildren too, and repeats until none is left. Without root, the process group and
//! every descendant still linked to the tool by parent ids are killed; a process that
//! double-forked out of the tree is not found then (documented limit of that mode).

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use nix::fcntl::{Flock, FlockArg};

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::{fork, ForkResult, Pid};

/// Default first user id of the per-call pool.
pub const DEFAULT_UID_BASE: u32 = 2_000_000;

/// A pool of user ids, one per call in flight. Slots are claimed with an exclusive
/// `flock` on `<lock_dir>/uid-<n>.lock`, so several executors (or test processes) on one
/// host never share an id.
#[derive(Debug)]
pub struct UserPool {
    base: u32,
    size: usize,
    lock_dir: PathBuf,
    next: AtomicUsize,
}

/// A user id held by one call; returned to the pool on drop, after its processes are
/// killed.
#[derive(Debug)]
pub struct CallUser {
    /// The user (and group) id.
    pub uid: u32,
    lock: Option<Flock<File>>,
}

impl UserPool {
    /// A pool of `size` ids starting at `base`, locked through files in `lock_dir`.
    pub fn new(base: u32, size: usize, lock_dir: PathBuf) -> std::io::Result<Arc<Self>> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&lock_dir)?;
        Ok(Arc::new(Self {
            base,
            size,
            lock_dir,
            next: AtomicUsize::new(0),
        }))
    }

    /// Takes a free id, killing any process left under it. `None` when all are in use.
    pub fn acquire(self: &Arc<Self>) -> Option<CallUser> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..self.size {
            let slot = (start + i) % self.size;
            let path = self.lock_dir.join(format!("uid-{slot}.lock"));
            let Ok(file) = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .open(&path)
            else {
                continue;
            };
            if let Ok(lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                let uid = self.base + slot as u32;
                kill_user(uid);
                return Some(CallUser {
                    uid,
                    lock: Some(lock),
                });
            }
        }
        None
    }
}

impl CallUser {
    /// The group id, equal to the user id.
    pub fn gid(&self) -> u32 {
        self.uid
    }
}

impl Drop for CallUser {
    fn drop(&mut self) {
        kill_user(self.uid);
        drop(self.lock.take());
    }
}

/// Kills every process running as `uid`, from a helper process that switches to it.
pub fn kill_user(uid: u32) {
    // SAFETY: the child only makes system calls (setresuid, kill, _exit) and touches no
    // memory shared with other threads, which is what is safe after fork in a
    // multi-threaded process.
    match unsafe { fork() } {
        Ok(ForkResult::Child) => {
            // SAFETY: plain system calls with integer arguments; _exit never returns.
            unsafe {
                if libc::setresuid(uid, uid, uid) != 0 {
                    libc::_exit(1);
                }
                for _ in 0..10_000 {
                    if libc::kill(-1, libc::SIGKILL) != 0 {
                        break;
                    }
                }
                libc::_exit(0);
            }
        }
        Ok(ForkResult::Parent { child }) => {
            let _ = waitpid(child, None);
        }
        Err(e) => tracing::error!(uid, error = %e, "cannot fork the process killer"),
    }
}

/// Kills `pid`, its process group and every descendant found through parent ids.
pub fn kill_tree(pid: u32) {
    let Ok(root) = i32::try_from(pid) else { return };
    let _ = kill(Pid::from_raw(-root), Signal::SIGKILL);
    for p in descendants(root) {
        let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
    }
    let _ = kill(Pid::from_raw(root), Signal::SIGKILL);
}

fn descendants(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The command name may hold spaces and parentheses: fields follow the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(ppid) = ppid {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut queue = VecDeque::from([root]);
    while let Some(p) = queue.pop_front() {
        for c in children.get(&p).into_iter().flatten() {
            out.push(*c);
            queue.push_back(*c);
        }
    }
    out
}
