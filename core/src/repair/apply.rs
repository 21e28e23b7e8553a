//! Writing a repair all or nothing: every new file is first written beside its target
//! (a hidden temporary file, synced), then the temporaries are renamed over the targets
//! one by one. When any step fails, the targets already replaced get their original bytes
//! back (again by temporary file and rename), new files and new folders are removed, and
//! the remaining temporaries deleted.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// One file a repair writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The file.
    pub target: PathBuf,
    /// Its new bytes.
    pub new: Vec<u8>,
    /// Its bytes before (none: a new file).
    pub old: Option<Vec<u8>>,
    /// Its permission bits (kept from the original; 0644 for a new file).
    pub mode: u32,
}

/// Why a repair was not written. The skill is as it was unless `RollbackIncomplete`.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Creating a missing folder failed.
    #[error("creating {path}: {source}")]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Writing a temporary file failed.
    #[error("writing the new {path}: {source}")]
    WriteTemp {
        /// The target.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Renaming a temporary file over its target failed.
    #[error("replacing {path}: {source}")]
    Replace {
        /// The target.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A step failed and restoring the originals failed too: these files are changed.
    #[error("{cause}; restoring the originals also failed for {paths:?}: restore them from the repair record or reinstall the skill")]
    RollbackIncomplete {
        /// The first failure.
        cause: Box<ApplyError>,
        /// Files left changed.
        paths: Vec<PathBuf>,
    },
}

/// Writes `changes` all or nothing.
pub fn apply(changes: &[Change]) -> Result<(), ApplyError> {
    apply_with(changes, &mut |from, to| std::fs::rename(from, to))
}

fn temp_for(target: &Path, tag: &str, n: usize) -> PathBuf {
    let name = target
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.{tag}-{}-{n}", std::process::id()))
}

fn write_file(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    f.write_all(bytes)?;
    // The umask may have narrowed the mode.
    f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    f.sync_all()
}

/// [`apply`] with the rename step given (tests fail it on purpose).
pub(crate) fn apply_with(
    changes: &[Change],
    rename: &mut dyn FnMut(&Path, &Path) -> std::io::Result<()>,
) -> Result<(), ApplyError> {
    let mut created_dirs: Vec<PathBuf> = Vec::new();
    let mut temps: Vec<PathBuf> = Vec::new();
    let mut committed = 0;
    let result = (|| {
        for (n, c) in changes.iter().enumerate() {
            if let Some(parent) = c.target.parent() {
                create_dirs(parent, &mut created_dirs)?;
            }
            let temp = temp_for(&c.target, "repair", n);
            write_file(&temp, &c.new, c.mode).map_err(|source| ApplyError::WriteTemp {
                path: c.target.clone(),
                source,
            })?;
            temps.push(temp);
        }
        for (c, temp) in changes.iter().zip(&temps) {
            rename(temp, &c.target).map_err(|source| ApplyError::Replace {
                path: c.target.clone(),
                source,
            })?;
            committed += 1;
        }
        Ok(())
    })();
    let Err(cause) = result else {
        for dir in changes.iter().filter_map(|c| c.target.parent()) {
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        return Ok(());
    };
    let left = restore(changes.get(..committed).unwrap_or_default());
    for temp in temps.iter().skip(committed) {
        let _ = std::fs::remove_file(temp);
    }
    for dir in created_dirs.iter().rev() {
        let _ = std::fs::remove_dir(dir);
    }
    tracing::warn!(error = %cause, left = ?left, "repair rolled back");
    if left.is_empty() {
        Err(cause)
    } else {
        Err(ApplyError::RollbackIncomplete {
            cause: Box::new(cause),
            paths: left,
        })
    }
}

/// Puts back the originals of `changes` (already written): their old bytes, or no file.
/// Returns the files that could not be restored.
pub fn restore(changes: &[Change]) -> Vec<PathBuf> {
    let mut left = Vec::new();
    for (n, c) in changes.iter().enumerate().rev() {
        let restored = match &c.old {
            Some(old) => {
                let temp = temp_for(&c.target, "undo", n);
                write_file(&temp, old, c.mode).and_then(|()| std::fs::rename(&temp, &c.target))
            }
            None => std::fs::remove_file(&c.target),
        };
        if restored.is_err() {
            left.push(c.target.clone());
        }
    }
    left
}

/// Creates `dir` and its missing parents, remembering each one made (outermost first).
fn create_dirs(dir: &Path, created: &mut Vec<PathBuf>) -> Result<(), ApplyError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs(parent, created)?;
    }
    std::fs::create_dir(dir).map_err(|source| ApplyError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    created.push(dir.to_path_buf());
    Ok(())
}
