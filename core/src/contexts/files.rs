//! A context's working folder, kept by the core: `<state>/contexts/<sha256 of the id>/`,
//! owner-only. Files go in and out as raw bytes (an upload is streamed to a temporary file
//! beside its place and renamed in); what is there is recorded in the state database
//! (path, size, SHA-256, when, by whom).
//!
//! Paths are relative, `/`-separated, valid UTF-8, without empty, `.` or `..` segments,
//! control or Unicode format characters, or more than 1024 bytes ([`check_path`]). The
//! folder is opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` one step at a
//! time, so neither a path nor a link someone left in the folder leads out of it. Quotas (`[files]`): the largest
//! file, all files together, the number of files; a context whose files were all written
//! longer ago than `[files] idle_days` is removed by [`ContextFiles::expire_idle`].

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nix::errno::Errno;
use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{mkdirat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};
use ring::digest::SHA256;

use crate::state::config::files::FilesSection;
use crate::state::store::{ContextFile, Store};

mod error;
mod path;
mod put;
mod read;
mod spool;
mod work;

pub use self::read::OpenedFile;

pub use self::error::FileError;
pub use self::path::{check_path, content_type};

/// Longest path of a file in a context's folder, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;

/// Who wrote a file that came in by `PUT`.
pub const UPLOAD: &str = "upload";

/// The working folders of every context.
#[derive(Debug, Clone)]
pub struct ContextFiles {
    root: PathBuf,
    store: Store,
    limits: FilesSection,
    /// Held while a file's version changes on disk and in the record (a `PUT` renames it
    /// in and records it, a delete unlinks and forgets it) and while a reader opens a file
    /// and reads its record: a reader's record is that of the version it opened.
    versions: Arc<Mutex<()>>,
    /// The list of each context's files as last read, with the list's version then
    /// ([`crate::state::store::Store::context_files_version`]): a call in a context whose
    /// files did not change gets it without reading the database (and an executor that
    /// holds it by its digest gets the digest alone).
    lists: Arc<skillbox_protocol::workdir::HeldLists<i64>>,
}

/// `openat2` that stays beneath `dir` and follows no link.
fn beneath(dir: impl AsFd, path: &str, flags: OFlag) -> nix::Result<OwnedFd> {
    let how = OpenHow::new()
        .flags(flags | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    openat2(dir, path, how)
}

impl ContextFiles {
    /// The folders under `<state>/contexts/`, recorded in `store`, within `limits`.
    pub fn new(state_dir: &Path, store: Store, limits: FilesSection) -> Self {
        Self {
            root: state_dir.join("contexts"),
            store,
            limits,
            versions: Arc::new(Mutex::new(())),
            lists: Arc::default(),
        }
    }

    /// Holds [`ContextFiles::versions`] (a panic while it was held left nothing to repair:
    /// it guards no data).
    fn hold_versions(&self) -> MutexGuard<'_, ()> {
        self.versions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The folder of `context_id` (not created).
    pub fn folder(&self, context_id: &str) -> PathBuf {
        let digest = ring::digest::digest(&SHA256, context_id.as_bytes());
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        self.root.join(hex)
    }

    /// The context's folder, opened (and made, owner-only, when `create`).
    fn open_folder(&self, context_id: &str, create: bool) -> Result<Option<OwnedFd>, FileError> {
        let folder = self.folder(context_id);
        if create {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&folder)
                .map_err(|source| FileError::Io {
                    step: "make the folder",
                    source,
                })?;
        }
        match nix::fcntl::open(
            &folder,
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(Some(fd)),
            Err(Errno::ENOENT) => Ok(None),
            Err(e) => Err(FileError::io("open the folder")(e)),
        }
    }

    /// The folder holding the last segment of `segments`, opened beneath the context's
    /// folder; made on the way when `create`.
    fn open_parent(
        &self,
        folder: OwnedFd,
        segments: &[&str],
        create: bool,
    ) -> Result<Option<OwnedFd>, FileError> {
        let mut dir = folder;
        for seg in &segments[..segments.len().saturating_sub(1)] {
            let opened = match beneath(&dir, seg, OFlag::O_DIRECTORY | OFlag::O_RDONLY) {
                Err(Errno::ENOENT) if create => {
                    mkdirat(&dir, *seg, Mode::from_bits_truncate(0o700))
                        .or_else(|e| if e == Errno::EEXIST { Ok(()) } else { Err(e) })
                        .map_err(FileError::io("make a folder"))?;
                    beneath(&dir, seg, OFlag::O_DIRECTORY | OFlag::O_RDONLY)
                }
                other => other,
            };
            dir = match opened {
                Ok(fd) => fd,
                Err(Errno::ENOENT) => return Ok(None),
                Err(Errno::ENOTDIR | Errno::ELOOP | Errno::EXDEV) => {
                    return Err(FileError::BadPath {
                        path: segments.join("/"),
                        rule: "a segment of it is a file or a link, not a folder",
                    })
                }
                Err(e) => return Err(FileError::io("open a folder")(e)),
            };
        }
        Ok(Some(dir))
    }

    /// Records whether `path` of `context_id` is executable, as the call that wrote it
    /// left it (it is laid out 0755 for the next call). Blocking.
    pub fn set_executable(
        &self,
        context_id: &str,
        path: &str,
        executable: bool,
    ) -> Result<(), FileError> {
        if self
            .store
            .set_context_file_executable(context_id, path, executable)?
        {
            Ok(())
        } else {
            Err(FileError::NotFound {
                context: context_id.to_string(),
                path: path.to_string(),
            })
        }
    }

    /// What `context_id`'s folder holds.
    pub fn list(&self, context_id: &str) -> Result<Vec<ContextFile>, FileError> {
        Ok(self.store.context_files(context_id)?)
    }

    /// Removes `path` of `context_id`. Blocking.
    pub fn delete(&self, context_id: &str, path: &str) -> Result<(), FileError> {
        let segments = check_path(path)?;
        let not_found = || FileError::NotFound {
            context: context_id.to_string(),
            path: path.to_string(),
        };
        let known = self.store.context_file(context_id, path)?.is_some();
        let folder = self.open_folder(context_id, false)?.ok_or_else(not_found)?;
        let parent = self
            .open_parent(folder, &segments, false)?
            .ok_or_else(not_found)?;
        let name = segments.last().copied().unwrap_or_default();
        let _versions = self.hold_versions();
        match unlinkat(&parent, name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) => {}
            Err(Errno::ENOENT) if known => {}
            Err(Errno::ENOENT) => return Err(not_found()),
            Err(Errno::EISDIR) => {
                return Err(FileError::NotAFile {
                    path: path.to_string(),
                })
            }
            Err(e) => return Err(FileError::io("remove the file")(e)),
        }
        self.store.delete_context_file(context_id, path)?;
        Ok(())
    }

    /// Removes `context_id`'s folder and forgets its files, pins and owner. Blocking.
    pub fn delete_context(&self, context_id: &str) -> Result<(), FileError> {
        match std::fs::remove_dir_all(self.folder(context_id)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(FileError::Io {
                    step: "remove the folder",
                    source,
                })
            }
        }
        self.store.delete_context(context_id)?;
        Ok(())
    }

    /// Removes every context none of whose files was written in the last
    /// `[files] idle_days` before `now` (Unix ms); returns their ids. Blocking.
    pub fn expire_idle(&self, now: i64) -> Result<Vec<String>, FileError> {
        if self.limits.idle_days == 0 {
            return Ok(Vec::new());
        }
        let days = i64::try_from(self.limits.idle_days).unwrap_or(i64::MAX);
        let before = now.saturating_sub(days.saturating_mul(86_400_000));
        let idle = self.store.idle_contexts(before)?;
        for id in &idle {
            self.delete_context(id)?;
            tracing::info!(context_id = %id, "an idle context's files were removed");
        }
        Ok(idle)
    }
}

/// A SHA-256 digest in lowercase hex.
fn hex(digest: ring::digest::Digest) -> String {
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
