//! A file coming into a context's folder: streamed to a temporary file beside its place
//! ([`super::spool`]), within the quotas and a deadline, then renamed in and recorded;
//! nothing of it is left when it fails.

use std::fs::File;
use std::time::Duration;

use bytes::Bytes;
use nix::errno::Errno;
use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::Mode;
use nix::unistd::{unlinkat, UnlinkatFlags};

use super::spool::{spool, SpoolError};
use super::{check_path, ContextFiles, FileError, UPLOAD};
use crate::state::store::{unix_ms_now, ContextFile};

impl ContextFiles {
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
        let (room, is_new) = self.room_for(context_id, path, body.size_hint().lower())?;
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
        let written = tokio::time::timeout(timeout, spool(body, File::from(fd), room)).await;
        let outcome = match written {
            Err(_) => Err(FileError::TimedOut {
                ms: timeout.as_millis(),
            }),
            Ok(Err(SpoolError::Over)) => Err(if room < self.limits.max_file_bytes {
                FileError::OverQuota {
                    context: context_id.to_string(),
                    limit: self.limits.max_total_bytes,
                }
            } else {
                FileError::FileTooLarge {
                    limit: self.limits.max_file_bytes,
                }
            }),
            Ok(Err(SpoolError::Body(e))) => Err(FileError::Broken(e)),
            Ok(Err(SpoolError::Io(source))) => Err(FileError::Io {
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
        // The version replaced, held open across the rename: its blocks are freed when
        // this is closed, after the answer, on a blocking thread, and not in the rename
        // (about 20 ms for 100 MiB). `O_PATH` opens whatever is there without reading it.
        let replaced = openat(
            &parent,
            name.as_str(),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok();
        let versions = self.hold_versions();
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
        drop(versions);
        if let Some(replaced) = replaced {
            tokio::task::spawn_blocking(move || drop(replaced));
        }
        Ok((file, is_new))
    }
    /// The bytes `path` of `context_id` may take within the quotas, and whether it is a new
    /// file; refused at once when the context holds its most files or the body announces
    /// (`announced`) more than one file may hold.
    fn room_for(
        &self,
        context_id: &str,
        path: &str,
        announced: u64,
    ) -> Result<(u64, bool), FileError> {
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
        if announced > self.limits.max_file_bytes {
            return Err(FileError::FileTooLarge {
                limit: self.limits.max_file_bytes,
            });
        }
        Ok((room, before.is_none()))
    }
}
