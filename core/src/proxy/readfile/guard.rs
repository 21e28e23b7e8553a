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
//!   another name is refused too ([`crate::state::protected`], the same judgement the
//!   routes serving skill files make);
//! - by resolution: the path of the opened file, read back from `/proc/self/fd/N`, so a
//!   symlink is judged by where it leads, not by its own name.

use std::fs::{File, Metadata};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::{ProxyError, CAP};
use crate::state::config::CONFIG_FILE;
use crate::state::protected::{refuse_protected, ProtectedError, NEVER};
use crate::state::STATE_DIR;

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

/// Refuses the opened file `meta` describes when it is one of the protected files, by
/// device and inode: the one judgement readFile shares with the routes that serve skill
/// files ([`crate::state::protected`]).
pub(super) fn refuse_protected_file(
    workspace: &Path,
    asked: &str,
    meta: &Metadata,
) -> Result<(), ProxyError> {
    refuse_protected(workspace, asked, meta).map_err(|e| match e {
        ProtectedError::SameFile { .. } => ProxyError::denied(CAP, e.to_string()),
        ProtectedError::Scan { .. } => ProxyError::Unavailable {
            capability: CAP,
            reason: format!("{e}; readFile is refused"),
        },
    })
}
