//! A context's file going out: opened once with the record of the version opened
//! ([`ContextFiles::open`]), for a download streamed from the descriptor, or read whole
//! ([`ContextFiles::get`], MCP's `resources/read`).

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::{fstat, SFlag};
use ring::digest::{Context as Digest, SHA256};

use super::{beneath, check_path, hex, ContextFiles, FileError};
use crate::state::store::ContextFile;

/// The bytes hashed at once when a file's SHA-256 is taken from disk.
const HASH_CHUNK_BYTES: usize = 1024 * 1024;

/// A context's file opened for reading, with the record of the version opened.
#[derive(Debug)]
pub struct OpenedFile {
    /// Its record; the size and SHA-256 are those of the bytes `file` holds.
    pub record: ContextFile,
    /// The file, at offset 0.
    pub file: File,
}

impl ContextFiles {
    /// Opens `path` of `context_id` for reading. Blocking.
    ///
    /// One snapshot: the file is opened and its record read while no version of it is
    /// put in place or removed ([`ContextFiles::versions`]), and a later `PUT` renames a
    /// new version in, which leaves the open file as it was. So the record's size and
    /// SHA-256 (the `ETag`) describe the bytes the descriptor holds, however long it is
    /// read. When the file's size is not the record's (it was changed outside the core),
    /// they are taken from the bytes on disk instead.
    pub fn open(&self, context_id: &str, path: &str) -> Result<OpenedFile, FileError> {
        let segments = check_path(path)?;
        let not_found = || FileError::NotFound {
            context: context_id.to_string(),
            path: path.to_string(),
        };
        let (mut record, fd, size) = {
            let _versions = self.hold_versions();
            let record = (self.store.context_file(context_id, path)?).ok_or_else(not_found)?;
            let folder = self.open_folder(context_id, false)?.ok_or_else(not_found)?;
            let (fd, size) = open_file_beneath(&folder, &segments.join("/"), not_found, path)?;
            (record, fd, size)
        };
        if size > self.limits.max_file_bytes {
            return Err(FileError::FileTooLarge {
                limit: self.limits.max_file_bytes,
            });
        }
        let file = File::from(fd);
        if size != record.size {
            tracing::warn!(
                context_id,
                path,
                "a context file's size is not its record's; its SHA-256 is taken from disk"
            );
            (record.size, record.sha256) = digest_of(&file)?;
        }
        Ok(OpenedFile { record, file })
    }

    /// The bytes of `path` of `context_id`, and its record (as [`ContextFiles::open`]
    /// gives it). Blocking.
    pub fn get(&self, context_id: &str, path: &str) -> Result<(ContextFile, Vec<u8>), FileError> {
        let OpenedFile { mut record, file } = self.open(context_id, path)?;
        let mut bytes = Vec::with_capacity(usize::try_from(record.size).unwrap_or(0));
        (&file)
            .read_to_end(&mut bytes)
            .map_err(|source| FileError::Io {
                step: "read the file",
                source,
            })?;
        if u64::try_from(bytes.len()).ok() != Some(record.size) {
            record.size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
            record.sha256 = hex(ring::digest::digest(&SHA256, &bytes));
        }
        Ok((record, bytes))
    }
}

/// The regular file `relative` beneath `folder`, opened for reading, and its size; a link,
/// a folder or anything else is [`FileError::NotAFile`] (`path` as the caller named it).
pub(super) fn open_file_beneath(
    folder: impl AsFd,
    relative: &str,
    not_found: impl Fn() -> FileError,
    path: &str,
) -> Result<(OwnedFd, u64), FileError> {
    let not_a_file = || FileError::NotAFile {
        path: path.to_string(),
    };
    let fd = match beneath(folder, relative, OFlag::O_RDONLY) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Err(not_found()),
        Err(Errno::ELOOP | Errno::EXDEV | Errno::ENOTDIR) => return Err(not_a_file()),
        Err(e) => return Err(FileError::io("open the file")(e)),
    };
    let stat = fstat(&fd).map_err(FileError::io("read the file's type"))?;
    if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Err(not_a_file());
    }
    Ok((fd, u64::try_from(stat.st_size).unwrap_or(u64::MAX)))
}

/// The size and hex SHA-256 of the bytes `file` holds (read by offset: its position is
/// left where it was). Blocking.
fn digest_of(file: &File) -> Result<(u64, String), FileError> {
    let mut digest = Digest::new(&SHA256);
    let mut buf = vec![0u8; HASH_CHUNK_BYTES];
    let mut at: u64 = 0;
    loop {
        let n = match file.read_at(&mut buf, at) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(FileError::Io {
                    step: "read the file",
                    source,
                })
            }
        };
        digest.update(&buf[..n]);
        at = at.saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
    }
    Ok((at, hex(digest.finish())))
}
