//! Reloading a running core: read `secrets.env` again, rediscover the skills, re-verify
//! every installed skill against the trust store as it is on disk now (one that no longer
//! verifies is disabled with the reason: the kill list of
//! [`crate::skills::install::disabled`]), swap the catalog and have the executor reload its
//! registry.
//!
//! One [`Reloader`] serves every trigger: `POST /v1/skills/reload`, `POST /v1/trust/reload`,
//! an install or removal through the gateway, SIGHUP ([`on_hangup`]) and a change in
//! `<state>/trust/` ([`watch_trust`], a 1 s poll of names, sizes, inodes and times: the
//! folder holds a handful of small files, so no file-watch dependency is needed). Reloads run
//! one at a time, so the last one to finish reflects the disk as it was when it started.
//! Calls in flight are never dropped: they keep the catalog (core) and the registry
//! (executor) they started with.

pub mod watch;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::{json, Value};
use skillbox_channel::client::ClientError;
use skillbox_protocol::methods::method;
use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::skill::{discover, DiscoveryOptions};

use crate::calls::LoadCell;
use crate::executors::ExecutorPool;
use crate::skills::install::{self, verify, TrustPolicy};
use crate::skills::stamp::InstalledStamps;
use crate::state::config::Config;
use crate::state::secrets::Secrets;

/// How long a reload waits for the executor to reload its registry (it hashes every
/// installed skill again).
pub const EXECUTOR_RELOAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How often [`watch_trust`] looks at the trust folder.
pub const TRUST_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// What asked for a reload (logged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// `POST /v1/skills/reload` or `POST /v1/trust/reload`.
    Request,
    /// A skill was installed through the gateway.
    Install,
    /// A skill was removed through the gateway.
    Remove,
    /// SIGHUP.
    Hangup,
    /// The trust folder changed on disk.
    TrustChanged,
    /// A repair was applied to a skill through the gateway.
    Repair,
    /// A file under the skills root changed ([`crate::reload::watch`]).
    SkillsChanged,
}

/// What a reload found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReloadReport {
    /// Skills the core offers now.
    pub loaded: usize,
    /// Why each skipped folder was skipped (disabled skills included).
    pub skipped: Vec<String>,
    /// Skills the trust policy disabled (the kill list).
    pub disabled: Vec<String>,
    /// The executor's answer to `skill.reload`.
    pub executor: Value,
}

/// Why a reload did not complete.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The re-verification task did not finish (the previous catalog is kept).
    #[error("re-verifying the skills stopped unexpectedly ({0}); the previous catalog is kept, retry the reload")]
    Verify(tokio::task::JoinError),
    /// The executor did not reload (the core's catalog is already the new one).
    #[error("the executor did not reload: {0}; the core already applies the new catalog, retry the reload once the executor is back")]
    Executor(ClientError),
}

impl ReloadError {
    /// The contract `error_kind` of the failure.
    pub fn error_kind(&self) -> ErrorKind {
        ErrorKind::Unavailable
    }
}

/// What a reload changes: the load it swaps, the secrets it reads again, the executors
/// it has reload their registries.
#[derive(Debug, Clone)]
pub struct ReloadParts {
    /// The current load of the skills.
    pub load: Arc<LoadCell>,
    /// The core's secrets (shared: a reload is seen by every holder).
    pub secrets: Secrets,
    /// The executors.
    pub executors: Arc<ExecutorPool>,
    /// The dependency builder, which builds the dependencies a new load is missing.
    pub deps: Option<Arc<crate::deps::DepsBuilder>>,
}

/// Reloads skills and trust for one core, one reload at a time.
#[derive(Debug)]
pub struct Reloader {
    parts: ReloadParts,
    policy: TrustPolicy,
    serial: tokio::sync::Mutex<()>,
}

impl Reloader {
    /// A reloader of `parts` under `policy`.
    pub fn new(parts: ReloadParts, policy: TrustPolicy) -> Self {
        Self {
            parts,
            policy,
            serial: tokio::sync::Mutex::new(()),
        }
    }

    /// The trust policy reloads apply.
    pub fn policy(&self) -> &TrustPolicy {
        &self.policy
    }

    /// Rediscovers, re-verifies, swaps the catalog, reloads the executor.
    pub async fn reload(&self, cause: Cause) -> Result<ReloadReport, ReloadError> {
        let _one_at_a_time = self.serial.lock().await;
        let policy = self.policy.clone();
        let secrets = self.parts.secrets.clone();
        let (catalog, stamps, disabled, config) = tokio::task::spawn_blocking(move || {
            // `secrets.env` is read again too, before the catalogue whose availability
            // depends on the names it holds is swapped in; its values are never logged.
            if let Some(ws) = policy.skills_root.parent() {
                let state = crate::state::Workspace::new(ws).state_dir();
                match secrets.reload(&state) {
                    Ok(names) => tracing::info!(names, "secrets.env reloaded"),
                    Err(e) => tracing::warn!(error = %e, "secrets.env does not read; keeping the secrets of the previous load"),
                }
            }
            let mut catalog = discover(&policy.roots, DiscoveryOptions::default());
            // Stamped before hashing: a change while the files are hashed is seen too.
            let stamps = InstalledStamps::read(&catalog, &policy);
            let disabled = verify::enforce(&mut catalog, &policy, SystemTime::now());
            // The configuration is read here, once per load, and swapped with the
            // catalogue; a file that no longer parses keeps the previous configuration.
            let config = policy.skills_root.parent().and_then(|ws| {
                Config::load(ws)
                    .map_err(|e| {
                        tracing::warn!(error = %e, "skillbox.toml does not load; keeping the configuration of the previous load");
                    })
                    .ok()
            });
            (catalog, stamps, disabled, config)
        })
        .await
        .map_err(ReloadError::Verify)?;
        let loaded = catalog.skills.len();
        let skipped: Vec<String> = (catalog.skipped.iter().map(|s| s.reason()))
            .chain(catalog.withheld.iter().map(install::disabled::report_line))
            .collect();
        self.parts.load.swap(catalog, config, stamps);
        tracing::info!(?cause, loaded, disabled = ?disabled, "skills and trust reloaded");
        let executor = self
            .parts
            .executors
            .broadcast(method::SKILL_RELOAD, json!({}), EXECUTOR_RELOAD_TIMEOUT)
            .await
            .map_err(ReloadError::Executor)?;
        if let Some(deps) = &self.parts.deps {
            deps.build_missing();
        }
        Ok(ReloadReport {
            loaded,
            skipped,
            disabled,
            executor,
        })
    }

    /// Reloads and logs the outcome (for triggers nobody answers: signals, the watch).
    pub async fn reload_logged(&self, cause: Cause) {
        match self.reload(cause).await {
            Ok(r) if r.disabled.is_empty() => {}
            Ok(r) => {
                tracing::warn!(?cause, disabled = ?r.disabled, "skills disabled by the trust policy")
            }
            Err(e) => tracing::error!(?cause, error = %e, "reload failed"),
        }
    }
}

/// Reloads on every SIGHUP until the task is dropped. `hangup` must be created at start-up,
/// before anyone could send one: the default action of SIGHUP ends the process. Signals that
/// arrive during a reload are folded into one more reload.
pub async fn on_hangup(mut hangup: tokio::signal::unix::Signal, reloader: Arc<Reloader>) {
    while hangup.recv().await.is_some() {
        reloader.reload_logged(Cause::Hangup).await;
    }
}

/// Reloads when the trust folder changed and then held still for one more `interval`
/// (so a `certs rotate-root` writing several files causes one reload), until dropped.
pub async fn watch_trust(reloader: Arc<Reloader>, interval: Duration) {
    let dir = reloader.policy().trust_dir.clone();
    let mut debounce = Debounce::new(stamp_blocking(&dir).await);
    loop {
        tokio::time::sleep(interval).await;
        if debounce.observe(stamp_blocking(&dir).await) {
            reloader.reload_logged(Cause::TrustChanged).await;
        }
    }
}

async fn stamp_blocking(dir: &Path) -> TrustStamp {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || TrustStamp::read(&dir))
        .await
        .unwrap_or_default()
}

/// What [`watch_trust`] compares: every entry of the trust folder and of its subfolders
/// (`roots/`, `rotations/`) with its size, inode and modification and change times. Files
/// are replaced by rename, which changes the inode; an edit in place changes the times.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustStamp(Vec<(PathBuf, u64, u64, i64, i64, i64, i64)>);

impl TrustStamp {
    /// Reads the stamp of `dir` (empty when it does not exist).
    pub fn read(dir: &Path) -> Self {
        let mut out = Vec::new();
        collect(dir, Path::new(""), 0, &mut out);
        out.sort();
        Self(out)
    }
}

fn collect(
    dir: &Path,
    rel: &Path,
    depth: usize,
    out: &mut Vec<(PathBuf, u64, u64, i64, i64, i64, i64)>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = rel.join(entry.file_name());
        let Ok(m) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        out.push((
            name.clone(),
            m.len(),
            m.ino(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        ));
        if m.is_dir() && depth == 0 {
            collect(&path, &name, depth + 1, out);
        }
    }
}

/// Acts on a change once it held still for one observation.
#[derive(Debug)]
struct Debounce<T> {
    seen: T,
    pending: Option<T>,
}

impl<T: PartialEq> Debounce<T> {
    fn new(seen: T) -> Self {
        Self {
            seen,
            pending: None,
        }
    }

    /// Feeds one observation; true when it differs from the last one acted on and equals
    /// the one before it.
    fn observe(&mut self, now: T) -> bool {
        if now == self.seen {
            self.pending = None;
            return false;
        }
        if self.pending.as_ref() == Some(&now) {
            self.seen = now;
            self.pending = None;
            return true;
        }
        self.pending = Some(now);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reload_reads_the_config_once_and_keeps_the_last_good_one() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("skills")).unwrap();
        let core = crate::gateway::test_parts(crate::calls::test_dispatcher(
            ws.path(),
            skillbox_protocol::skill::Catalog::default(),
        ));
        let reloader = Reloader::new(
            core.reload_parts(),
            TrustPolicy::for_workspace(&crate::state::Workspace::new(ws.path()), false),
        );
        let toml = ws.path().join("skillbox.toml");
        std::fs::write(&toml, "[routing]\nthreshold = 0.42\n").unwrap();
        // No executor answers, so the reload reports an error after the swap.
        let _ = reloader.reload(Cause::Request).await;
        assert_eq!(core.load.config().routing.threshold, 0.42);
        // A request in between reads nothing: the swapped config is what every request sees.
        std::fs::write(&toml, "[routing]\nthreshold = 0.5\n").unwrap();
        assert_eq!(core.load.config().routing.threshold, 0.42);
        // A file that no longer parses keeps the last good configuration.
        std::fs::write(&toml, "[routing\nthreshold = \n").unwrap();
        let _ = reloader.reload(Cause::Request).await;
        assert_eq!(core.load.config().routing.threshold, 0.42);
    }

    #[test]
    fn debounce_fires_once_a_change_holds_still() {
        let mut d = Debounce::new(1);
        assert!(!d.observe(1));
        assert!(!d.observe(2), "a fresh change waits one interval");
        assert!(!d.observe(3), "still changing");
        assert!(d.observe(3), "held still: act");
        assert!(!d.observe(3), "acted on already");
        assert!(!d.observe(4));
        assert!(!d.observe(3), "back to what was acted on: nothing to do");
        assert!(!d.observe(3));
    }

    #[test]
    fn trust_stamp_changes_on_added_replaced_and_removed_files() {
        let dir = tempfile::tempdir().unwrap();
        let trust = dir.path().join("trust");
        let empty = TrustStamp::read(&trust);
        assert_eq!(empty, TrustStamp::default(), "a missing folder is empty");

        std::fs::create_dir_all(trust.join("roots")).unwrap();
        std::fs::write(trust.join("roots/a.pem"), "A").unwrap();
        let one = TrustStamp::read(&trust);
        assert_ne!(one, empty);
        assert_eq!(
            TrustStamp::read(&trust),
            one,
            "stable while nothing changes"
        );

        // Replaced by rename (as every writer in skillbox-certs does): new inode.
        std::fs::write(trust.join(".tmp"), "{}").unwrap();
        std::fs::rename(trust.join(".tmp"), trust.join("revoked.json")).unwrap();
        let two = TrustStamp::read(&trust);
        assert_ne!(two, one);
        std::fs::write(trust.join(".tmp"), "{}").unwrap();
        std::fs::rename(trust.join(".tmp"), trust.join("revoked.json")).unwrap();
        assert_ne!(TrustStamp::read(&trust), two, "same bytes, new file");

        std::fs::remove_file(trust.join("roots/a.pem")).unwrap();
        assert!(!TrustStamp::read(&trust)
            .0
            .iter()
            .any(|e| e.0 == Path::new("roots/a.pem")));
    }
}
