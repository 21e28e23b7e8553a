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
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use nix::errno::Errno;
use nix::fcntl::{openat, openat2, renameat, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstat, mkdirat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};
use ring::digest::{Context as Digest, SHA256};
use skillbox_protocol::result::ErrorKind;
use tokio::io::AsyncWriteExt;
use unicode_general_category::{get_general_category, GeneralCategory};

use crate::state::config::files::FilesSection;

mod work;
use crate::state::store::{unix_ms_now, ContextFile, Store, StoreError};

/// Longest path of a file in a context's folder, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;

/// Who wrote a file that came in by `PUT`.
pub const UPLOAD: &str = "upload";

/// Why a context's file could not be written, read or removed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path breaks a rule.
    #[error("file path {path:?} is not valid: {rule}")]
    BadPath {
        /// The path given.
        path: String,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// No such file in the context.
    #[error(
        "no file {path:?} in context {context:?}; list them with GET /v1/contexts/{context}/files"
    )]
    NotFound {
        /// The context.
        context: String,
        /// The path.
        path: String,
    },
    /// The path names a folder, or something that is not a regular file.
    #[error("{path:?} is not a regular file in the context's folder")]
    NotAFile {
        /// The path.
        path: String,
    },
    /// The file is over `[files] max_file_bytes`.
    #[error("the file is over the {limit}-byte limit of one file ([files] max_file_bytes)")]
    FileTooLarge {
        /// The limit.
        limit: u64,
    },
    /// The context's files would be over `[files] max_total_bytes`.
    #[error("context {context:?} would hold over {limit} bytes ([files] max_total_bytes); remove files first")]
    OverQuota {
        /// The context.
        context: String,
        /// The limit.
        limit: u64,
    },
    /// The context holds `[files] max_files` already.
    #[error(
        "context {context:?} holds {limit} files already ([files] max_files); remove files first"
    )]
    TooManyFiles {
        /// The context.
        context: String,
        /// The limit.
        limit: usize,
    },
    /// The upload did not arrive in time.
    #[error(
        "the file did not arrive within {ms} ms (gateway.body_timeout_ms); send it without pausing"
    )]
    TimedOut {
        /// The limit.
        ms: u128,
    },
    /// The upload's connection broke.
    #[error("reading the upload failed: {0}")]
    Broken(String),
    /// The file system refused a step.
    #[error("could not {step} in the context's folder: {source}")]
    Io {
        /// What was being done.
        step: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl FileError {
    /// The docs/http-api.md kind of this error.
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            FileError::BadPath { .. } | FileError::NotAFile { .. } | FileError::Broken(_) => {
                ErrorKind::InvalidArgs
            }
            FileError::NotFound { .. } => ErrorKind::NotFound,
            FileError::FileTooLarge { .. }
            | FileError::OverQuota { .. }
            | FileError::TooManyFiles { .. } => ErrorKind::ResourceLimit,
            FileError::TimedOut { .. } => ErrorKind::Timeout,
            FileError::Io { .. } | FileError::Store(_) => ErrorKind::Unavailable,
        }
    }

    fn io(step: &'static str) -> impl Fn(Errno) -> FileError {
        move |e| FileError::Io {
            step,
            source: std::io::Error::from(e),
        }
    }
}

/// The segments of `path`, or the rule it breaks.
pub fn check_path(path: &str) -> Result<Vec<&str>, FileError> {
    let bad = |rule| FileError::BadPath {
        path: path.chars().take(200).collect(),
        rule,
    };
    if path.is_empty() {
        return Err(bad("it is empty"));
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(bad("it is over 1024 bytes"));
    }
    if path.starts_with('/') {
        return Err(bad(
            "it is absolute; give a path relative to the context's folder",
        ));
    }
    if path.chars().any(|c| c.is_control()) {
        return Err(bad("it holds a control character"));
    }
    if path.chars().any(is_format) {
        return Err(bad(
            "it holds a Unicode format character (general category Cf: a bidi override such as \
             U+202E, a zero-width character, U+FEFF), which would show operators another name \
             than the file's",
        ));
    }
    let segments: Vec<&str> = path.split('/').collect();
    for s in &segments {
        match *s {
            "" => return Err(bad("it has an empty segment (`//` or a trailing `/`)")),
            "." | ".." => return Err(bad("`.` and `..` segments are not taken")),
            s if s.len() > 255 => return Err(bad("a segment is over 255 bytes")),
            _ => {}
        }
    }
    Ok(segments)
}

/// Whether `c` is a Unicode format character (general category Cf): invisible, and able to
/// reorder or hide what a name shows (U+202E RIGHT-TO-LEFT OVERRIDE, U+200B..U+200F,
/// U+2066..U+2069, U+FEFF, ...).
fn is_format(c: char) -> bool {
    get_general_category(c) == GeneralCategory::Format
}

/// The `Content-Type` of a file, from its name's extension.
pub fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("txt" | "md" | "log") => "text/plain; charset=utf-8",
        Some("csv") => "text/csv; charset=utf-8",
        Some("json") => "application/json",
        Some("html" | "htm") => "text/html; charset=utf-8",
        Some("pdf") => "application/pdf",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("svg") => "image/svg+xml",
        Some("zip") => "application/zip",
        _ => "application/octet-stream",
    }
}

/// The working folders of every context.
#[derive(Debug, Clone)]
pub struct ContextFiles {
    root: PathBuf,
    store: Store,
    limits: FilesSection,
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
        }
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

    /// Writes the bytes of `body` as `path` of `context_id` (streamed to a temporary file,
    /// then renamed in), within the quotas and `timeout`. Returns the file and whether it
    /// is new.
    pub async fn put<B>(
        &self,
        context_id: &str,
        path: &str,
        body: B,
        timeout: Duration,
    ) -> Result<(ContextFile, bool), FileError>
    where
        B: hyper::body::Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        self.put_by(context_id, path, body, timeout, UPLOAD).await
    }

    /// [`ContextFiles::put`] of a file `written_by` names (a call id, or [`UPLOAD`]).
    pub async fn put_by<B>(
        &self,
        context_id: &str,
        path: &str,
        body: B,
        timeout: Duration,
        written_by: &str,
    ) -> Result<(ContextFile, bool), FileError>
    where
        B: hyper::body::Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        let segments = check_path(path)?;
        let name = segments.last().copied().unwrap_or_default().to_string();
        let existing = self.store.context_files(context_id)?;
        let before = existing.iter().find(|f| f.path == path);
        if before.is_none() && existing.len() >= self.limits.max_files {
            return Err(FileError::TooManyFiles {
                context: context_id.to_string(),
                limit: self.limits.max_files,
            });
        }
        let others: u64 = (existing.iter().filter(|f| f.path != path))
            .map(|f| f.size)
            .sum();
        let room = self
            .limits
            .max_total_bytes
            .saturating_sub(others)
            .min(self.limits.max_file_bytes);
        if body.size_hint().lower() > self.limits.max_file_bytes {
            return Err(FileError::FileTooLarge {
                limit: self.limits.max_file_bytes,
            });
        }
        let folder = self
            .open_folder(context_id, true)?
            .ok_or_else(|| FileError::io("open the folder")(Errno::ENOENT))?;
        let parent = self
            .open_parent(folder, &segments, true)?
            .ok_or_else(|| FileError::io("open a folder")(Errno::ENOENT))?;
        let temp = format!(
            ".upload-{}",
            crate::random::hex(&crate::random::SystemSource::default(), 8, "upload name")
                .map_err(|_| FileError::io("name the upload")(Errno::EIO))?
        );
        let fd = openat(
            &parent,
            temp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(FileError::io("make the file"))?;
        let written = tokio::time::timeout(timeout, copy(body, fd, room)).await;
        let outcome = match written {
            Err(_) => Err(FileError::TimedOut {
                ms: timeout.as_millis(),
            }),
            Ok(Err(CopyError::Over)) => Err(if room < self.limits.max_file_bytes {
                FileError::OverQuota {
                    context: context_id.to_string(),
                    limit: self.limits.max_total_bytes,
                }
            } else {
                FileError::FileTooLarge {
                    limit: self.limits.max_file_bytes,
                }
            }),
            Ok(Err(CopyError::Body(e))) => Err(FileError::Broken(e)),
            Ok(Err(CopyError::Io(source))) => Err(FileError::Io {
                step: "write the file",
                source,
            }),
            Ok(Ok(done)) => Ok(done),
        };
        let (size, sha256) = match outcome {
            Ok(done) => done,
            Err(e) => {
                let _ = unlinkat(&parent, temp.as_str(), UnlinkatFlags::NoRemoveDir);
                return Err(e);
            }
        };
        if let Err(e) = renameat(&parent, temp.as_str(), &parent, name.as_str()) {
            let _ = unlinkat(&parent, temp.as_str(), UnlinkatFlags::NoRemoveDir);
            return Err(match e {
                Errno::EISDIR | Errno::ENOTEMPTY | Errno::EEXIST => FileError::NotAFile {
                    path: path.to_string(),
                },
                e => FileError::io("put the file in place")(e),
            });
        }
        let file = ContextFile {
            path: path.to_string(),
            size,
            sha256,
            modified: unix_ms_now(),
            written_by: written_by.to_string(),
            executable: false,
        };
        self.store.put_context_file(context_id, &file)?;
        Ok((file, before.is_none()))
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

    /// The bytes of `path` of `context_id`, and its record. Blocking.
    ///
    /// One snapshot: the file is opened once (a `PUT` renames a new version in, so the
    /// open file stays the version it was), and the record's size and SHA-256 (the
    /// `ETag`) are those of the bytes read from it, not the database's, which a racing
    /// `PUT` may have changed in between.
    pub fn get(&self, context_id: &str, path: &str) -> Result<(ContextFile, Vec<u8>), FileError> {
        let segments = check_path(path)?;
        let not_found = || FileError::NotFound {
            context: context_id.to_string(),
            path: path.to_string(),
        };
        let mut record = self
            .store
            .context_file(context_id, path)?
            .ok_or_else(not_found)?;
        let folder = self.open_folder(context_id, false)?.ok_or_else(not_found)?;
        let fd = match beneath(&folder, &segments.join("/"), OFlag::O_RDONLY) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Err(not_found()),
            Err(Errno::ELOOP | Errno::EXDEV | Errno::ENOTDIR) => {
                return Err(FileError::NotAFile {
                    path: path.to_string(),
                })
            }
            Err(e) => return Err(FileError::io("open the file")(e)),
        };
        let stat = fstat(&fd).map_err(FileError::io("read the file's type"))?;
        if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
            return Err(FileError::NotAFile {
                path: path.to_string(),
            });
        }
        let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
        if size > self.limits.max_file_bytes {
            return Err(FileError::FileTooLarge {
                limit: self.limits.max_file_bytes,
            });
        }
        let mut bytes = Vec::new();
        use std::io::Read;
        std::fs::File::from(fd)
            .read_to_end(&mut bytes)
            .map_err(|source| FileError::Io {
                step: "read the file",
                source,
            })?;
        record.size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        record.sha256 = hex(ring::digest::digest(&SHA256, &bytes));
        Ok((record, bytes))
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

/// Why a copy stopped.
enum CopyError {
    Over,
    Body(String),
    Io(std::io::Error),
}

/// Copies `body` into `fd`, at most `room` bytes; the size and hex SHA-256.
async fn copy<B>(mut body: B, fd: OwnedFd, room: u64) -> Result<(u64, String), CopyError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut file = tokio::fs::File::from_std(std::fs::File::from(fd));
    let mut digest = Digest::new(&SHA256);
    let mut size: u64 = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| CopyError::Body(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        size = size.saturating_add(u64::try_from(data.len()).unwrap_or(u64::MAX));
        if size > room {
            return Err(CopyError::Over);
        }
        digest.update(&data);
        file.write_all(&data).await.map_err(CopyError::Io)?;
    }
    file.sync_all().await.map_err(CopyError::Io)?;
    Ok((size, hex(digest.finish())))
}

/// A SHA-256 digest in lowercase hex.
fn hex(digest: ring::digest::Digest) -> String {
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
