//! The executor child of `skillbox up`: started with the roots, its listen address, the
//! PKI and the core's callback URL, and started again whenever it exits, with a growing
//! pause. It gets no environment from the core (it holds no secrets).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use super::AppError;

/// How to start the executor child.
#[derive(Debug, Clone)]
pub struct ExecutorSpec {
    /// The `skillbox-executor` binary.
    pub binary: PathBuf,
    /// Every skills root, highest precedence first (one `--skills` each).
    pub skills: Vec<PathBuf>,
    /// `host:port` it listens on.
    pub listen: String,
    /// The PKI folder.
    pub pki: PathBuf,
    /// The core's callback URL.
    pub core_url: String,
    /// `--max-concurrent`.
    pub max_concurrent: usize,
    /// `--scratch-tmpfs-mb` (0: scratch on disk).
    pub scratch_tmpfs_mb: u64,
    /// `--blob-cache-mb` (0: the executor's default).
    pub blob_cache_mb: u64,
    /// `--insecure-no-sandbox`.
    pub insecure: bool,
    /// `[log] format = "json"`: the executor logs JSON lines too.
    pub log_json: bool,
}

/// The executor binary: `[executor] binary`, else `skillbox-executor` next to this binary.
pub fn executor_binary(configured: &str) -> Result<PathBuf, AppError> {
    if !configured.is_empty() {
        return Ok(PathBuf::from(configured));
    }
    let me = std::env::current_exe().map_err(|_| AppError::ExecutorBinary {
        beside: PathBuf::from("skillbox"),
    })?;
    let sibling = me.with_file_name("skillbox-executor");
    if sibling.is_file() {
        return Ok(sibling);
    }
    Err(AppError::ExecutorBinary { beside: me })
}

/// `host:port` with a concrete port: port 0 is replaced by a free one.
pub fn free_addr(listen: &str) -> Result<String, AppError> {
    let bind = |source| AppError::Bind {
        what: "executor listener",
        addr: listen.to_string(),
        hint: "set [executor] listen in skillbox.toml",
        source,
    };
    let l = std::net::TcpListener::bind(listen).map_err(bind)?;
    Ok(l.local_addr().map_err(bind)?.to_string())
}

/// Starts the executor and restarts it whenever it exits, with a growing pause.
pub async fn supervise(spec: ExecutorSpec) {
    let mut backoff = Duration::from_millis(200);
    loop {
        let mut cmd = tokio::process::Command::new(&spec.binary);
        cmd.arg("serve");
        for root in &spec.skills {
            cmd.arg("--skills").arg(root);
        }
        cmd.arg("--listen")
            .arg(&spec.listen)
            .arg("--pki")
            .arg(&spec.pki)
            .arg("--core-url")
            .arg(&spec.core_url)
            .arg("--max-concurrent")
            .arg(spec.max_concurrent.to_string())
            // The executor holds no secrets: it gets no environment from the core.
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .kill_on_drop(true);
        if spec.insecure {
            cmd.arg("--insecure-no-sandbox");
        }
        if spec.scratch_tmpfs_mb > 0 {
            cmd.arg("--scratch-tmpfs-mb")
                .arg(spec.scratch_tmpfs_mb.to_string());
        }
        if spec.blob_cache_mb > 0 {
            cmd.arg("--blob-cache-mb")
                .arg(spec.blob_cache_mb.to_string());
        }
        if spec.log_json {
            cmd.env("SKILLBOX_LOG_FORMAT", "json");
        }
        let started = tokio::time::Instant::now();
        match cmd.spawn() {
            Ok(mut child) => {
                tracing::info!(pid = child.id(), "executor started");
                let status = child.wait().await;
                tracing::warn!(?status, "executor exited; restarting");
            }
            Err(e) => {
                tracing::error!(binary = %spec.binary.display(), error = %e, "cannot start the executor")
            }
        }
        if started.elapsed() > Duration::from_secs(10) {
            backoff = Duration::from_millis(200);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
