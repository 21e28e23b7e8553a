//! Why a core could not start: one variant per step of [`super::App::build`], each with
//! what the operator needs to act on it.

use std::path::PathBuf;

/// A step of building or starting the core failed.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The egress proxy's certificates (its CA, `[egress] extra_roots`) could not be set up.
    #[error("egress proxy: {0}")]
    Egress(String),
    /// The SIGHUP handler (reload on hangup) could not be installed.
    #[error("installing the SIGHUP handler: {0}")]
    Hangup(std::io::Error),
    /// The state folder could not be made.
    #[error("making the state folder {path}: {source}")]
    StateDir {
        /// The folder.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// `skillbox.toml` is not valid.
    #[error(transparent)]
    Config(#[from] crate::state::config::ConfigError),
    /// A skills root cannot be used.
    #[error(transparent)]
    Roots(#[from] crate::skills::roots::RootsError),
    /// `[executor] pki_dir` with `up` or `pki_export`.
    #[error("[executor] pki_dir is for `skillbox serve` with executors that get their own files (orchestrator secrets); `up` and [executor] pki_export need the PKI the core makes in its state: remove pki_dir, or remove pki_export and use `skillbox serve`")]
    PkiDirConflict,
    /// The PKI, the API token or the gateway address file could not be made or read.
    #[error(transparent)]
    Pki(#[from] crate::state::pki::PkiError),
    /// The state database could not be opened.
    #[error(transparent)]
    Store(#[from] crate::state::store::StoreError),
    /// `secrets.env` could not be read.
    #[error("reading {path}: {source}")]
    Secrets {
        /// The state folder.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The bot tokens could not be read.
    #[error(transparent)]
    Tokens(#[from] crate::auth::TokenError),
    /// A listener could not be bound.
    #[error("binding the {what} {addr}: {source}; {hint}")]
    Bind {
        /// Which listener.
        what: &'static str,
        /// The address.
        addr: String,
        /// What to change.
        hint: &'static str,
        /// Cause.
        source: std::io::Error,
    },
    /// `serve` without an executor address.
    #[error(
        "`skillbox serve` needs [executor] url in skillbox.toml (the executor's https://host:port)"
    )]
    NoExecutorUrl,
    /// An executor address is not valid.
    #[error(transparent)]
    ExecutorUrl(#[from] crate::executors::pool::UrlError),
    /// The signing keys' folder could not be opened.
    #[error(transparent)]
    Signer(#[from] crate::proxy::sign::SignError),
    /// The channel's TLS files could not be read.
    #[error(transparent)]
    Tls(#[from] skillbox_channel::tls::TlsError),
    /// The Docker engine named in `[docker] socket` could not be reached.
    #[error(transparent)]
    Docker(#[from] crate::executors::docker::DockerError),
    /// The executor binary was not found.
    #[error("skillbox-executor not found next to {beside}; build it (cargo build -p skillbox-executor) or set [executor] binary")]
    ExecutorBinary {
        /// The `skillbox` binary it was looked for beside.
        beside: PathBuf,
    },
    /// No executor answered in time.
    #[error("no executor at {at} answered within {waited:?} ({why})")]
    NoExecutor {
        /// The executors' addresses.
        at: String,
        /// How long `up` waited.
        waited: std::time::Duration,
        /// What each said.
        why: String,
    },
    /// A start-up task panicked or was cancelled.
    #[error("a start-up step failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}
