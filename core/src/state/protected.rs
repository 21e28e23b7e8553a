//! The files of the core no skill ever gets, by identity: every file in the state folder
//! (`<workspace>/.skillbox`: the API token, the channel's keys, the code-signing CA,
//! `secrets.env`, the database) and the configuration `<workspace>/skillbox.toml`.
//!
//! A name check does not see a hard link (or a bind mount) of one of them under another
//! name, in the workspace or in a skill folder; its device and inode do. [`refuse_protected`]
//! is the one judgement every route that hands a file to a skill or a client makes on the
//! file it opened: readFile ([`crate::proxy::readfile`]), `GET /v1/skills/{name}/files/{path}`
//! and MCP `resources/read` ([`crate::contexts::disclosure::read_file`]).

use std::collections::HashMap;
use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::state::{CONFIG_FILE, STATE_DIR};

/// Most entries walked in the state folder before the check fails closed (the folder holds
/// a few dozen files; far more means something is wrong with it).
const MAX_STATE_ENTRIES: usize = 100_000;

/// Why the state folder and the config are never served (the end of every refusal).
pub const NEVER: &str = "the core's state folder (.skillbox: tokens, keys, secrets, database) \
                         and its configuration skillbox.toml are never readable by skills, \
                         whatever their permissions.workspace.read globs or any link";

/// Why a file was refused, or could not be judged.
#[derive(Debug, thiserror::Error)]
pub enum ProtectedError {
    /// The file opened is one of the core's protected files under another name.
    #[error("{asked:?} is the same file as {name:?} (a hard link or mount of it): {NEVER}")]
    SameFile {
        /// The name asked for.
        asked: String,
        /// The protected file it is, relative to the workspace.
        name: String,
    },
    /// The state folder could not be listed, so no file is served (fail closed).
    #[error(
        "the core cannot list its state folder ({}: {source}) to keep it from skills, so the \
         file is refused; check the folder's permissions",
        path.display()
    )]
    Scan {
        /// The folder or entry that failed.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
}

/// Refuses the opened file `meta` describes (asked for as `asked`) when it is one of the
/// files of `workspace`'s state folder or its configuration, by device and inode.
pub fn refuse_protected(
    workspace: &Path,
    asked: &str,
    meta: &Metadata,
) -> Result<(), ProtectedError> {
    let files = scan(workspace)?;
    match files.get(&(meta.dev(), meta.ino())) {
        Some(name) => Err(ProtectedError::SameFile {
            asked: asked.to_string(),
            name: name.clone(),
        }),
        None => Ok(()),
    }
}

/// Every file in `<workspace>/.skillbox` (following the folder itself if it is a symlink,
/// no link under it) and `<workspace>/skillbox.toml`, as they are now: `(device, inode)` →
/// workspace-relative name.
fn scan(workspace: &Path) -> Result<HashMap<(u64, u64), String>, ProtectedError> {
    let mut files = HashMap::new();
    if let Ok(meta) = std::fs::metadata(workspace.join(CONFIG_FILE)) {
        files.insert((meta.dev(), meta.ino()), CONFIG_FILE.to_string());
    }
    let state = workspace.join(STATE_DIR);
    let mut pending = vec![(state, PathBuf::from(STATE_DIR))];
    let mut seen = 0usize;
    let failed = |path: &Path, source: io::Error| ProtectedError::Scan {
        path: path.to_path_buf(),
        source,
    };
    while let Some((dir, rel)) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            // No state folder yet, or a folder removed while walking: nothing to read.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(failed(&dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| failed(&dir, e))?;
            seen += 1;
            if seen > MAX_STATE_ENTRIES {
                return Err(failed(
                    &dir,
                    io::Error::other(format!("more than {MAX_STATE_ENTRIES} entries")),
                ));
            }
            let meta = entry.metadata().map_err(|e| failed(&entry.path(), e))?;
            let name = rel.join(entry.file_name());
            if meta.is_dir() {
                pending.push((entry.path(), name));
            } else {
                files.insert((meta.dev(), meta.ino()), name.display().to_string());
            }
        }
    }
    Ok(files)
}
