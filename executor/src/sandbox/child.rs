//! The steps run in the tool's process between clone and exec ([`super::spawn`]), in this
//! order: the call's memory cgroup joined (`0` written to its `cgroup.procs`), a network
//! call's namespace joined (`setns`, while the process still has
//! `CAP_SYS_ADMIN` and no seccomp filter), its own `/proc/<pid>` added to the Landlock ruleset, new session, rlimits, fds
//! above 2 closed (on exec), capabilities dropped (bounding set, securebits locked, user
//! switched when the executor is root, effective/permitted/inheritable/ambient cleared),
//! no_new_privs, Landlock enforced, seccomp. Everything they need is prepared before the
//! clone; these steps only make system calls: no allocation, and no libc wrapper that keeps
//! process-wide state (the child shares the executor's memory until it execs).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use super::landlock::{self, OwnProcRule};
use super::limits::Limits;
use super::seccomp::ToolFilters;

/// Linux securebits: keep root from regaining capabilities, and lock that.
const SECUREBITS: libc::c_ulong = (libc::SECBIT_NOROOT
    | libc::SECBIT_NOROOT_LOCKED
    | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
    | libc::SECBIT_KEEP_CAPS_LOCKED
    | libc::SECBIT_NO_CAP_AMBIENT_RAISE
    | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) as libc::c_ulong;

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Everything the child needs, prepared in the parent.
#[derive(Debug)]
pub struct ChildSetup {
    /// rlimits.
    pub limits: Limits,
    /// Highest capability number of the kernel (`/proc/sys/kernel/cap_last_cap`).
    pub cap_last: u32,
    /// User and group to switch to (when the executor is root).
    pub user: Option<(libc::uid_t, libc::gid_t)>,
    /// The call's Landlock ruleset: the child adds its own `/proc/<pid>` to it and
    /// enforces it. `None` only with `--insecure-no-sandbox`.
    pub landlock: Option<OwnProcRule>,
    /// How the process comes under the seccomp filters.
    pub seccomp: Seccomp,
    /// The network namespace of a network call ([`super::netns::CallNetwork::namespace`]),
    /// joined first. `None`: the process stays in the executor's namespace, where its
    /// seccomp filter leaves it no way to make a socket.
    pub netns: Option<OwnedFd>,
    /// The mount namespace of a call with UNIX sockets ([`super::mntns`]): its own `/tmp`,
    /// an empty `/run`. Joined before the child enters its working directory (joining
    /// moves it to the namespace's root). `None`: the executor's mounts.
    pub mntns: Option<OwnedFd>,
    /// The `cgroup.procs` of the call's memory cgroup ([`super::memcg::CallCgroup`]),
    /// joined first, before anything of the tool can allocate. `None`: rlimits limit
    /// memory.
    pub cgroup: Option<OwnedFd>,
    /// Start a session of its own (`setsid`) rather than only a process group: needed
    /// while the executor has a controlling terminal ([`super::terminal`]).
    pub new_session: bool,
    /// Start a session of its own and make the terminal on fd 0 its controlling terminal
    /// (`setsid`, `TIOCSCTTY`): a command session on a pseudo-terminal.
    pub controlling_terminal: bool,
}

/// How a tool's process comes under the seccomp filters.
#[derive(Debug, Clone)]
pub enum Seccomp {
    /// No filter: only with `--insecure-no-sandbox` (and in tests of the spawn itself).
    Off,
    /// The process installs the filters itself before exec (the kernel converts and
    /// JIT-compiles them for this one process).
    Install(Arc<ToolFilters>),
    /// The process inherits the filters of the thread that clones it, a spawner thread
    /// that installed them once ([`super::spawner`]); a launch of this kind refuses to
    /// start on any other thread.
    Inherit,
}

/// Where the spawn put the child's descriptors, when not at their numbers in the
/// executor ([`super::spawn::child_fds`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct MovedFds {
    /// The Landlock ruleset.
    pub ruleset: Option<RawFd>,
    /// The network namespace.
    pub netns: Option<RawFd>,
    /// The memory cgroup's `cgroup.procs`.
    pub cgroup: Option<RawFd>,
}

fn check(ret: libc::c_int) -> io::Result<()> {
    check_raw(libc::c_long::from(ret))
}

/// [`check`] for what `libc::syscall` returns (a `c_long`, not narrowed first).
fn check_raw(ret: libc::c_long) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `CLOSE_RANGE_CLOEXEC` as the `c_int` flags `close_range` takes.
// The flag is `1 << 2`: it fits a c_int and the cast cannot wrap.
#[allow(clippy::cast_possible_wrap)]
const CLOSE_RANGE_CLOEXEC: libc::c_int = libc::CLOSE_RANGE_CLOEXEC as libc::c_int;

thread_local! {
    /// Whether this thread's capability bounding set was seen empty. Only ever set: a
    /// bounding set never grows back.
    static BOUNDING_SET_EMPTY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread's capability bounding set is empty, read once per thread
/// while it is not. A process cloned from this thread starts with the same set. Runs in
/// the parent, before the clone.
pub fn bounding_set_empty(cap_last: u32) -> bool {
    BOUNDING_SET_EMPTY.with(|seen| {
        if !seen.get() {
            // SAFETY: integer arguments only.
            let empty = (0..=cap_last).all(|cap| unsafe {
                libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) == 0
            });
            seen.set(empty);
        }
        seen.get()
    })
}

impl ChildSetup {
    /// Runs in the child before exec. Returns an error to make the spawn fail.
    /// `bounding_set_empty`: the parent saw its (so this process's) bounding set empty
    /// ([`bounding_set_empty`]), so there is nothing to drop from it.
    /// `moved`: where this process holds the Landlock ruleset, the network namespace and
    /// the cgroup's `cgroup.procs`, when not at the numbers of [`ChildSetup::landlock`],
    /// [`ChildSetup::netns`] and [`ChildSetup::cgroup`] (the spawn moved them).
    pub fn apply(&self, bounding_set_empty: bool, moved: MovedFds) -> io::Result<()> {
        // First, while nothing of the tool has run: the call's memory cgroup, so that all
        // it ever allocates is charged there. `0` names the writing process; the file was
        // opened by the executor (root), whose credentials the kernel checks.
        if let Some(procs) =
            (self.cgroup.as_ref()).map(|own| moved.cgroup.unwrap_or(own.as_raw_fd()))
        {
            // SAFETY: write reads one byte of a static string into an open descriptor.
            let n = unsafe { libc::write(procs, b"0".as_ptr().cast(), 1) };
            check_raw(libc::c_long::try_from(n).unwrap_or(-1))?;
        }
        let (ruleset_fd, netns_fd) = (moved.ruleset, moved.netns);
        // First, while the process still has CAP_SYS_ADMIN (setns needs it) and before any
        // seccomp filter (the tool's filters allow no setns): the tool's namespace.
        if let Some(netns) = (self.netns.as_ref()).map(|own| netns_fd.unwrap_or(own.as_raw_fd())) {
            // SAFETY: setns takes an fd (the namespace, open in this process) and a flag.
            check(unsafe { libc::setns(netns, libc::CLONE_NEWNET) })?;
        }
        let ruleset = (self.landlock.as_ref()).map(|own| ruleset_fd.unwrap_or(own.as_raw_fd()));
        // First, before RLIMIT_NOFILE is lowered: opening `/proc/self` takes the lowest
        // free descriptor, and a process that copied the executor's whole table has every
        // number below the tool's limit in use under load (EMFILE).
        if let Some(ruleset) = ruleset {
            landlock::add_own_proc_rule(ruleset)?;
        }
        if self.controlling_terminal {
            nix::unistd::setsid()?;
            // SAFETY: TIOCSCTTY on fd 0, the terminal the spawn put there; 0: do not steal
            // it from another session.
            check(unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) })?;
        } else if self.new_session {
            nix::unistd::setsid()?;
        } else {
            // SAFETY: setpgid takes integers: this process leads a new group.
            check(unsafe { libc::setpgid(0, 0) })?;
        }
        self.limits.apply()?;
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags on descriptors;
        // every fd above 2 closes at exec, including ones the std spawn machinery needs
        // until then.
        check(unsafe { libc::close_range(3, libc::c_uint::MAX, CLOSE_RANGE_CLOEXEC) })?;
        self.drop_privileges(bounding_set_empty)?;
        // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) takes integer arguments only.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
        if let Some(ruleset) = ruleset {
            landlock::restrict_self(ruleset)?;
        }
        if let Seccomp::Install(filters) = &self.seccomp {
            filters.apply()?;
        }
        Ok(())
    }

    fn drop_privileges(&self, bounding_set_empty: bool) -> io::Result<()> {
        let root = nix::unistd::geteuid().is_root();
        // 41 reads per process otherwise (one system call each).
        let to_drop = if bounding_set_empty {
            0
        } else {
            self.cap_last + 1
        };
        for cap in 0..to_drop {
            // Read first: a drop commits new credentials even for a capability that is
            // already gone, and the executor emptied its own bounding set at start
            // (`super::drop_own_bounding_set`), so normally nothing is left to drop.
            // SAFETY: integer arguments only.
            let present =
                unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) };
            if present == 0 {
                continue;
            }
            // SAFETY: integer arguments only.
            check(unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) })?;
        }
        if root {
            // SAFETY: integer arguments only.
            check(unsafe { libc::prctl(libc::PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0) })?;
        }
        if let Some((uid, gid)) = self.user {
            // Raw system calls: glibc's wrappers run its all-threads protocol for the
            // process it believes it is in, the executor's (its thread-list lock and a
            // signal per thread); the raw call changes this process only.
            let (uid, gid) = (libc::c_long::from(uid), libc::c_long::from(gid));
            let no_groups = std::ptr::null::<libc::gid_t>();
            // SAFETY: setgroups with length 0 reads no memory.
            let r = unsafe { libc::syscall(libc::SYS_setgroups, 0, no_groups) };
            check_raw(r)?;
            // SAFETY: integer arguments only.
            check_raw(unsafe { libc::syscall(libc::SYS_setresgid, gid, gid, gid) })?;
            // SAFETY: integer arguments only.
            check_raw(unsafe { libc::syscall(libc::SYS_setresuid, uid, uid, uid) })?;
        }
        // SAFETY: integer arguments only.
        check(unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                0,
                0,
                0,
            )
        })?;
        let mut header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        // SAFETY: capset reads a v3 header and two data structs from live locals with the
        // layout the kernel expects (repr(C), three u32 each).
        check_raw(unsafe {
            libc::syscall(
                libc::SYS_capset,
                &mut header as *mut CapHeader,
                data.as_ptr(),
            )
        })?;
        Ok(())
    }
}

/// Highest capability number the kernel knows.
pub fn cap_last() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}
