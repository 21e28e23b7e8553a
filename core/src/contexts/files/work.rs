//! A context's folder as a call made in it gets it: the list of its files
//! ([`ContextFiles::work_dir`]) and their bytes chunk by chunk ([`ContextFiles::read_chunk`])
//! for the executor that runs the call (docs/sessions.md).

use std::sync::Arc;

use skillbox_protocol::workdir::{FileList, WorkDir, WorkFile, MAX_CHUNK_BYTES};

use super::read::open_file_beneath;
use super::{check_path, ContextFiles, FileError};
use crate::state::store::FreeConn;

impl ContextFiles {
    /// Every file of `context_id` with the quotas a call must keep to. Blocking.
    pub fn work_dir(&self, context_id: &str) -> Result<WorkDir, FileError> {
        let files = self.work_list(context_id)?;
        Ok(self.work_dir_of(context_id, files))
    }

    /// [`ContextFiles::work_dir`] when the list kept is at the version `conn` reads, else
    /// `None` (the list changed: it is read on a blocking thread). One indexed read, no
    /// wait.
    pub fn held_work_dir(&self, conn: &FreeConn<'_>, context_id: &str) -> Option<WorkDir> {
        let version = conn.context_files_version(context_id).ok()?;
        let files = self.lists.get(context_id, &version)?;
        Some(self.work_dir_of(context_id, files))
    }

    /// The folder of `context_id` holding `files`, with the quotas a call must keep to.
    fn work_dir_of(&self, context_id: &str, files: Arc<FileList>) -> WorkDir {
        WorkDir {
            files,
            max_file_bytes: self.limits.max_file_bytes,
            max_total_bytes: self.limits.max_total_bytes,
            max_files: self.limits.max_files,
            context_id: Some(context_id.to_string()),
            ..WorkDir::default()
        }
    }

    /// The list of `context_id`'s files: the one kept when its version is the
    /// database's, else read (the version first: a change between the two reads leaves a
    /// list newer than its version, read again next time, never an older one).
    fn work_list(&self, context_id: &str) -> Result<Arc<FileList>, FileError> {
        let version = self.store.context_files_version(context_id)?;
        if let Some(files) = self.lists.get(context_id, &version) {
            return Ok(files);
        }
        let files: Vec<WorkFile> = (self.store.context_files(context_id)?.into_iter())
            .map(|f| WorkFile {
                path: f.path,
                size: f.size,
                sha256: f.sha256,
                executable: f.executable,
            })
            .collect();
        let files = Arc::new(FileList::new(files));
        // Encoded and named here, off the async threads, once per version.
        if let Err(e) = files.sha256() {
            tracing::warn!(context = context_id, error = %e, "a context's list could not be encoded");
        }
        self.lists.put(context_id, version, Arc::clone(&files));
        Ok(files)
    }

    /// `path` of `context_id`, opened for reading (a regular file beneath the context's
    /// folder, never through a link), and its size. Blocking.
    pub fn open_regular(
        &self,
        context_id: &str,
        path: &str,
    ) -> Result<(std::fs::File, u64), FileError> {
        let segments = check_path(path)?;
        let not_found = || FileError::NotFound {
            context: context_id.to_string(),
            path: path.to_string(),
        };
        let folder = self.open_folder(context_id, false)?.ok_or_else(not_found)?;
        let (fd, size) = open_file_beneath(&folder, &segments.join("/"), not_found, path)?;
        Ok((std::fs::File::from(fd), size))
    }

    /// Up to `len` bytes (at most [`MAX_CHUNK_BYTES`]) of `path` of `context_id` from
    /// `offset`, and whether they reach its end. Blocking.
    pub fn read_chunk(
        &self,
        context_id: &str,
        path: &str,
        offset: u64,
        len: u64,
    ) -> Result<(Vec<u8>, bool), FileError> {
        let (file, size) = self.open_regular(context_id, path)?;
        let want = len.min(MAX_CHUNK_BYTES as u64);
        let end = offset.saturating_add(want).min(size);
        let mut buf = vec![0u8; usize::try_from(end.saturating_sub(offset)).unwrap_or(0)];
        let mut filled = 0;
        while filled < buf.len() {
            let at = offset + filled as u64;
            let n = std::os::unix::fs::FileExt::read_at(&file, &mut buf[filled..], at).map_err(
                |source| FileError::Io {
                    step: "read the file",
                    source,
                },
            )?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        buf.truncate(filled);
        Ok((buf, offset + filled as u64 >= size))
    }
}
