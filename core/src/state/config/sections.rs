//! The smaller sections of `skillbox.toml`, each with its defaults: `[mcp]`, `[trust]`,
//! `[executor]`, `[docker]` and `[read_file]` (the larger ones have a file each beside
//! this one).

use serde::{Deserialize, Serialize};

/// `[mcp]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpSection {
    /// Browser origins (`scheme://host[:port]`, compared exactly) whose requests to
    /// `POST /mcp` are served; a request with any other `Origin` is refused (403). A
    /// request without `Origin` (a non-browser client) is always fine. Default: none.
    pub allowed_origins: Vec<String>,
    /// Largest context file `resources/read` returns (default 4 MiB); a larger one is
    /// fetched with `GET /v1/contexts/{id}/files/{path}`.
    pub max_resource_bytes: usize,
}

impl Default for McpSection {
    fn default() -> Self {
        Self {
            allowed_origins: Vec::new(),
            max_resource_bytes: 4 * 1024 * 1024,
        }
    }
}

/// `[trust]`
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrustSection {
    /// Refuse unsigned skills (install and load); off by default.
    pub require_signed: bool,
}

/// `[executor]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecutorConfig {
    /// The executor's URL for `skillbox serve`.
    pub url: String,
    /// More executor URLs for `skillbox serve`.
    pub urls: Vec<String>,
    /// Pause between health rounds over the executors.
    pub health_interval_ms: u64,
    /// Where `up` makes its executor listen; empty: [`ExecutorConfig::executor_listen`].
    pub listen: String,
    /// The core's callback listener; empty: [`ExecutorConfig::callback_listen_for`].
    pub callback_listen: String,
    /// The callback URL given to the executor.
    pub callback_url: String,
    /// Longest round trip of a call.
    pub call_timeout_ms: u64,
    /// Calls the executor runs at once.
    pub max_concurrent: usize,
    /// `up`: MiB of the private tmpfs the executor puts its scratch root on; 0: on disk.
    pub scratch_tmpfs_mb: u64,
    /// `up`: most MiB of context files the executor keeps between calls (its blob cache,
    /// and as much again in kept work folders); 0: its default (512, or a quarter of the
    /// scratch tmpfs when that is less).
    pub blob_cache_mb: u64,
    /// Executor binary for `up`.
    pub binary: String,
    /// A folder the executor's TLS files are copied to on start (containers); empty: none.
    pub pki_export: String,
    /// `serve`: the folder holding the core's channel files (CA certificate, its own
    /// certificate and key), e.g. orchestrator secrets; empty: `<state>/pki`, made on start.
    pub pki_dir: String,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            urls: Vec::new(),
            health_interval_ms: 2_000,
            listen: String::new(),
            callback_listen: String::new(),
            callback_url: String::new(),
            call_timeout_ms: 300_000,
            max_concurrent: 16,
            scratch_tmpfs_mb: DEFAULT_SCRATCH_TMPFS_MB,
            blob_cache_mb: 0,
            binary: String::new(),
            pki_export: String::new(),
            pki_dir: String::new(),
        }
    }
}

/// MiB of the embedded executor's scratch tmpfs: what all calls at once may write.
pub const DEFAULT_SCRATCH_TMPFS_MB: u64 = 512;

/// The callback listener of `serve` when `[executor] callback_listen` is unset: a fixed port,
/// since an executor started elsewhere is told `--core-url` by hand.
pub const SERVE_CALLBACK_LISTEN: &str = "127.0.0.1:7072";

/// Any free port on the loopback interface.
const ANY_LOOPBACK_PORT: &str = "127.0.0.1:0";

impl ExecutorConfig {
    /// The range each of its limits allows ([`super::KeyRange`]).
    pub(crate) fn ranges(&self) -> Vec<super::KeyRange> {
        vec![
            (
                "executor.scratch_tmpfs_mb",
                self.scratch_tmpfs_mb as f64,
                0.0,
                1_048_576.0,
            ),
            (
                "executor.blob_cache_mb",
                self.blob_cache_mb as f64,
                0.0,
                1_048_576.0,
            ),
            (
                "executor.health_interval_ms",
                self.health_interval_ms as f64,
                100.0,
                600_000.0,
            ),
        ]
    }

    /// Where `up` makes its executor listen: `listen`, else a free loopback port (port 0 is
    /// replaced by the port the system picks), so a second `up` does not collide.
    pub fn executor_listen(&self) -> &str {
        if self.listen.is_empty() {
            ANY_LOOPBACK_PORT
        } else {
            &self.listen
        }
    }

    /// The core's callback listener: `callback_listen`, else a free loopback port for `up`
    /// (`embedded`: the core tells its own executor the port) and
    /// [`SERVE_CALLBACK_LISTEN`] for `serve`.
    pub fn callback_listen_for(&self, embedded: bool) -> &str {
        match (self.callback_listen.is_empty(), embedded) {
            (false, _) => &self.callback_listen,
            (true, true) => ANY_LOOPBACK_PORT,
            (true, false) => SERVE_CALLBACK_LISTEN,
        }
    }
}

/// `[docker]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DockerSection {
    /// `auto`, `off` or a socket path.
    pub socket: String,
    /// Supervise the executor containers.
    pub supervise: bool,
    /// Compose project of the executor containers; empty: the core container's own.
    pub project: String,
    /// Compose service of the executor containers.
    pub service: String,
    /// Restart an executor unhealthy this long.
    pub restart_after_ms: u64,
    /// Pause between supervisor rounds.
    pub interval_ms: u64,
    /// Image of per-call containers.
    pub executor_image: String,
    /// The skills root as the engine's host sees it; empty: found.
    pub skills_host_dir: String,
    /// Memory added to a skill's `memory_mb` for the executor in a per-call container.
    pub container_memory_overhead_mb: u64,
    /// Pids limit of a per-call container.
    pub container_pids: i64,
    /// CPU limit of a per-call container.
    pub container_cpus: f64,
    /// Per-call containers at once.
    pub max_containers: usize,
}

impl Default for DockerSection {
    fn default() -> Self {
        Self {
            socket: "auto".into(),
            supervise: true,
            project: String::new(),
            service: "executor".into(),
            restart_after_ms: 10_000,
            interval_ms: 3_000,
            executor_image: "skillbox-executor:latest".into(),
            skills_host_dir: String::new(),
            container_memory_overhead_mb: 64,
            container_pids: 128,
            container_cpus: 1.0,
            max_containers: 8,
        }
    }
}

/// `[read_file]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReadFileSection {
    /// Largest file.
    pub max_bytes: u64,
}

impl Default for ReadFileSection {
    fn default() -> Self {
        Self {
            max_bytes: 1024 * 1024,
        }
    }
}

impl DockerSection {
    /// The range each of its limits allows ([`super::KeyRange`]).
    pub(crate) fn ranges(&self) -> Vec<super::KeyRange> {
        vec![
            (
                "docker.restart_after_ms",
                self.restart_after_ms as f64,
                1_000.0,
                3_600_000.0,
            ),
            (
                "docker.interval_ms",
                self.interval_ms as f64,
                200.0,
                600_000.0,
            ),
            (
                "docker.container_pids",
                self.container_pids as f64,
                16.0,
                65_536.0,
            ),
            ("docker.container_cpus", self.container_cpus, 0.01, 256.0),
            (
                "docker.max_containers",
                self.max_containers as f64,
                1.0,
                1024.0,
            ),
            (
                "docker.container_memory_overhead_mb",
                self.container_memory_overhead_mb as f64,
                16.0,
                65_536.0,
            ),
        ]
    }
}
