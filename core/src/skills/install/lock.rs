//! Reading and writing the install lock `<skills-root>/.skillbox-lock.json` (its format
//! is [`skillbox_protocol::skill::lock`], shared with the executor), and the exclusive
//! `flock` on the skills root that serialises installs (CLI and gateway alike) without
//! leaving a lock file behind.

use std::fs::File;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use skillbox_protocol::skill::lock::LockReadError;
use skillbox_protocol::skill::InstallLock;

use crate::state::pki::{write_atomic, PkiError};

/// Why the lock could not be read, written or taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The lock file is unreadable or invalid.
    #[error(transparent)]
    Read(#[from] LockReadError),
    /// The lock file could not be written.
    #[error("writing the install lock: {0}")]
    Write(#[from] PkiError),
    /// The skills root could not be locked against concurrent installs.
    #[error("locking the skills root {path} against concurrent installs: {source}")]
    Flock {
        /// The root.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// Holds the skills root locked until dropped.
#[derive(Debug)]
pub struct RootLock {
    _flock: Flock<File>,
}

/// Takes the exclusive install lock on `skills_root` (waits for another install).
pub fn lock_root(skills_root: &Path) -> Result<RootLock, LockError> {
    let err = |source| LockError::Flock {
        path: skills_root.to_path_buf(),
        source,
    };
    let dir = File::open(skills_root).map_err(err)?;
    let flock = Flock::lock(dir, FlockArg::LockExclusive)
        .map_err(|(_, errno)| err(std::io::Error::from(errno)))?;
    Ok(RootLock { _flock: flock })
}

/// Reads the lock (empty when the root has none).
pub fn read(skills_root: &Path) -> Result<InstallLock, LockError> {
    Ok(InstallLock::read(skills_root)?.unwrap_or_default())
}

/// Writes the lock atomically (temporary file, fsync, rename), 0644.
pub fn write(skills_root: &Path, lock: &InstallLock) -> Result<(), LockError> {
    let path = InstallLock::path(skills_root);
    let mut bytes = serde_json::to_vec_pretty(lock).map_err(|e| {
        LockError::Write(PkiError::Write {
            path: path.clone(),
            source: std::io::Error::other(e),
        })
    })?;
    bytes.push(b'\n');
    write_atomic(&path, &bytes, 0o644)?;
    Ok(())
}
