//! Copies a package folder into a staging folder under the same rules as an archive
//! (see [`Sink`]): regular files and folders only (a symlink anywhere is refused, never
//! followed), no special mode bits, and the same caps on entries and bytes.

use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::sink::{check_mode, normalize, ExtractError, Limits, Sink, MAX_DEPTH};

/// Copies the folder `src` into `dest` (an existing, private, empty folder).
pub fn copy(src: &Path, dest: &Path, limits: Limits) -> Result<(), ExtractError> {
    let mut sink = Sink::new(dest, limits);
    walk(src, "", 0, &mut sink)
}

fn walk(root: &Path, rel: &str, depth: usize, sink: &mut Sink) -> Result<(), ExtractError> {
    let here = root.join(rel);
    let io = |source| ExtractError::Io {
        path: here.clone(),
        source,
    };
    let mut children: Vec<_> = std::fs::read_dir(&here)
        .map_err(io)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(io)?;
    children.sort();
    for child in children {
        sink.count_entry()?;
        let raw = child.as_encoded_bytes();
        let joined = if rel.is_empty() {
            raw.to_vec()
        } else {
            [rel.as_bytes(), b"/", raw].concat()
        };
        let name = normalize(&joined)?.ok_or_else(|| ExtractError::Path {
            name: String::from_utf8_lossy(&joined).into_owned(),
            reason: "empty name",
        })?;
        let path = root.join(&name);
        let meta = std::fs::symlink_metadata(&path).map_err(|source| ExtractError::Io {
            path: path.clone(),
            source,
        })?;
        let ft = meta.file_type();
        let mode = check_mode(&name, meta.permissions().mode())?;
        if ft.is_symlink() {
            return Err(ExtractError::Symlink { name });
        } else if ft.is_dir() {
            if depth + 1 >= MAX_DEPTH {
                return Err(ExtractError::Path {
                    name,
                    reason: "folders nest deeper than 32 levels",
                });
            }
            sink.dir(&name)?;
            walk(root, &name, depth + 1, sink)?;
        } else if ft.is_file() {
            // O_NOFOLLOW and a second look through the open file: the folder may change
            // under us, and what is read must be the regular file that was checked.
            let io = |source| ExtractError::Io {
                path: path.clone(),
                source,
            };
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(&path)
                .map_err(io)?;
            let opened = f.metadata().map_err(io)?;
            if !opened.is_file() || opened.ino() != meta.ino() {
                return Err(ExtractError::Io {
                    path: path.clone(),
                    source: std::io::Error::other("the file changed while it was copied"),
                });
            }
            sink.file(&name, mode, opened.len(), &mut f, &|| None)?;
        } else {
            let kind = if ft.is_char_device() || ft.is_block_device() {
                "device"
            } else if ft.is_fifo() {
                "FIFO"
            } else {
                "socket"
            };
            return Err(ExtractError::EntryType {
                name,
                kind: kind.into(),
            });
        }
    }
    Ok(())
}
