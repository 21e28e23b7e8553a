//! The Landlock ruleset of one call: read+execute on the skill folder and the runtime
//! paths of `policies/sandbox/runtime-paths.txt`, read+write on the null devices, full
//! access to the scratch dir, no TCP bind or connect at all for a call without a network
//! namespace of its own (its seccomp filter allows no socket either) and any for a call
//! in one (its own loopback, where its programs may listen and connect, and its egress
//! proxy port are all it has; [`NetAccess`]), and abstract UNIX sockets and signals
//! scoped to the sandbox where the kernel offers it (ABI 6). Created in the parent; the
//! child adds its own `/proc/<pid>` ([`OwnProcRule`]) and enforces it.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, Scope, ABI,
};

/// The newest ABI whose rights we ask for; older kernels get what they support (the
/// probe refuses kernels below [`super::probe::MIN_LANDLOCK_ABI`]).
const TARGET_ABI: ABI = ABI::V6;

/// The runtime paths policy, embedded at build time.
pub const RUNTIME_PATHS_POLICY: &str = include_str!("../../../policies/sandbox/runtime-paths.txt");

/// Devices every program may write to (`>/dev/null`, Python's `subprocess.DEVNULL`), granted
/// read, write and truncate (a shell's `>` opens with `O_TRUNC`).
pub const WRITABLE_DEVICES: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];

/// Why the ruleset could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    /// A runtime path exists but could not be opened.
    #[error("opening {path} for the Landlock ruleset failed: {source}")]
    Open {
        /// The path.
        path: PathBuf,
        /// Cause.
        source: landlock::PathFdError,
    },
    /// The kernel refused a step of building the ruleset.
    #[error("building the Landlock ruleset failed: {source}")]
    Build {
        /// The crate's error.
        #[from]
        source: RulesetError,
    },
    /// The type of a runtime path could not be read.
    #[error("reading the type of {path} for the Landlock ruleset failed: {source}")]
    Type {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The kernel refused a runtime path's rule.
    #[error("adding a runtime path's rule to the Landlock ruleset failed: {source}")]
    Rule {
        /// The OS error.
        source: std::io::Error,
    },
    /// The ruleset's fd could not be duplicated for the child's `/proc/<pid>` rule.
    #[error("duplicating the Landlock ruleset fd failed: {source}")]
    Duplicate {
        /// The OS error.
        source: std::io::Error,
    },
}

/// Paths of the runtime policy, comments stripped.
pub fn runtime_paths() -> Vec<PathBuf> {
    RUNTIME_PATHS_POLICY
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect()
}

/// The paths every call's ruleset grants, opened once (`O_PATH`) when the executor starts:
/// a call then adds a rule per fd instead of walking each path again (the walks were most
/// of the ruleset's cost). Landlock rules name inodes, so a rule made from a kept fd is
/// the rule a fresh open would make while the path names the same folder; these are
/// system folders (`/usr`, `/lib`, ...), replaced only by an upgrade that restarts the
/// executor anyway.
///
/// Each path's type is read once too: a rule on a file may grant only file rights, and the
/// crate would `fstat` every fd on every call to find out. The rules go in by raw system
/// call with rights computed here as the crate computes them (the crate still builds the
/// ruleset and the call's own rules).
#[derive(Debug)]
pub struct RuntimeRules {
    read_exec: Vec<Kept>,
    devices: Vec<Kept>,
    /// The ABI the call's ruleset handles rights of: [`TARGET_ABI`], or the kernel's when
    /// it is older (the crate's best effort).
    abi: ABI,
}

/// A runtime path opened once, and whether it is a file rather than a folder.
#[derive(Debug)]
struct Kept {
    fd: PathFd,
    is_file: bool,
}

impl RuntimeRules {
    /// Opens `runtime` (read and execute) and [`WRITABLE_DEVICES`]; paths that do not
    /// exist are skipped, as before. Fails on a path that exists but cannot be opened.
    pub fn open(runtime: &[PathBuf]) -> Result<Self, LandlockError> {
        let open = |paths: &mut dyn Iterator<Item = &Path>| {
            paths
                .filter(|p| p.exists())
                .map(|p| {
                    let fd = PathFd::new(p).map_err(|source| LandlockError::Open {
                        path: p.to_path_buf(),
                        source,
                    })?;
                    let is_file = is_file(&fd).map_err(|source| LandlockError::Type {
                        path: p.to_path_buf(),
                        source,
                    })?;
                    Ok(Kept { fd, is_file })
                })
                .collect::<Result<Vec<_>, LandlockError>>()
        };
        // Built against the same ABI by the crate's own conversion; only ever lowers it.
        let kernel = ABI::from(i32::try_from(super::probe::landlock_abi()).unwrap_or(0));
        Ok(Self {
            read_exec: open(&mut runtime.iter().map(PathBuf::as_path))?,
            devices: open(&mut WRITABLE_DEVICES.iter().map(Path::new))?,
            abi: kernel.min(TARGET_ABI),
        })
    }

    /// Adds every kept path's rule to the ruleset behind `child`.
    fn add_to(&self, child: &OwnProcRule) -> std::io::Result<()> {
        let file_only = AccessFs::from_file(self.abi);
        let device = device_access() & AccessFs::from_all(self.abi);
        let rules = (self
            .read_exec
            .iter()
            .map(|k| (k, AccessFs::from_read(self.abi))))
        .chain(self.devices.iter().map(|k| (k, device)));
        for (kept, access) in rules {
            let access = if kept.is_file {
                access & file_only
            } else {
                access
            };
            child.add_path_rule(kept.fd.as_fd().as_raw_fd(), access.bits())?;
        }
        Ok(())
    }
}

/// What the writable devices are granted.
fn device_access() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate
}

/// Whether `fd` is anything but a folder (what the crate asks of a rule's fd).
fn is_file(fd: &PathFd) -> std::io::Result<bool> {
    // SAFETY: fstat on an open fd into a zeroed local.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    if unsafe { libc::fstat(fd.as_fd().as_raw_fd(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(stat.st_mode & libc::S_IFMT != libc::S_IFDIR)
}

/// What a call's ruleset says about TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetAccess {
    /// No TCP bind or connect (the call has no namespace of its own; its seccomp filter
    /// allows no socket either: this is the second wall).
    None,
    /// Any port: the call runs in a network namespace of its own, whose only interface is
    /// its own loopback (its servers, and the egress proxy of a network call), so a port
    /// there reaches nothing outside the call.
    OwnNamespace,
}

/// Files a call with a network namespace of its own may read besides the runtime paths:
/// how glibc resolves `localhost` (its own loopback) without DNS.
pub const NAME_FILES: [&str; 2] = ["/etc/hosts", "/etc/nsswitch.conf"];

/// Builds the ruleset of one call, ready for its child: the runtime rules, the skill
/// folder when there is one (read and execute; a command session outside any skill has
/// none) and the scratch dir (everything), and TCP as `net` says. `None` when the kernel
/// enforces no Landlock. A call in a namespace of its own may also read [`NAME_FILES`].
pub fn build(
    skill_dir: Option<&Path>,
    deps_dir: Option<&Path>,
    scratch_dir: &Path,
    runtime: &RuntimeRules,
    net: NetAccess,
) -> Result<Option<OwnProcRule>, LandlockError> {
    begin(scratch_dir, runtime, net)?
        .map(|begun| begun.finish(skill_dir, deps_dir))
        .transpose()
}

/// A call's ruleset begun before the call is known (by the slot filler, with the scratch
/// dir made ahead; slots.rs): every rule of [`build`] but the skill folder's and its
/// dependencies', which [`Begun::finish`] adds. Landlock's rules are a union, so the
/// order they go in does not matter; nothing is enforced before the child's
/// [`restrict_self`].
#[derive(Debug)]
pub struct Begun {
    ruleset: RulesetCreated,
    child: OwnProcRule,
    net: NetAccess,
}

/// [`build`]'s ruleset without the skill's folders: `None` when the kernel enforces no
/// Landlock.
pub fn begin(
    scratch_dir: &Path,
    runtime: &RuntimeRules,
    net: NetAccess,
) -> Result<Option<Begun>, LandlockError> {
    let all = AccessFs::from_all(TARGET_ABI);
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?;
    let ruleset = match net {
        NetAccess::None => ruleset.handle_access(AccessNet::from_all(TARGET_ABI))?,
        NetAccess::OwnNamespace => ruleset,
    };
    // A call with a loopback of its own names it `localhost`: glibc reads the name from
    // /etc/hosts, in the order /etc/nsswitch.conf gives (without it, DNS first, which
    // the namespace cannot reach, and the lookup fails before the file is read).
    let name_files: Vec<&Path> = match net {
        NetAccess::OwnNamespace => NAME_FILES
            .iter()
            .map(Path::new)
            .filter(|p| p.exists())
            .collect(),
        NetAccess::None => Vec::new(),
    };
    let ruleset = ruleset
        .scope(Scope::from_all(TARGET_ABI))?
        .create()?
        .add_rules(path_beneath_rules([scratch_dir], all))?
        .add_rules(path_beneath_rules(
            name_files,
            AccessFs::from_file(TARGET_ABI) & AccessFs::from_read(TARGET_ABI),
        ))?;
    let child =
        OwnProcRule::for_ruleset(&ruleset).map_err(|source| LandlockError::Duplicate { source })?;
    let Some(child) = child else {
        return Ok(None);
    };
    runtime
        .add_to(&child)
        .map_err(|source| LandlockError::Rule { source })?;
    Ok(Some(Begun {
        ruleset,
        child,
        net,
    }))
}

impl Begun {
    /// What the ruleset says about TCP (a call in a namespace of its own needs
    /// [`NetAccess::OwnNamespace`]).
    pub fn net(&self) -> NetAccess {
        self.net
    }

    /// Adds the skill folder and its dependencies (read and execute): the call's ruleset,
    /// ready for its child.
    pub fn finish(
        self,
        skill_dir: Option<&Path>,
        deps_dir: Option<&Path>,
    ) -> Result<OwnProcRule, LandlockError> {
        let read_exec = AccessFs::from_read(TARGET_ABI);
        // The rules go into the kernel object that `child` holds a duplicate of.
        let _ruleset = self
            .ruleset
            .add_rules(path_beneath_rules(skill_dir, read_exec))?
            .add_rules(path_beneath_rules(deps_dir, read_exec))?;
        Ok(self.child)
    }
}

/// A call's ruleset as its child process uses it, by fd. The rule that lets a tool read
/// its own `/proc/<pid>` and nothing else of `/proc` can be added only once the pid exists,
/// so the parent keeps a duplicate of the ruleset's fd; the child adds the rule with
/// [`add_own_proc_rule`] and enforces the ruleset with [`restrict_self`], both raw system
/// calls (the child shares the executor's memory until exec, see `spawn.rs`).
#[derive(Debug)]
pub struct OwnProcRule {
    ruleset_fd: OwnedFd,
}

/// `struct landlock_path_beneath_attr` (linux/landlock.h), packed as the kernel declares it.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
/// `LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR`.
const PROC_ACCESS: u64 = (1 << 2) | (1 << 3);

impl OwnProcRule {
    /// Keeps a duplicate of `ruleset`'s fd (the kernel object is shared: a rule added
    /// through the duplicate is part of `ruleset`). `None` when Landlock is not enforced.
    pub fn for_ruleset(ruleset: &RulesetCreated) -> std::io::Result<Option<Self>> {
        let fd: Option<OwnedFd> = ruleset.try_clone()?.into();
        Ok(fd.map(|ruleset_fd| Self { ruleset_fd }))
    }

    /// Grants `access` (Landlock's `LANDLOCK_ACCESS_FS_*` bits) beneath the file or folder
    /// open as `parent`: one system call, no allocation.
    fn add_path_rule(&self, parent: RawFd, access: u64) -> std::io::Result<()> {
        add_path_rule(self.ruleset_fd.as_raw_fd(), parent, access)
    }
}

impl AsRawFd for OwnProcRule {
    fn as_raw_fd(&self) -> RawFd {
        self.ruleset_fd.as_raw_fd()
    }
}

/// Adds read access beneath `/proc/self` (the calling process's own `/proc/<pid>`) to the
/// ruleset open as `ruleset` in this process. Runs in the child before exec: only system
/// calls on a static path, no allocation.
pub fn add_own_proc_rule(ruleset: RawFd) -> std::io::Result<()> {
    // SAFETY: the path is a NUL-terminated static string; the returned fd is owned
    // below and closed when this function returns.
    let proc_self = unsafe {
        libc::open(
            c"/proc/self".as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if proc_self < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `proc_self` was just opened and nothing else owns it.
    let proc_self = unsafe { OwnedFd::from_raw_fd(proc_self) };
    add_path_rule(ruleset, proc_self.as_raw_fd(), PROC_ACCESS)
}

/// Grants `access` (Landlock's `LANDLOCK_ACCESS_FS_*` bits) beneath the file or folder open
/// as `parent` in the ruleset open as `ruleset`: one system call, no allocation (the child
/// makes it too).
fn add_path_rule(ruleset: RawFd, parent: RawFd, access: u64) -> std::io::Result<()> {
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: parent,
    };
    // SAFETY: landlock_add_rule reads one packed landlock_path_beneath_attr from a live
    // local; both fds are open for the duration of the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Enforces the ruleset open as `ruleset` on the calling process (no_new_privs must be
/// set already). Runs in the child before exec: one system call.
pub fn restrict_self(ruleset: RawFd) -> std::io::Result<()> {
    // SAFETY: landlock_restrict_self takes the ruleset fd, open here, and no flags.
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_policy_parses_and_excludes_secrets() {
        let paths = runtime_paths();
        assert!(paths.contains(&PathBuf::from("/usr")));
        for forbidden in [
            "/etc",
            "/root",
            "/home",
            "/tmp",
            "/etc/shadow",
            "/var",
            "/dev",
            "/run",
            "/proc",
            "/proc/self",
            "/proc/1",
        ] {
            assert!(
                !paths.contains(&PathBuf::from(forbidden)),
                "{forbidden} must not be granted"
            );
        }
    }
}
