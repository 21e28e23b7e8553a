//! The sandbox's settings ([`SandboxConfig`]) and why it cannot start or prepare a call
//! ([`SandboxError`]).

use std::path::{Path, PathBuf};

use super::limits::DEFAULT_MAX_PROCESSES;
use super::reaper::default_uid_base;
use super::{landlock, seccomp, DEFAULT_MAX_CONCURRENT_CALLS, DEFAULT_MAX_PRESTARTED};

/// Executor-wide sandbox settings.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Where per-call scratch dirs are made.
    pub scratch_root: PathBuf,
    /// First user id of the per-call pool (used when the executor is root).
    pub uid_base: u32,
    /// Host-wide folder of the pool's lock files (shared by every executor on the host).
    pub uid_lock_dir: PathBuf,
    /// Calls in flight at most.
    pub max_concurrent_calls: usize,
    /// Prestarted processes (warm starts) kept at most, over all tools; each holds a user
    /// id of its own, so the pool has `max_concurrent_calls + max_prestarted` ids.
    pub max_prestarted: usize,
    /// RLIMIT_NPROC of a call.
    pub max_processes: u64,
    /// Run tools without Landlock and seccomp. Loudly unsafe; for kernels that lack them.
    pub insecure_no_sandbox: bool,
    /// Give each call a memory cgroup where the executor can have a subtree
    /// ([`super::memcg`]); false: rlimits limit memory everywhere.
    pub memory_cgroups: bool,
    /// Most bytes of context files the executor keeps cached ([`crate::blobs::BlobCache`]).
    pub blob_cache_bytes: u64,
}

impl SandboxConfig {
    /// How many per-call user ids the pool has (from `uid_base` up).
    pub fn user_ids(&self) -> usize {
        self.max_concurrent_calls + self.max_prestarted
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            scratch_root: std::env::temp_dir().join("skillbox-scratch"),
            uid_base: default_uid_base(),
            uid_lock_dir: default_uid_lock_dir(),
            max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
            max_prestarted: DEFAULT_MAX_PRESTARTED,
            max_processes: DEFAULT_MAX_PROCESSES,
            insecure_no_sandbox: false,
            memory_cgroups: true,
            blob_cache_bytes: crate::blobs::DEFAULT_CAP_BYTES,
        }
    }
}

/// Why the sandbox cannot start or prepare a call.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel cannot enforce the sandbox.
    #[error("the kernel cannot enforce the sandbox: {}; run on Linux 6.7+ with Landlock and seccomp, or pass --insecure-no-sandbox to run tools UNCONFINED", problems.join("; "))]
    Unenforceable {
        /// What is missing.
        problems: Vec<String>,
    },
    /// The seccomp policy did not compile.
    #[error("seccomp policy: {source}")]
    Seccomp {
        /// Cause.
        #[from]
        source: seccomp::SeccompError,
    },
    /// The Landlock ruleset could not be built.
    #[error(transparent)]
    Landlock(#[from] landlock::LandlockError),
    /// The scratch directory could not be made.
    #[error("cannot create a scratch dir under {root}: {source}")]
    Scratch {
        /// The scratch root.
        root: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A network call on an executor that cannot make network namespaces (fail closed).
    #[error("{}", super::netns::UNAVAILABLE)]
    NoNetworkNamespaces,
    /// UNIX sockets asked for a call without a network namespace of its own (fail closed:
    /// abstract socket names would be the executor's).
    #[error(
        "UNIX sockets need a namespace of the call's own, and this executor cannot make one; {}",
        super::mntns::UNAVAILABLE
    )]
    UnixSocketsWithoutNamespace,
    /// The call's mount namespace could not be made.
    #[error("the call's /tmp of its own could not be made: {0}; {unavailable}", unavailable = super::mntns::UNAVAILABLE)]
    MountNamespace(super::mntns::MntnsError),
    /// The kernel refused one call's network namespace.
    #[error("the call's network namespace could not be made: {0}")]
    Network(super::netns::NetnsError),
    /// The call's memory cgroup could not be made.
    #[error("the call's memory cgroup: {0}")]
    Cgroup(super::memcg::MemcgError),
    /// Every per-call user id is in use.
    #[error("all {0} sandbox users are busy; retry later or raise the concurrency limit")]
    Busy(usize),
    /// The sandbox user cannot read the skill folder.
    #[error("the sandbox user cannot reach {0}: every parent folder needs o+x and the skill folder o+rx (chmod o+rx)")]
    SkillNotReadable(PathBuf),
    /// The working directory asked for is not a plain relative path.
    #[error("the working directory {0:?} must be relative, without `..` or empty segments")]
    WorkDir(PathBuf),
    /// The executor keeps as many prestarted processes as it may.
    #[error("{0} prestarted processes are waiting already, the most this executor holds; calls beyond them start cold (raise skillbox-executor serve --max-prestarted to keep more)")]
    TooManyPrestarted(usize),
    /// fork or exec of the tool failed.
    #[error("the tool could not start in the sandbox: {0}")]
    Spawn(std::io::Error),
    /// The program is not on the sandbox PATH.
    #[error("program {program:?} is not on the sandbox PATH ({path})")]
    ProgramNotFound {
        /// The argv[0].
        program: String,
        /// The PATH searched.
        path: &'static str,
    },
}

/// `/run/skillbox/uids` when `/run` is writable (root), else `<tmp>/skillbox-uids`.
fn default_uid_lock_dir() -> PathBuf {
    let run = Path::new("/run");
    if nix::unistd::geteuid().is_root() && run.is_dir() {
        run.join("skillbox").join("uids")
    } else {
        std::env::temp_dir().join("skillbox-uids")
    }
}
