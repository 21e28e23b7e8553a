//! The sandbox every tool call runs in: prepared in the executor, applied by the kernel.
//!
//! [`Sandbox::new`] probes the kernel and compiles the seccomp policy once, refusing to
//! start where the sandbox cannot be enforced (unless `insecure_no_sandbox`).
//! [`Sandbox::prepare`] makes one call's scratch dir, user, Landlock ruleset, environment
//! and command (`prepare.rs`, one step each); [`spawn::Launch::spawn`] starts it, and [`child::ChildSetup`] applies the
//! rest between clone and exec. A network call ([`Sandbox::call_network`]) gets a network
//! namespace of its own ([`netns`]), the network variant of the seccomp filters and the
//! proxy environment.

pub mod child;
pub mod child_process;
mod config;
pub mod env;
pub mod guard;
pub mod landlock;
mod launch_spec;
pub mod limits;
pub mod memcg;
pub mod mntns;
pub mod netns;
pub mod orphans;
mod prepare;
pub mod probe;
pub mod reaper;
pub mod remove_tree;
pub mod room;
pub mod scratch;
pub mod scratch_mount;
pub mod seccomp;
pub mod slots;
pub mod spawn;
pub mod spawner;
pub mod terminal;
pub use launch_spec::{write_args_file, ArgsFile, LaunchSpec, ARGS_FILE_NAME, WORK_DIR};
pub mod trust;

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

pub use self::child_process::SandboxChild;
pub use self::config::{SandboxConfig, SandboxError};
pub use self::guard::{CallGuard, FinishTimings, PrepareTimings};
use self::memcg::MemoryCgroups;
use self::netns::CallNetwork;
pub use self::orphans::run_adopting_orphans;
use self::probe::KernelSupport;
use self::reaper::{Releaser, UserPool};
use self::seccomp::ToolFilters;
use self::slots::ReadySlots;
pub use self::spawn::{ChildStdio, Launch};
use self::spawner::Spawner;
use crate::blobs::BlobCache;

/// Default most calls in flight (and size of the per-call user pool).
pub const DEFAULT_MAX_CONCURRENT_CALLS: usize = 16;

/// Default most prestarted processes over all tools.
pub const DEFAULT_MAX_PRESTARTED: usize = 16;

/// User ids with scratch dirs a long-running executor keeps made ahead of calls.
pub const DEFAULT_READY_SLOTS: usize = 2;

/// Waits until every ended call is released (its processes killed, its user id unlocked)
/// and every scratch dir removed: a one-shot executor calls this before it exits.
pub fn wait_idle() {
    Releaser::global().wait_idle();
    remove_tree::Sweeper::global().wait_idle();
}

/// The sandbox of an executor: kernel support, the compiled seccomp policy, the user pool.
/// Cloning is cheap and shares the policy and the pool.
#[derive(Debug, Clone)]
pub struct Sandbox {
    config: SandboxConfig,
    kernel: KernelSupport,
    filters: Option<Arc<ToolFilters>>,
    /// Threads with the filters installed that sandboxed tools are cloned from.
    spawner: Option<Arc<Spawner>>,
    /// The filters of a network call (`tool_network_allow`), installed by the process.
    network_filters: Option<Arc<ToolFilters>>,
    /// The filters of a call with UNIX sockets (the network list plus `AF_UNIX`).
    unix_filters: Option<Arc<ToolFilters>>,
    /// Threads without filters that network calls are cloned from, started with the first
    /// network call (an executor that never runs one keeps no descriptors for them).
    network_spawner: Arc<OnceLock<Option<Spawner>>>,
    runtime_rules: Arc<landlock::RuntimeRules>,
    node_runner: PathBuf,
    cap_last: u32,
    /// Tools start a session of their own ([`terminal::tools_need_own_session`]).
    new_session: bool,
    users: Option<Arc<UserPool>>,
    slots: Option<Arc<ReadySlots>>,
    /// Skill folders found reachable by the call users ([`Sandbox::reachable_by_others`]).
    reachable: Arc<Mutex<HashSet<PathBuf>>>,
    /// Context files by digest, for calls made in a context.
    blobs: Arc<BlobCache>,
    /// The executor's cgroup subtree, where each call gets a memory cgroup of its own;
    /// `None`: rlimits limit memory ([`limits`]).
    memcg: Option<Arc<MemoryCgroups>>,
}

/// The runner for JavaScript skills, written next to the scratch dirs at startup.
const NODE_RUNNER: &str = include_str!("../node_runner.mjs");

/// One call, ready to spawn.
#[derive(Debug)]
pub struct PreparedCall {
    /// The command and the child's setup; [`Launch::spawn`] starts it with stdio piped.
    pub launch: Launch,
    /// What ends the call.
    pub guard: CallGuard,
    /// How long each step of `prepare` took.
    pub timings: PrepareTimings,
}

/// Spawner threads without filters for network calls (a network call's spawn is a small
/// share of its cost; [`SPAWNER_THREADS`](spawner::SPAWNER_THREADS) serve the rest).
pub const NETWORK_SPAWNER_THREADS: usize = 2;

impl Sandbox {
    /// Probes the kernel and compiles the policy; fails closed.
    pub fn new(config: SandboxConfig) -> Result<Self, SandboxError> {
        let mut kernel = probe::probe();
        if !config.memory_cgroups {
            kernel.memory_limit = memcg::MemoryMode::Rlimit;
        }
        let memcg = memory_cgroups(&mut kernel);
        let filters = if config.insecure_no_sandbox {
            tracing::error!(
                "INSECURE: --insecure-no-sandbox is set; tools run WITHOUT Landlock and seccomp"
            );
            None
        } else {
            if !kernel.is_enforceable() {
                return Err(SandboxError::Unenforceable {
                    problems: kernel.problems(),
                });
            }
            Some(Arc::new(seccomp::compile()?))
        };
        let network_filters = match filters {
            Some(_) => Some(Arc::new(seccomp::compile_network()?)),
            None => None,
        };
        let unix_filters = match filters {
            Some(_) => Some(Arc::new(seccomp::compile_unix()?)),
            None => None,
        };
        let users = if kernel.user_switch {
            let lock_dir = config.uid_lock_dir.clone();
            Some(
                UserPool::new(config.uid_base, config.user_ids(), lock_dir).map_err(|source| {
                    SandboxError::Scratch {
                        root: config.scratch_root.clone(),
                        source,
                    }
                })?,
            )
        } else {
            None
        };
        if let Some(pool) = &users {
            pool.sweep();
        }
        remove_stale_scratch(&config.scratch_root);
        let node_runner =
            install_runner(&config.scratch_root).map_err(|source| SandboxError::Scratch {
                root: config.scratch_root.clone(),
                source,
            })?;
        let blobs =
            BlobCache::new(&config.scratch_root, config.blob_cache_bytes).map_err(|source| {
                SandboxError::Scratch {
                    root: config.scratch_root.clone(),
                    source,
                }
            })?;
        if filters.is_some() {
            kernel.probe_unix_sockets(&config.scratch_root);
        }
        let mut runtime_paths = landlock::runtime_paths();
        runtime_paths.extend(node_runner.parent().map(Path::to_path_buf));
        let runtime_rules = Arc::new(landlock::RuntimeRules::open(&runtime_paths)?);
        let spawner = match &filters {
            Some(filters) => Some(Arc::new(
                Spawner::start(filters, spawner::SPAWNER_THREADS).map_err(SandboxError::Spawn)?,
            )),
            None => None,
        };
        Ok(Self {
            spawner,
            network_filters,
            unix_filters,
            network_spawner: Arc::default(),
            runtime_rules,
            node_runner,
            cap_last: child::cap_last(),
            new_session: terminal::tools_need_own_session(),
            users,
            slots: None,
            reachable: Arc::default(),
            blobs: Arc::new(blobs),
            memcg,
            kernel,
            filters,
            config,
        })
    }

    /// Keeps `n` user ids with their scratch dirs made ahead of calls, on a thread of
    /// their own (a long-running executor; 0 turns it off). Each goes to one call only.
    pub fn keep_ready(&mut self, n: usize) {
        if let Some(old) = self.slots.take() {
            old.stop();
        }
        if n > 0 {
            // Under the sandbox each slot's Landlock ruleset is begun ahead too.
            let rules = self
                .filters
                .is_some()
                .then(|| Arc::clone(&self.runtime_rules));
            self.slots = Some(ReadySlots::start(
                n,
                self.users.clone(),
                self.config.scratch_root.clone(),
                rules,
            ));
        }
    }

    /// Releases the user ids and scratch dirs made ahead (the executor is stopping).
    pub fn stop_ready(&self) {
        if let Some(slots) = &self.slots {
            slots.stop();
        }
    }

    /// Starts a prepared launch with stdio piped: a sandboxed one from a spawner thread
    /// carrying the seccomp filters (`spawner`), tied to the calling thread's runtime.
    pub fn spawn(&self, launch: Launch) -> std::io::Result<SandboxChild> {
        match self.spawner_for(&launch) {
            Some(spawner) => spawner.spawn(launch),
            None => launch.spawn(),
        }
    }

    /// [`Sandbox::spawn`] for a task: the runtime's worker runs other tasks meanwhile.
    pub async fn spawn_async(&self, launch: Launch) -> std::io::Result<SandboxChild> {
        match self.spawner_for(&launch) {
            Some(spawner) => spawner.spawn_async(launch).await,
            None => launch.spawn(),
        }
    }

    /// The threads `launch` starts from: the filtered spawners for a launch that inherits
    /// its filters, the unfiltered ones for a network call's (it joins its namespace, then
    /// installs its filters), none (the calling thread) otherwise.
    fn spawner_for(&self, launch: &Launch) -> Option<&Spawner> {
        if launch.inherits_seccomp() {
            self.spawner.as_deref()
        } else if launch.joins_namespace() {
            let threads = self.network_spawner.get_or_init(|| {
                Spawner::start_unfiltered(NETWORK_SPAWNER_THREADS)
                    .inspect_err(|e| tracing::warn!(error = %e, "no spawner threads for network calls; they start from the calling thread"))
                    .ok()
            });
            threads.as_ref()
        } else {
            None
        }
    }

    /// A network namespace for one network call ([`netns::create_async`]); `None` where
    /// this executor cannot make them (a container without CAP_SYS_ADMIN and
    /// CAP_NET_ADMIN): the call then runs as any other, `socket()` denied, so its programs
    /// get no network at all (closed), while the `fetch` capability, done by the core,
    /// still works. `health` and `skillbox-executor probe` say so.
    pub async fn call_network(
        &self,
        proxy: netns::Proxy,
        ports: &[u16],
    ) -> Result<Option<CallNetwork>, SandboxError> {
        if !self.kernel.network_namespaces {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::warn!("{}", SandboxError::NoNetworkNamespaces);
            });
            return Ok(None);
        }
        netns::create_async(proxy, ports)
            .await
            .map(Some)
            .map_err(SandboxError::Network)
    }

    /// What the kernel enforces.
    pub fn kernel(&self) -> &KernelSupport {
        &self.kernel
    }

    /// Where the JavaScript runner is.
    pub fn node_runner(&self) -> &Path {
        &self.node_runner
    }

    /// The settings.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// The cache of context files.
    pub fn blobs(&self) -> &BlobCache {
        &self.blobs
    }
}

/// The executor's memory cgroup subtree where `kernel` says one can be had; records in
/// `kernel` the mode in force (rlimits when making it failed, with a warning).
fn memory_cgroups(kernel: &mut KernelSupport) -> Option<Arc<MemoryCgroups>> {
    if kernel.memory_limit == memcg::MemoryMode::Rlimit {
        return None;
    }
    match MemoryCgroups::start() {
        Ok(memcg) => {
            kernel.memory_limit = memcg.mode();
            Some(Arc::new(memcg))
        }
        Err(e) => {
            tracing::warn!(error = %e, "no memory cgroup per call; memory is limited by rlimits (docs/sandbox.md, \"Memory\")");
            kernel.memory_limit = memcg::MemoryMode::Rlimit;
            None
        }
    }
}

/// Empties this process's capability bounding set, when it may (`CAP_SETPCAP`). The
/// executor starts nothing that should gain a capability at exec, and each tool's process
/// then finds its bounding set already empty instead of dropping every capability itself
/// (a credentials commit each). The executor's own effective and permitted sets are
/// untouched. For the executor binary only: a test process that starts `skillbox up`
/// afterwards would start it without capabilities.
pub fn drop_own_bounding_set() {
    if let Err(e) = caps::clear(None, caps::CapSet::Bounding) {
        tracing::debug!(error = %e, "bounding set kept; each tool's process drops it");
    }
}

/// Removes scratch dirs left by executors that are gone (`call-<pid>-<n>` of a dead pid),
/// in the scratch root and in its trash.
fn remove_stale_scratch(scratch_root: &Path) {
    remove_stale_calls(scratch_root);
    remove_stale_calls(&scratch_root.join(scratch::TRASH_DIR));
}

fn remove_stale_calls(folder: &Path) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("call-")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            remove_tree::Sweeper::global().remove(e.path());
        }
    }
}

/// Writes the JavaScript runner to `<scratch_root>/.runtime/` (0755 dir, 0644 file).
fn install_runner(scratch_root: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = scratch_root.join(".runtime");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(&dir)?;
    std::fs::set_permissions(scratch_root, std::fs::Permissions::from_mode(0o711))?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    let path = dir.join("node_runner.mjs");
    let tmp = dir.join(format!(".node_runner.{}.tmp", std::process::id()));
    std::fs::write(&tmp, NODE_RUNNER)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644))?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}
