//! Process lifetime: every process a call starts dies when the call ends.
//!
//! When the executor is root, each call in flight runs under its own user id from a pool
//! ([`UserPool`]); at the end, when any process of that id is left, a short-lived helper
//! switches to that id and sends SIGKILL to every process it may signal (`kill(-1)`),
//! which reaches double-forked, `setsid` grandchildren too. Without root, the process group and
//! every descendant still linked to the tool by parent ids are killed; a process that
//! double-forked out of the tree is not found then (documented limit of that mode).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use nix::fcntl::{openat, Flock, FlockArg, OFlag, AT_FDCWD};
use nix::sys::stat::Mode;

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::Pid;

/// Default first user id of the per-call pool.
pub const DEFAULT_UID_BASE: u32 = 2_000_000;

/// A pool of user ids, one per call in flight. Ids are claimed with an exclusive `flock`
/// on `<lock_dir>/uid-<id>.lock` in a host-wide folder, so several executors (or test
/// processes) on one host never share an id.
///
/// Whatever a holder left running under an id (an executor killed mid-call leaves its
/// tools behind) is killed by the next holder when it takes the id: the check
/// ([`user_has_process`]) costs one system call, so no mark in the lock file is needed.
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
    idle: Mutex<Vec<(u32, Flock<File>)>>,
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
            });
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
        let Some(lock) = self.lock.take() else { return };
        // Kept locked for the next call, unless enough are.
        if let Ok(mut idle) = self.pool.idle.lock() {
            if idle.len() < MAX_IDLE_IDS {
                idle.push((self.uid, lock));
            }
        }
    }
}

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

/// Starts a helper that switches to `uid` and calls `kill(-1, SIGKILL)`, and waits for it.
///
/// The helper is a `clone(CLONE_VM | CLONE_VFORK | CLONE_FILES)` child, as `posix_spawn`
/// starts its children (and sharing the descriptor table too): it shares the executor's memory instead of copying its page tables, so the
/// executor pays neither the copy nor the copy-on-write faults a `fork` of a large,
/// multi-threaded process costs on every call (docs/hot-path.md measured the releaser
/// thread, which runs this, above the tool itself). The calling thread sleeps until the
/// helper exits. The helper makes raw system calls only — no libc wrapper that keeps state
/// (glibc's `setresuid` would broadcast to the executor's threads), no allocation — on a
/// stack allocated here, with every signal but SIGCHLD (which has no handler) blocked, inherited from this thread's mask.
fn kill_as(uid: u32) {
    const STACK_BYTES: usize = 16 * 1024;
    KILL_HELPERS.fetch_add(1, Ordering::Relaxed);
    let mut stack = vec![0u8; STACK_BYTES];
    let mut args = KillArgs { uid };
    // The stack grows down: pass its 16-byte aligned top.
    let top = (stack.as_mut_ptr() as usize + STACK_BYTES) & !0xf;
    let all = super::spawn::clone_window_mask();
    let mut old: libc::sigset_t = unsafe_zeroed_sigset();
    // SAFETY: pthread_sigmask on sigsets owned here; clone runs `kill_helper`
    // on `stack`, which outlives the child (CLONE_VFORK: this thread resumes only after
    // the child exited), with a pointer to `args`, which lives until after that too; the
    // child touches nothing else of the shared memory.
    let pid = unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(
            kill_helper,
            top as *mut libc::c_void,
            // CLONE_FILES: the helper opens and closes nothing, so it shares the
            // executor's descriptor table instead of copying it at clone and closing
            // every copy at exit (most of the helper's cost on a busy executor).
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_FILES | libc::SIGCHLD,
            (&mut args as *mut KillArgs).cast(),
        );
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        pid
    };
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        tracing::error!(uid, error = %e, "cannot start the process killer");
        return;
    }
    let _ = waitpid(Pid::from_raw(pid), None);
    drop(stack);
}

/// Kill helpers started by this process.
static KILL_HELPERS: AtomicU64 = AtomicU64::new(0);

/// How many kill helpers this process has started (tests and benches compare it around
/// calls).
pub fn kill_helpers_started() -> u64 {
    KILL_HELPERS.load(Ordering::Relaxed)
}

/// What [`kill_helper`] reads: the user to become.
#[repr(C)]
struct KillArgs {
    uid: u32,
}

/// The helper's body (see [`kill_as`]): raw system calls only; returning exits the helper.
extern "C" fn kill_helper(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points to the KillArgs that `kill_as` keeps alive until this child
    // exited; only raw system calls with integer arguments follow.
    unsafe {
        let args = &*(arg as *const KillArgs);
        let uid = libc::c_long::from(args.uid);
        if libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0 {
            return 1;
        }
        libc::syscall(
            libc::SYS_kill,
            -1 as libc::c_long,
            libc::c_long::from(libc::SIGKILL),
        );
    }
    0
}

fn unsafe_zeroed_sigset() -> libc::sigset_t {
    // SAFETY: sigset_t is a plain bit array; all zeroes is the empty set.
    unsafe { std::mem::zeroed() }
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

/// Ends calls off their critical path: a thread of its own runs each queued release
/// (kill what the call's user still runs, unlock the user id, move the scratch dir aside)
/// while the call's result is already on its way. A user id stays locked until its
/// release has run, so no call gets it before its processes are dead.
#[derive(Debug)]
pub struct Releaser {
    queue: Mutex<Sender<Job>>,
    pending: Arc<(Mutex<usize>, Condvar)>,
}

type Job = Box<dyn FnOnce() + Send>;

impl Releaser {
    /// The process's releaser, started on first use.
    pub fn global() -> &'static Releaser {
        static RELEASER: OnceLock<Releaser> = OnceLock::new();
        RELEASER.get_or_init(Releaser::start)
    }

    fn start() -> Self {
        let (queue, jobs) = mpsc::channel::<Job>();
        let pending = Arc::new((Mutex::new(0usize), Condvar::new()));
        let counter = Arc::clone(&pending);
        let spawned = std::thread::Builder::new()
            .name("call-releaser".into())
            .spawn(move || {
                for job in jobs {
                    job();
                    done(&counter);
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the call releaser; calls end in line");
        }
        Self {
            queue: Mutex::new(queue),
            pending,
        }
    }

    /// Queues `job`; runs it here when the thread is gone.
    pub fn release(&self, job: impl FnOnce() + Send + 'static) {
        if let Ok(mut n) = self.pending.0.lock() {
            *n += 1;
        }
        let sent = match self.queue.lock() {
            Ok(queue) => queue.send(Box::new(job)).map_err(|e| e.0),
            Err(_) => Err(Box::new(job) as Job),
        };
        if let Err(job) = sent {
            job();
            done(&self.pending);
        }
    }

    /// Waits until a queued release has run, at most until `deadline`. False when none is
    /// queued (nothing will free a user id) or the deadline passed.
    pub fn wait_one(&self, deadline: std::time::Instant) -> bool {
        let (lock, changed) = &*self.pending;
        let Ok(mut n) = lock.lock() else { return false };
        let before = *n;
        while *n >= before && before > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            n = match changed.wait_timeout(n, left) {
                Ok((n, _)) => n,
                Err(_) => return false,
            };
        }
        before > 0
    }

    /// Waits until every queued release has run (before the executor exits).
    pub fn wait_idle(&self) {
        let (lock, changed) = &*self.pending;
        let Ok(mut n) = lock.lock() else { return };
        while *n > 0 {
            n = match changed.wait(n) {
                Ok(n) => n,
                Err(_) => return,
            };
        }
    }
}

fn done(pending: &(Mutex<usize>, Condvar)) {
    if let Ok(mut n) = pending.0.lock() {
        *n = n.saturating_sub(1);
    }
    pending.1.notify_all();
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

#[cfg(test)]
mod tests;
