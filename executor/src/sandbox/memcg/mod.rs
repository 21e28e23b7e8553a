//! A memory cgroup per call: the memory limit counts what the call's processes use, not
//! the address space they reserve (docs/sandbox.md, "Memory"). V8, the JVM and Go reserve
//! gigabytes of address space they never touch, which an address-space limit
//! (`RLIMIT_AS`) cannot tell from memory in use.
//!
//! [`MemoryCgroups::start`] finds the executor's own cgroup, preferring the unified
//! hierarchy (cgroup v2) when it offers the memory controller and else a v1 `memory`
//! hierarchy (a hybrid host), and makes a subtree of its own there:
//!
//! - v2: the processes of the executor's cgroup move to a leaf `supervisor` (a cgroup that
//!   hands controllers to children may hold no process), `+memory` is enabled, and calls
//!   get `calls-<pidns>-<pid>/call-<n>` with `memory.max` and `memory.swap.max = 0`;
//! - v1: calls get `skillbox-<pidns>-<pid>/call-<n>` with `memory.limit_in_bytes` (and the
//!   memory+swap limit at the same value where swap is accounted).
//!
//! A call's process joins its cgroup between clone and exec, before anything of the tool
//! runs: it writes `0` to the cgroup's `cgroup.procs`, opened here
//! ([`CallCgroup::procs`], [`super::child::ChildSetup::cgroup`]). A process past the limit
//! is killed by the kernel's OOM killer; the call reads the cgroup's `oom_kill` count
//! ([`CallCgroup::oom_killed`]) to report it as the memory limit. A call's cgroup is
//! made ahead of it and, when the call left nothing in it, kept for a later call
//! ([`ready`]); otherwise it is removed with the call ([`CallCgroup::remove`], on the
//! releaser thread). Where none of this is
//! possible (not root, a container without a delegated cgroup) the executor falls back
//! to rlimits ([`super::limits`]) and says so ([`MemoryMode`]).

use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use self::find::find;
use self::ready::Maker;

mod find;
mod ready;

/// How this executor limits a call's memory, as `probe` and `health` report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryMode {
    /// A cgroup v2 per call (`memory.max`): what the processes use.
    CgroupV2,
    /// A cgroup of a v1 `memory` hierarchy per call (`memory.limit_in_bytes`).
    CgroupV1,
    /// No cgroup: rlimits per process (`RLIMIT_DATA` at the limit, `RLIMIT_AS` with a
    /// reserve for runtimes that reserve address space).
    Rlimit,
}

impl MemoryMode {
    /// The name `probe` and `health` print.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryMode::CgroupV2 => "cgroup_v2",
            MemoryMode::CgroupV1 => "cgroup_v1",
            MemoryMode::Rlimit => "rlimit",
        }
    }
}

/// Why the executor cannot have a cgroup subtree, or a call its cgroup.
#[derive(Debug, thiserror::Error)]
pub enum MemcgError {
    /// `/proc/self/cgroup` or `/proc/self/mountinfo` could not be read.
    #[error("reading {path} failed: {source}")]
    Proc {
        /// The file.
        path: &'static str,
        /// Cause.
        source: io::Error,
    },
    /// No hierarchy with the memory controller is mounted where the executor sees it.
    #[error("no cgroup hierarchy with the memory controller is mounted (cgroup v2 with memory in the executor's cgroup.controllers, or a v1 memory hierarchy)")]
    NoHierarchy,
    /// A cgroup folder could not be made.
    #[error("making the cgroup {path} failed: {source} (the executor needs write access to its own cgroup: root on the host, or a delegated cgroup in a container)")]
    Make {
        /// The folder.
        path: PathBuf,
        /// Cause.
        source: io::Error,
    },
    /// A cgroup file could not be written.
    #[error("writing {value:?} to {path} failed: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What was written.
        value: String,
        /// Cause.
        source: io::Error,
    },
    /// A call's `cgroup.procs` could not be opened.
    #[error("opening {path} failed: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: io::Error,
    },
}

/// Which hierarchy the subtree is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// The executor's cgroup subtree, from which each call gets a cgroup of its own.
#[derive(Debug)]
pub struct MemoryCgroups {
    maker: Arc<Maker>,
}

/// The mode [`MemoryCgroups::start`] would set up here, judged without changing anything
/// (for `skillbox-executor probe`): the executor's cgroup offers the memory controller and
/// is writable.
pub fn probe_mode() -> MemoryMode {
    match find() {
        Ok(found) if writable(&found.own) => match found.version {
            Version::V2 => MemoryMode::CgroupV2,
            Version::V1 => MemoryMode::CgroupV1,
        },
        _ => MemoryMode::Rlimit,
    }
}

fn writable(dir: &Path) -> bool {
    nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_ok()
}

impl MemoryCgroups {
    /// Makes the executor's subtree (see the module docs), removing what executors that
    /// are gone left in it.
    pub fn start() -> Result<Self, MemcgError> {
        let found = find()?;
        let pid = std::process::id();
        let ns = pid_namespace();
        let base = match found.version {
            Version::V2 => {
                let own = v2_delegate(&found.own)?;
                let base = own.join(format!("calls-{ns}-{pid}"));
                sweep(&own, "calls-", ns);
                make_dir(&base)?;
                write(&base.join("cgroup.subtree_control"), "+memory")?;
                base
            }
            Version::V1 => {
                sweep(&found.own, "skillbox-", ns);
                let base = found.own.join(format!("skillbox-{ns}-{pid}"));
                make_dir(&base)?;
                base
            }
        };
        Ok(Self {
            maker: Maker::new(found.version, base),
        })
    }

    /// Which hierarchy limits the calls.
    pub fn mode(&self) -> MemoryMode {
        match self.maker.version {
            Version::V2 => MemoryMode::CgroupV2,
            Version::V1 => MemoryMode::CgroupV1,
        }
    }

    /// A cgroup for one call, limited to `memory_mb` MiB with no swap: one made ahead
    /// when there is one ([`ready`]), else made now.
    pub fn create(&self, memory_mb: u64) -> Result<CallCgroup, MemcgError> {
        self.maker.take(memory_mb)
    }
}

impl Drop for MemoryCgroups {
    /// Removes the cgroups made ahead, then the subtree's folder once no call's cgroup is
    /// left in it (each call removes its own); what remains is swept at the next start.
    fn drop(&mut self) {
        self.maker.close();
        let _ = std::fs::remove_dir(&self.maker.base);
    }
}

/// One call's cgroup, removed when dropped ([`CallCgroup::remove`]): on the releaser
/// thread at the end of a call, or at once when the call failed to start.
#[derive(Debug)]
pub struct CallCgroup {
    dir: PathBuf,
    /// `cgroup.procs`, open for writing: the call's process writes `0` to it (joins).
    procs: Option<OwnedFd>,
    version: Version,
    /// The memory limit written, in MiB.
    limit_mb: u64,
    /// The OOM-kill count when the call took the cgroup.
    oom_base: u64,
    /// Where a call's cgroup goes back to when its call ends; `None` while it waits
    /// there.
    maker: Option<Arc<Maker>>,
}

impl CallCgroup {
    /// Takes the `cgroup.procs` descriptor for the child's setup (the cgroup stays).
    pub fn take_procs(&mut self) -> Option<OwnedFd> {
        self.procs.take()
    }

    /// Whether the kernel's OOM killer killed a process of this cgroup since its call
    /// took it (a cgroup used before keeps its count: [`ready`]).
    pub fn oom_killed(&self) -> bool {
        self.oom_count() > self.oom_base
    }

    /// The cgroup's count of OOM kills so far.
    fn oom_count(&self) -> u64 {
        let file = match self.version {
            Version::V2 => "memory.events",
            Version::V1 => "memory.oom_control",
        };
        std::fs::read_to_string(self.dir.join(file))
            .map(|text| oom_kills(&text))
            .unwrap_or(0)
    }

    /// Ends the call's use of the cgroup (on the releaser thread, after the call's user
    /// was ended): kept for another call when nothing of this one is left in it
    /// ([`ready`]), else whatever is left is killed and the cgroup removed.
    pub fn remove(mut self) {
        match self.maker.take() {
            Some(maker) => maker.give_back(self),
            None => drop(self),
        }
    }
}

impl Drop for CallCgroup {
    fn drop(&mut self) {
        remove_call_dir(&self.dir, self.version);
    }
}

/// The `oom_kill` count of a `memory.events` (v2) or `memory.oom_control` (v1) file.
fn oom_kills(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.strip_prefix("oom_kill "))
        .filter_map(|n| n.trim().parse().ok())
        .next()
        .unwrap_or(0)
}

/// Most tries to remove a call's cgroup while its last processes finish exiting.
const REMOVE_TRIES: u32 = 100;

fn remove_call_dir(dir: &Path, version: Version) {
    for attempt in 0..REMOVE_TRIES {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(_) => {}
        }
        if attempt == 0 {
            kill_members(dir, version);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    tracing::warn!(cgroup = %dir.display(), "a call's cgroup could not be removed; the next executor start sweeps it");
}

/// SIGKILL to every process still in the cgroup at `dir`.
fn kill_members(dir: &Path, version: Version) {
    if version == Version::V2 && write(&dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
        return;
    };
    for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// The inode of this process's PID namespace (`/proc/self/ns/pid`), 0 when unreadable.
fn pid_namespace() -> u64 {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|link| {
            let link = link.to_string_lossy().into_owned();
            link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
        })
        .unwrap_or(0)
}

/// Removes the subtrees named `<prefix><ns>-<pid>` in `own` whose executor is gone: only
/// those of this process's PID namespace `ns`, the only one whose pids it can look up (an
/// executor in another namespace sharing this cgroup, `unshare --pid` on the host, would
/// otherwise take a live executor's subtree for a dead one's). Names of an older executor
/// (`<prefix><pid>`) are swept from the host's namespace only, where every pid is seen.
fn sweep(own: &Path, prefix: &str, ns: u64) {
    let Ok(entries) = std::fs::read_dir(own) else {
        return;
    };
    let in_host_namespace = crate::sandbox::reaper::in_initial_pid_namespace();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(prefix) else {
            continue;
        };
        let pid = match rest.split_once('-') {
            Some((their_ns, pid)) if their_ns.parse::<u64>().ok() == Some(ns) => pid,
            Some(_) => continue,
            None if in_host_namespace => rest,
            None => continue,
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        let version = match prefix {
            "calls-" => Version::V2,
            _ => Version::V1,
        };
        if let Ok(calls) = std::fs::read_dir(entry.path()) {
            for call in calls.flatten() {
                if call.file_type().is_ok_and(|t| t.is_dir()) {
                    remove_call_dir(&call.path(), version);
                }
            }
        }
        let _ = std::fs::remove_dir(entry.path());
    }
}

/// The name of the leaf v2 moves the executor's cgroup's processes into.
const SUPERVISOR: &str = "supervisor";

/// Makes `own` (the executor's v2 cgroup) able to hand the memory controller to calls:
/// its processes move to the leaf [`SUPERVISOR`] (not at the hierarchy's root, which may
/// hold processes) and `+memory` is enabled. An executor
/// already in a `supervisor` leaf an earlier one made (a restart under `skillbox up`)
/// uses the parent. Returns the cgroup the calls' subtree goes in.
fn v2_delegate(own: &Path) -> Result<PathBuf, MemcgError> {
    let parent_delegates = own.file_name().is_some_and(|n| n == SUPERVISOR)
        && own.parent().is_some_and(|p| {
            std::fs::read_to_string(p.join("cgroup.subtree_control"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
        });
    if parent_delegates {
        if let Some(parent) = own.parent() {
            return Ok(parent.to_path_buf());
        }
    }
    // The hierarchy's real root (no `cgroup.type`: only a non-root cgroup has one, a
    // container's namespace root included) may hold processes and hand out controllers:
    // the host's processes there are left where they are.
    if !own.join("cgroup.type").exists() {
        write(&own.join("cgroup.subtree_control"), "+memory")?;
        return Ok(own.to_path_buf());
    }
    let leaf = own.join(SUPERVISOR);
    make_dir(&leaf)?;
    // Processes may start in `own` while they are moved (a fork of one of them): a few
    // rounds, then enabling the controller says whether `own` is empty.
    for _ in 0..5 {
        let procs = std::fs::read_to_string(own.join("cgroup.procs")).map_err(|source| {
            MemcgError::Open {
                path: own.join("cgroup.procs"),
                source,
            }
        })?;
        let pids: Vec<&str> = procs.lines().filter(|l| !l.trim().is_empty()).collect();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            // A process that exited meanwhile cannot be moved; that is fine.
            let _ = write(&leaf.join("cgroup.procs"), pid);
        }
    }
    write(&own.join("cgroup.subtree_control"), "+memory")?;
    Ok(own.to_path_buf())
}

fn make_dir(path: &Path) -> Result<(), MemcgError> {
    match std::fs::create_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(MemcgError::Make {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn write(path: &Path, value: &str) -> Result<(), MemcgError> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|source| MemcgError::Write {
            path: path.to_path_buf(),
            value: value.to_string(),
            source,
        })
}

fn write_if_present(path: &Path, value: &str) -> Result<(), MemcgError> {
    match path.exists() {
        true => write(path, value),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::find::{join_cgroup, mount_points, own_paths, unescape};
    use super::*;

    #[test]
    fn own_cgroups_are_read_for_both_hierarchies() {
        let hybrid = "9:name=systemd:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n";
        assert_eq!(
            own_paths(hybrid),
            (Some("/".into()), Some("/process_api/abc".into()))
        );
        assert_eq!(
            own_paths("0::/system.slice/skillbox.service\n"),
            (Some("/system.slice/skillbox.service".into()), None)
        );
    }

    #[test]
    fn mount_points_of_both_hierarchies_are_found() {
        let info = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                    35 31 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
                    40 31 0:36 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let (v2, v1) = mount_points(info);
        assert_eq!(
            v2,
            Some((PathBuf::from("/sys/fs/cgroup/unified"), "/".into()))
        );
        assert_eq!(
            v1,
            Some((PathBuf::from("/sys/fs/cgroup/memory"), "/".into()))
        );
        let container =
            "500 400 0:40 /docker/x /sys/fs/cgroup rw shared:1 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            mount_points(container).0,
            Some((PathBuf::from("/sys/fs/cgroup"), "/docker/x".into()))
        );
    }

    #[test]
    fn a_cgroup_path_is_joined_below_its_mounts_root() {
        let at = |root, path| join_cgroup(Path::new("/sys/fs/cgroup"), root, path);
        assert_eq!(at("/", "/a/b"), PathBuf::from("/sys/fs/cgroup/a/b"));
        assert_eq!(
            at("/docker/x", "/docker/x/sub"),
            PathBuf::from("/sys/fs/cgroup/sub")
        );
        assert_eq!(at("/", "/"), PathBuf::from("/sys/fs/cgroup/"));
        assert_eq!(unescape(r"/a\040b"), "/a b");
    }

    #[test]
    fn oom_kills_are_counted_from_either_file() {
        assert_eq!(oom_kills("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"), 1);
        assert_eq!(
            oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"),
            2
        );
        assert_eq!(oom_kills("oom_kill_disable 0\nunder_oom 0\n"), 0);
    }
}
