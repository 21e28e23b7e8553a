//! Removing an installed skill (`DELETE /v1/skills/{name}`, docs/http-api.md). Under the lock
//! on the skills root (the one installs take), the skill's folder leaves the skills root in
//! one rename into a private staging folder, then its lock entry is dropped; when the lock
//! cannot be written the folder is renamed back. Only skills in the install lock are
//! removed: a folder skillbox did not install is the operator's to delete.
//!
//! The order matters: a folder without its lock entry would load unchecked, while a lock
//! entry without its folder (a crash between the two steps) only reports the skill missing.

use std::path::PathBuf;

use serde::Serialize;
use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::skill::validate::is_spec_skill_name;
use skillbox_protocol::skill::LockedSkill;

use super::staging::{self, Staging};
use super::{lock, LockError, TrustPolicy};

/// Why a removal was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum RemoveError {
    /// The name cannot be a skill's (so none is installed under it).
    #[error("not_installed: {name:?} is not a skill name (1-64 of a-z, 0-9 and single inner -); see GET /v1/skills")]
    InvalidName {
        /// The name asked for.
        name: String,
    },
    /// No skill of that name is in the install lock, nor in the skills root.
    #[error("not_installed: no skill named {name:?} is installed; see GET /v1/skills")]
    NotInstalled {
        /// The name asked for.
        name: String,
    },
    /// A folder of that name is in the skills root but skillbox did not install it.
    #[error("unmanaged: {path} was not installed by skillbox (it is not in the install lock); remove the folder yourself, then POST /v1/skills/reload")]
    Unmanaged {
        /// The folder.
        path: PathBuf,
    },
    /// The skills root could not be locked.
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
    /// The skill's folder could not be moved out of the skills root.
    #[error("moving {path} out of the skills root: {source}; nothing was removed")]
    Move {
        /// The skill's folder.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The install lock could not be read or written (the folder was put back).
    #[error("lock: {0}; nothing was removed")]
    Lock(LockError),
}

impl RemoveError {
    /// The name of the step that refused the removal.
    pub fn check(&self) -> &'static str {
        match self {
            RemoveError::InvalidName { .. } | RemoveError::NotInstalled { .. } => "not_installed",
            RemoveError::Unmanaged { .. } => "unmanaged",
            RemoveError::SkillsRoot(_) => "skills_root",
            RemoveError::Staging { .. } => "staging",
            RemoveError::Move { .. } => "move",
            RemoveError::Lock(_) => "lock",
        }
    }

    /// The contract `error_kind` of the refusal.
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            RemoveError::InvalidName { .. } | RemoveError::NotInstalled { .. } => {
                ErrorKind::NotFound
            }
            RemoveError::Unmanaged { .. } => ErrorKind::PermissionDenied,
            RemoveError::SkillsRoot(_)
            | RemoveError::Staging { .. }
            | RemoveError::Move { .. }
            | RemoveError::Lock(_) => ErrorKind::Unavailable,
        }
    }
}

/// What a removal did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Removed {
    /// The skill.
    pub name: String,
    /// Where it was.
    pub dir: PathBuf,
    /// Whether its folder was already gone (only the lock entry was dropped).
    pub folder_was_missing: bool,
    /// The lock entry dropped.
    #[serde(flatten)]
    pub entry: LockedSkill,
}

/// Removes the installed skill `name` from `policy.skills_root` and its install lock.
pub fn remove(policy: &TrustPolicy, name: &str) -> Result<Removed, RemoveError> {
    if !is_spec_skill_name(name) {
        return Err(RemoveError::InvalidName {
            name: name.chars().take(80).collect(),
        });
    }
    let root = &policy.skills_root;
    let target = root.join(name);
    if !root.is_dir() {
        return Err(RemoveError::NotInstalled {
            name: name.to_string(),
        });
    }
    let _guard = lock::lock_root(root).map_err(RemoveError::SkillsRoot)?;
    staging::sweep(root);
    let mut locked = lock::read(root).map_err(RemoveError::Lock)?;
    let Some(entry) = locked.skills.remove(name) else {
        return Err(if target.symlink_metadata().is_ok() {
            RemoveError::Unmanaged { path: target }
        } else {
            RemoveError::NotInstalled {
                name: name.to_string(),
            }
        });
    };
    let staging = Staging::create(root).map_err(|source| RemoveError::Staging {
        path: root.clone(),
        source,
    })?;
    let parked = staging.dir().join("removed");
    let folder_was_missing = target.symlink_metadata().is_err();
    if !folder_was_missing {
        std::fs::rename(&target, &parked).map_err(|source| RemoveError::Move {
            path: target.clone(),
            source,
        })?;
    }
    if let Err(e) = lock::write(root, &locked) {
        if !folder_was_missing {
            if let Err(undo) = std::fs::rename(&parked, &target) {
                tracing::error!(skill = %name, error = %undo, "could not put the skill back after the lock failed");
            }
        }
        return Err(RemoveError::Lock(e));
    }
    drop(staging);
    tracing::info!(skill = %name, "skill removed");
    Ok(Removed {
        name: name.to_string(),
        dir: target,
        folder_was_missing,
        entry,
    })
}
