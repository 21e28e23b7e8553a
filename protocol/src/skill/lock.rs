//! The install lock `<skills-root>/.skillbox-lock.json`: what `skillbox skill install`
//! put in a skills root, with the digest each installed skill had (docs/signing-runbook.md). The core
//! writes it (atomically, under a lock on the root); the executor reads it and loads a
//! listed skill only while its files still hash to the recorded digest.
//!
//! ```json
//! {
//!   "crypto-price": {
//!     "version": "0.1.0",
//!     "digest": "sha256:…",
//!     "trust": "signed",
//!     "publisher": "Acme Skills",
//!     "leaf_fingerprint": "…", "publisher_key": "…", "root_fingerprint": "…",
//!     "installed_at": "2025-01-01T00:00:00Z"
//!   }
//! }
//! ```

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The lock's file name in a skills root (hidden from discovery by its leading dot).
pub const LOCK_FILE: &str = ".skillbox-lock.json";
/// Largest lock file read.
pub const MAX_LOCK_BYTES: u64 = 16 * 1024 * 1024;

/// How an installed skill is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    /// Signed by a publisher whose certificate chains to a trusted root.
    Signed,
    /// Unsigned, installed because `[trust] require_signed = false`.
    Local,
}

impl Trust {
    /// The label shown to users (`signed` / `local`).
    pub fn label(self) -> &'static str {
        match self {
            Trust::Signed => "signed",
            Trust::Local => "local",
        }
    }
}

/// One installed skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedSkill {
    /// The manifest version (none for an unversioned local skill).
    pub version: Option<String>,
    /// The package digest at install, `sha256:<hex>`.
    pub digest: String,
    /// Signed or local.
    pub trust: Trust,
    /// The publisher named in the developer certificate (signed skills).
    #[serde(default)]
    pub publisher: Option<String>,
    /// SHA-256 fingerprint of the developer certificate (signed skills).
    #[serde(default)]
    pub leaf_fingerprint: Option<String>,
    /// SHA-256 of the developer certificate's public key (SubjectPublicKeyInfo): with
    /// `publisher` and `root_fingerprint`, what binds the skill to its publisher (a
    /// replacing package must come from the same key, or the same publisher name under
    /// the same root). Absent in locks written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher_key: Option<String>,
    /// SHA-256 fingerprint of the root the chain ended at (signed skills).
    #[serde(default)]
    pub root_fingerprint: Option<String>,
    /// When it was installed (RFC 3339, UTC).
    pub installed_at: String,
    /// Where it was fetched from, for skills added from a git source (`skillbox skill
    /// add`); none for a folder or archive installed by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<SkillOrigin>,
}

/// The git source a skill was added from: what `skill outdated` and `skill update` look
/// at again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillOrigin {
    /// The source as the operator gave it (`owner/repo`, a git URL, a local repo, an index).
    pub source: String,
    /// The git URL fetched.
    pub url: String,
    /// The ref asked for (branch, tag or commit); none: the remote's default branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The commit the ref resolved to when the skill was fetched.
    pub commit: String,
    /// The skill's folder inside the repository (`""`: its top).
    pub subfolder: String,
    /// The git tree id of that folder at `commit`: what `skill outdated` and `skill
    /// update` compare, so a commit elsewhere in the repository is no update. Absent in
    /// locks written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
}

/// The whole lock: installed skills by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InstallLock {
    /// Installed skills by name.
    pub skills: BTreeMap<String, LockedSkill>,
}

/// Why the lock could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LockReadError {
    /// The file could not be read.
    #[error("reading the install lock {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_LOCK_BYTES`].
    #[error("the install lock {path} is over {MAX_LOCK_BYTES} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// The file is not a valid lock.
    #[error("the install lock {path} is not valid: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: serde_json::Error,
    },
}

impl InstallLock {
    /// The lock file of a skills root.
    pub fn path(skills_root: &Path) -> PathBuf {
        skills_root.join(LOCK_FILE)
    }

    /// Reads the lock of `skills_root`; `None` when the root has none.
    pub fn read(skills_root: &Path) -> Result<Option<Self>, LockReadError> {
        let path = Self::path(skills_root);
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(LockReadError::Read { path, source }),
        };
        let mut bytes = Vec::new();
        file.take(MAX_LOCK_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| LockReadError::Read {
                path: path.clone(),
                source,
            })?;
        if bytes.len() as u64 > MAX_LOCK_BYTES {
            return Err(LockReadError::TooLarge { path });
        }
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| LockReadError::Parse { path, source })
    }

    /// The entry of a skill.
    pub fn get(&self, name: &str) -> Option<&LockedSkill> {
        self.skills.get(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_round_trips_and_missing_is_none() {
        let d = tempfile::tempdir().unwrap();
        assert!(InstallLock::read(d.path()).unwrap().is_none());
        let mut lock = InstallLock::default();
        lock.skills.insert(
            "a".into(),
            LockedSkill {
                version: Some("1.0.0".into()),
                digest: "sha256:00".into(),
                trust: Trust::Signed,
                publisher: Some("p".into()),
                leaf_fingerprint: None,
                publisher_key: None,
                root_fingerprint: None,
                installed_at: "2025-01-01T00:00:00Z".into(),
                origin: None,
            },
        );
        std::fs::write(
            InstallLock::path(d.path()),
            serde_json::to_vec(&lock).unwrap(),
        )
        .unwrap();
        let back = InstallLock::read(d.path()).unwrap().unwrap();
        assert_eq!(back, lock);
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(InstallLock::path(d.path())).unwrap()).unwrap();
        assert_eq!(v["a"]["trust"], "signed");
    }

    #[test]
    fn malformed_lock_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(InstallLock::path(d.path()), b"[1,2]").unwrap();
        assert!(matches!(
            InstallLock::read(d.path()),
            Err(LockReadError::Parse { .. })
        ));
    }
}
