//! What no skill ever reads through readFile, whatever its globs: the core's state folder
//! (`<workspace>/.skillbox`: the API token, the channel's keys, the code-signing CA,
//! `secrets.env`, the database) and the core's configuration (`<workspace>/skillbox.toml`).
//!
//! Three checks, each closing a way in:
//! - by name: a path whose first component is the state folder, or which is the config
//!   file, ASCII case ignored (so a case-insensitive file system gives no way around it),
//!   both for the name asked for and for the path of the file actually opened;
//! - by identity: the opened file's device and inode against those of every file in the
//!   state folder and of the config, so a hard link (or a bind mount) to one of them under
//!   another name is refused too;
//! - by resolution: the path of the opened file, read back from `/proc/self/fd/N`, so a
//!   symlink is judged by where it leads, not by its own name.

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::{ProxyError, CAP};
use crate::state::config::CONFIG_FILE;
use crate::state::STATE_DIR;

/// Most entries walked in the state folder before the check fails closed (the folder holds
/// a few dozen files; far more means something is wrong with it).
const MAX_STATE_ENTRIES: usize = 100_000;

/// Why the state folder and the config are never readable (the end of every refusal).
const NEVER: &str = "the core's state folder (.skillbox: tokens, keys, secrets, database) and \
                     its configuration skillbox.toml are never readable by skills, whatever \
                     their permissions.workspace.read globs or any link";

/// Refuses `path` (workspace-relative) when it names the state folder or the config.
/// `how` says how the skill reached it, for the message ("" for the name asked for).
pub(super) fn refuse_protected_name(path: &Path, how: &str) -> Result<(), ProxyError> {
    let mut parts = path.components().filter(|c| *c != Component::CurDir);
    let first = parts.next().map(|c| c.as_os_str().as_bytes());
    let is_only = parts.next().is_none();
    let what = match first {
        Some(f) if f.eq_ignore_ascii_case(STATE_DIR.as_bytes()) => "the core's state folder",
        Some(f) if is_only && f.eq_ignore_ascii_case(CONFIG_FILE.as_bytes()) => {
            "the core's configuration"
        }
        _ => return Ok(()),
    };
    Err(ProxyError::denied(
        CAP,
        format!("{how}{:?} is {what}: {NEVER}", path.display().to_string()),
    ))
}

/// The path of the opened `file` relative to the opened workspace `dir`, as the kernel
/// reports them (`/proc/self/fd/N`). Refuses a file that was removed after it was opened.
pub(super) fn resolved_path(
    dir: &File,
    file: &File,
    meta: &Metadata,
) -> Result<PathBuf, ProxyError> {
    let root = fd_path(dir)?;
    let full = fd_path(file)?;
    if meta.nlink() == 0 {
        return Err(ProxyError::denied(
            CAP,
            "the file was removed while it was being opened; retry",
        ));
    }
    full.strip_prefix(&root)
        .map(Path::to_path_buf)
        .ok()
        .filter(|p| p.components().next().is_some())
        .ok_or_else(|| {
            ProxyError::denied(
                CAP,
                format!(
                    "the opened file {} is not under the workspace {}",
                    full.display(),
                    root.display()
                ),
            )
        })
}

fn fd_path(f: &File) -> Result<PathBuf, ProxyError> {
    let link = format!("/proc/self/fd/{}", f.as_raw_fd());
    std::fs::read_link(&link).map_err(|e| ProxyError::Unavailable {
        capability: CAP,
        reason: format!(
            "the core cannot tell which file a path resolves to ({link}: {e}); readFile needs \
             /proc mounted in the core's file system"
        ),
    })
}

/// The files no skill reads, by identity: `(device, inode)` → workspace-relative name.
#[derive(Debug)]
pub(super) struct Protected {
    files: HashMap<(u64, u64), String>,
}

impl Protected {
    /// Every file in `<workspace>/.skillbox` (following the folder itself if it is a
    /// symlink, no link under it) and `<workspace>/skillbox.toml`, as they are now.
    pub(super) fn scan(workspace: &Path) -> Result<Self, ProxyError> {
        let mut files = HashMap::new();
        if let Ok(meta) = std::fs::metadata(workspace.join(CONFIG_FILE)) {
            files.insert((meta.dev(), meta.ino()), CONFIG_FILE.to_string());
        }
        let state = workspace.join(STATE_DIR);
        let mut pending = vec![(state, PathBuf::from(STATE_DIR))];
        let mut seen = 0usize;
        while let Some((dir, rel)) = pending.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                // No state folder yet, or a folder removed while walking: nothing to read.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(scan_error(&dir, &e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| scan_error(&dir, &e))?;
                seen += 1;
                if seen > MAX_STATE_ENTRIES {
                    return Err(scan_error(
                        &dir,
                        &io::Error::other(format!("more than {MAX_STATE_ENTRIES} entries")),
                    ));
                }
                let meta = entry
                    .metadata()
                    .map_err(|e| scan_error(&entry.path(), &e))?;
                let name = rel.join(entry.file_name());
                if meta.is_dir() {
                    pending.push((entry.path(), name));
                } else {
                    files.insert((meta.dev(), meta.ino()), name.display().to_string());
                }
            }
        }
        Ok(Self { files })
    }

    /// Refuses the file `meta` describes when it is one of the protected files.
    pub(super) fn refuse(&self, asked: &str, meta: &Metadata) -> Result<(), ProxyError> {
        match self.files.get(&(meta.dev(), meta.ino())) {
            Some(name) => Err(ProxyError::denied(
                CAP,
                format!(
                    "{asked:?} is the same file as {name:?} (a hard link or mount of it): {NEVER}"
                ),
            )),
            None => Ok(()),
        }
    }
}

fn scan_error(path: &Path, e: &io::Error) -> ProxyError {
    ProxyError::Unavailable {
        capability: CAP,
        reason: format!(
            "the core cannot list its state folder ({}: {e}) to keep it from skills, so \
             readFile is refused; check the folder's permissions",
            path.display()
        ),
    }
}
