//! Verified install of skill packages (docs/signing-runbook.md): from a folder or a `.tar.gz`, into a
//! private staging folder, checked, verified against the trust store, then renamed
//! atomically into the skills root and recorded in the install lock. A refusal removes the
//! staging folder and names the check that failed ([`InstallError::check`]).
//!
//! - [`sink`]: the rules every package entry passes (names, types, modes, caps).
//! - [`archive`] / [`folder`]: read a `.tar.gz` stream once / copy a folder, through the sink.
//! - [`staging`]: the private staging folder and the atomic swap into place.
//! - [`lock`]: the install lock file and the lock on the skills root.
//! - [`pack`]: deterministic `.tar.gz` packing (`skillbox skill pack`).
//! - [`verify`]: re-verification of installed skills (`skill verify --all`, reloads).
//! - [`disabled`]: the kill list, skills the trust policy disabled at the last reload.
//! - [`remove`]: removing an installed skill and its lock entry (`DELETE /v1/skills/{name}`).
//! - [`replace`]: what may replace an installed skill (rollback, same version, publisher).

pub mod archive;
pub mod disabled;
pub mod folder;
pub mod lock;
pub mod pack;
pub mod remove;
pub mod replace;
pub mod sink;
pub mod staging;
pub mod verify;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;
use skillbox_certs::trust::{TrustError, TrustStore, VerifyError};
use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::skill::validate::is_spec_skill_name;
use skillbox_protocol::skill::{
    load_skill, package_digest, DigestError, LoadOutcome, LockedSkill, SkillOrigin, Trust,
    SIGNATURE_FILE,
};

pub use lock::LockError;
pub use replace::PublisherChange;
pub use sink::{ExtractError, Limits};

use staging::Staging;

use crate::state::Workspace;

pub use crate::state::workspace::{CA_DIR, TRUST_DIR};

/// Where skills go and what they must satisfy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustPolicy {
    /// The skills root installs go to (`<workspace>/skills`).
    pub skills_root: PathBuf,
    /// Every root skills are discovered in, highest precedence first; holds `skills_root`
    /// (`[skills] roots`, [`crate::skills::roots`]).
    pub roots: Vec<PathBuf>,
    /// The trust store folder (`<state>/trust`).
    pub trust_dir: PathBuf,
    /// `[trust] require_signed`: refuse unsigned packages.
    pub require_signed: bool,
}

impl TrustPolicy {
    /// The policy of a workspace: `<ws>/skills`, `<ws>/.skillbox/trust`, and the config's
    /// flag.
    pub fn for_workspace(workspace: &Workspace, require_signed: bool) -> Self {
        let skills_root = workspace.skills_dir();
        Self {
            roots: vec![skills_root.clone()],
            skills_root,
            trust_dir: workspace.trust_dir(),
            require_signed,
        }
    }

    /// The same policy over these discovery roots (the install root is added last when
    /// missing, so installed skills are always found).
    pub fn with_roots(mut self, mut roots: Vec<PathBuf>) -> Self {
        if !roots.contains(&self.skills_root) {
            roots.push(self.skills_root.clone());
        }
        self.roots = roots;
        self
    }
}

/// Why an install was refused: one variant per step. Nothing is left behind.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The source does not exist or is neither a folder nor a file.
    #[error(
        "source {path}: {reason}; pass a skill folder or a .tar.gz made by `skillbox skill pack`"
    )]
    Source {
        /// The source.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The skills root could not be created or locked.
    #[error("skills root: {0}")]
    SkillsRoot(LockError),
    /// The staging folder could not be created.
    #[error("creating a staging folder in {path}: {source}")]
    Staging {
        /// The skills root.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// An archive entry or folder entry broke a rule.
    #[error(transparent)]
    Extract(#[from] ExtractError),
    /// The package holds no loadable skill, or its name or version is unusable.
    #[error("manifest: {reason}")]
    Manifest {
        /// What is wrong and what to do.
        reason: String,
    },
    /// The trust store could not be loaded.
    #[error("{0}")]
    TrustStore(TrustError),
    /// The signature, chain or digest did not verify.
    #[error(transparent)]
    Verify(VerifyError),
    /// The package is not signed and `[trust] require_signed = true`.
    #[error("unsigned: {name} has no {SIGNATURE_FILE} and [trust] require_signed = true; sign it with `skillbox certs sign` or ask its publisher for a signed package")]
    Unsigned {
        /// The skill.
        name: String,
    },
    /// The digest of an unsigned package could not be computed.
    #[error("{0}")]
    Digest(DigestError),
    /// An unsigned package would replace a signed one.
    #[error("trust_downgrade: the installed {name} is signed; an unsigned package cannot replace it (remove the skill first if you mean it)")]
    TrustDowngrade {
        /// The skill.
        name: String,
    },
    /// A package from another publisher would replace an installed signed skill.
    #[error("publisher: {name} is installed from publisher {installed}; this package comes from publisher {offered}; an installed signed skill is replaced only by a package from the same publisher (same developer key, or the same publisher name under the same root); if you mean to hand {name} to the new publisher, install again with `skillbox skill install --allow-publisher-change` (or \"allow_publisher_change\": true in POST /v1/skills/install)")]
    PublisherChange {
        /// The skill.
        name: String,
        /// The installed skill's publisher, key and root.
        installed: String,
        /// The package's publisher, key and root.
        offered: String,
    },
    /// A lower version than the installed one.
    #[error("rollback: {name} {offered} is older than the installed {installed}; install {installed} or newer")]
    Rollback {
        /// The skill.
        name: String,
        /// Installed version.
        installed: String,
        /// Offered version.
        offered: String,
    },
    /// The installed version again, with other contents.
    #[error("same_version: {name} {version} is installed with digest {installed}, this package has {offered}; a changed package needs a new version")]
    SameVersion {
        /// The skill.
        name: String,
        /// The version.
        version: String,
        /// Installed digest.
        installed: String,
        /// Offered digest.
        offered: String,
    },
    /// A folder of that name is in the skills root but was not installed by skillbox.
    #[error("unmanaged: {path} exists but is not in the install lock; move it out of the skills root first")]
    Unmanaged {
        /// The folder.
        path: PathBuf,
    },
    /// The install lock could not be read or written (the swap was undone).
    #[error("lock: {0}")]
    Lock(LockError),
    /// Moving the package into place failed (the previous version was kept).
    #[error("commit: moving the package to {path}: {source}")]
    Commit {
        /// The target.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

impl InstallError {
    /// The name of the check that refused the install.
    pub fn check(&self) -> &'static str {
        match self {
            InstallError::Source { .. } => "source",
            InstallError::SkillsRoot(_) => "skills_root",
            InstallError::Staging { .. } => "staging",
            InstallError::Extract(e) => e.check(),
            InstallError::Manifest { .. } => "manifest",
            InstallError::TrustStore(_) => "trust_store",
            InstallError::Verify(e) => e.check(),
            InstallError::Unsigned { .. } => "unsigned",
            InstallError::Digest(_) => "digest",
            InstallError::TrustDowngrade { .. } => "trust_downgrade",
            InstallError::PublisherChange { .. } => "publisher",
            InstallError::Rollback { .. } => "rollback",
            InstallError::SameVersion { .. } => "same_version",
            InstallError::Unmanaged { .. } => "unmanaged",
            InstallError::Lock(_) => "lock",
            InstallError::Commit { .. } => "commit",
        }
    }

    /// The contract `error_kind` of the refusal (the gateway's one mapping).
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            InstallError::Source { .. }
            | InstallError::Extract(_)
            | InstallError::Manifest { .. }
            | InstallError::Digest(_) => ErrorKind::InvalidArgs,
            InstallError::Verify(_)
            | InstallError::Unsigned { .. }
            | InstallError::TrustDowngrade { .. }
            | InstallError::PublisherChange { .. }
            | InstallError::Rollback { .. }
            | InstallError::SameVersion { .. }
            | InstallError::Unmanaged { .. } => ErrorKind::PermissionDenied,
            InstallError::SkillsRoot(_)
            | InstallError::Staging { .. }
            | InstallError::TrustStore(_)
            | InstallError::Lock(_)
            | InstallError::Commit { .. } => ErrorKind::Unavailable,
        }
    }
}

/// What an install did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Installed {
    /// The skill.
    pub name: String,
    /// Where it now is.
    pub dir: PathBuf,
    /// The version it replaced, if any.
    pub replaced: Option<String>,
    /// What the lock now records (version, digest, trust, publisher, fingerprints).
    #[serde(flatten)]
    pub entry: LockedSkill,
}

/// Installs the package at `source` (a folder or a `.tar.gz`) under `policy` at `now`.
/// `publisher_change` says whether an installed signed skill may pass to another
/// publisher. A refusal leaves nothing behind, not even a skills root it had to create.
pub fn install(
    source: &Path,
    policy: &TrustPolicy,
    limits: Limits,
    now: SystemTime,
    publisher_change: PublisherChange,
) -> Result<Installed, InstallError> {
    install_with_origin(source, policy, limits, now, publisher_change, None)
}

/// [`install`], recording in the lock the git source the package was fetched from
/// (`skillbox skill add`, [`crate::skills::sources`]).
pub fn install_with_origin(
    source: &Path,
    policy: &TrustPolicy,
    limits: Limits,
    now: SystemTime,
    publisher_change: PublisherChange,
    origin: Option<SkillOrigin>,
) -> Result<Installed, InstallError> {
    let meta = std::fs::metadata(source).map_err(|e| InstallError::Source {
        path: source.to_path_buf(),
        reason: e.to_string(),
    })?;
    if !meta.is_dir() && !meta.is_file() {
        return Err(InstallError::Source {
            path: source.to_path_buf(),
            reason: "neither a folder nor a file".into(),
        });
    }
    let root = &policy.skills_root;
    let created_root = root.symlink_metadata().is_err();
    std::fs::create_dir_all(root).map_err(|source| {
        InstallError::SkillsRoot(LockError::Flock {
            path: root.clone(),
            source,
        })
    })?;
    match lock::lock_root(root) {
        Ok(_guard) => {
            let result = install_locked(
                source,
                meta.is_dir(),
                policy,
                limits,
                now,
                publisher_change,
                origin,
            );
            if result.is_err() && created_root {
                // Under the lock, with the staging folder gone: nothing is left in it.
                remove_created_root(root);
            }
            result
        }
        Err(e) => {
            if created_root {
                remove_created_root(root);
            }
            Err(InstallError::SkillsRoot(e))
        }
    }
}

/// Removes the skills root a refused install created. `remove_dir` refuses a non-empty
/// folder, so what another install put there meanwhile stays.
fn remove_created_root(root: &Path) {
    if let Err(e) = std::fs::remove_dir(root) {
        tracing::warn!(root = %root.display(), error = %e, "could not remove the skills root this refused install created");
    }
}

/// The install proper, under the lock on the skills root.
fn install_locked(
    source: &Path,
    from_folder: bool,
    policy: &TrustPolicy,
    limits: Limits,
    now: SystemTime,
    publisher_change: PublisherChange,
    origin: Option<SkillOrigin>,
) -> Result<Installed, InstallError> {
    let root = &policy.skills_root;
    staging::sweep(root);
    let staging = Staging::create(root).map_err(|source| InstallError::Staging {
        path: root.clone(),
        source,
    })?;
    if from_folder {
        folder::copy(source, &staging.package(), limits)?;
    } else {
        archive::extract(source, &staging.package(), limits)?;
    }
    let pkg = staging.package_root();
    let (name, version) = manifest(&pkg)?;
    let (entry, store) = lock_entry(&pkg, &name, version.as_ref(), policy, now, origin)?;
    let mut locked = lock::read(root).map_err(InstallError::Lock)?;
    let target = root.join(&name);
    let previous = locked.get(&name).cloned();
    match &previous {
        Some(old) => replace::check_replace(
            &name,
            old,
            &entry,
            version.as_ref(),
            store.as_ref(),
            publisher_change,
        )?,
        None if target.symlink_metadata().is_ok() => {
            return Err(InstallError::Unmanaged { path: target });
        }
        None => {}
    }
    let swap = staging
        .swap_in(&pkg, &target)
        .map_err(|source| InstallError::Commit {
            path: target.clone(),
            source,
        })?;
    locked.skills.insert(name.clone(), entry.clone());
    if let Err(e) = lock::write(root, &locked) {
        if let Err(undo) = swap.undo() {
            tracing::error!(skill = %name, error = %undo, "could not undo the install after the lock failed");
        }
        return Err(InstallError::Lock(e));
    }
    drop(staging);
    Ok(Installed {
        name,
        dir: target,
        replaced: previous.and_then(|p| p.version),
        entry,
    })
}

/// What the lock records of the staged package `pkg` (`name` at `version`): signed, after
/// its signature and chain are verified against the trust store (returned, for the
/// replacement's publisher check), or `local` when `[trust] require_signed` is off.
fn lock_entry(
    pkg: &Path,
    name: &str,
    version: Option<&semver::Version>,
    policy: &TrustPolicy,
    now: SystemTime,
    origin: Option<SkillOrigin>,
) -> Result<(LockedSkill, Option<TrustStore>), InstallError> {
    let signed = pkg.join(SIGNATURE_FILE).symlink_metadata().is_ok();
    let mut store = None;
    let entry = if signed {
        let Some(v) = version else {
            return Err(InstallError::Manifest {
                reason: format!("{name} is signed but its manifest has no version; signed installs need `version:` in skill.yaml or package.json"),
            });
        };
        let loaded = TrustStore::load(&policy.trust_dir).map_err(InstallError::TrustStore)?;
        let ok = loaded
            .verify_package(pkg, name, &v.to_string(), now)
            .map_err(InstallError::Verify)?;
        store = Some(loaded);
        LockedSkill {
            version: Some(v.to_string()),
            digest: ok.digest,
            trust: Trust::Signed,
            publisher: Some(ok.publisher),
            leaf_fingerprint: Some(ok.leaf_fingerprint),
            publisher_key: Some(ok.publisher_key),
            root_fingerprint: Some(ok.root_fingerprint),
            installed_at: rfc3339(now),
            origin,
        }
    } else if policy.require_signed {
        return Err(InstallError::Unsigned {
            name: name.to_string(),
        });
    } else {
        let digest = package_digest(pkg).map_err(InstallError::Digest)?;
        tracing::warn!(skill = %name, "installing an unsigned skill with trust \"local\" ([trust] require_signed = false)");
        LockedSkill {
            version: version.map(ToString::to_string),
            digest: digest.prefixed(),
            trust: Trust::Local,
            publisher: None,
            leaf_fingerprint: None,
            publisher_key: None,
            root_fingerprint: None,
            installed_at: rfc3339(now),
            origin,
        }
    };
    Ok((entry, store))
}

/// Loads the manifest of the staged package: its name (a valid spec name) and version.
fn manifest(pkg: &Path) -> Result<(String, Option<semver::Version>), InstallError> {
    let skill = match load_skill(pkg) {
        LoadOutcome::Loaded(s) => s,
        LoadOutcome::Skipped(s) => {
            return Err(InstallError::Manifest {
                reason: format!("the package does not load: {}", s.reason()),
            })
        }
        LoadOutcome::NotASkill => {
            return Err(InstallError::Manifest {
                reason: "no SKILL.md, skill.yaml or package.json with an \"owliabot\" field at the top of the package".into(),
            })
        }
    };
    if !is_spec_skill_name(&skill.name) {
        return Err(InstallError::Manifest {
            reason: format!(
                "name {:?} is not a valid skill name (1-64 of a-z, 0-9 and single inner -)",
                skill.name
            ),
        });
    }
    let version = match &skill.version {
        None => None,
        Some(v) => Some(
            semver::Version::parse(v).map_err(|e| InstallError::Manifest {
                reason: format!("version {v:?} is not semver ({e}); use MAJOR.MINOR.PATCH"),
            })?,
        ),
    };
    Ok((skill.name.clone(), version))
}

/// `now` as RFC 3339 UTC with seconds (`2025-01-31T12:00:00Z`).
pub fn rfc3339(now: SystemTime) -> String {
    let secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let t = time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).unwrap_or(0))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}
