//! A context's folder as a call made in it gets it: the list of its files
//! ([`ContextFiles::work_dir`]) and their bytes chunk by chunk ([`ContextFiles::read_chunk`])
//! for the executor that runs the call (docs/sessions.md).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use skillbox_protocol::workdir::{FileList, WorkDir, WorkFile, MAX_CHUNK_BYTES};

use super::read::open_file_beneath;
use super::{check_path, ContextFiles, FileError};

/// Most contexts whose last list is kept in memory.
pub const MAX_LISTS: usize = 64;

/// The list of each context's files as last read, with the list's version then
/// ([`crate::state::store::Store::context_files_version`]): a call in a context whose
/// files did not change gets it without reading the database. At most [`MAX_LISTS`], the
/// longest unused going first.
#[derive(Debug, Default)]
pub struct Lists {
    held: Mutex<HashMap<String, Listed>>,
    clock: AtomicU64,
}

#[derive(Debug)]
struct Listed {
    version: i64,
    files: Arc<FileList>,
    used: u64,
}

impl Lists {
    /// The list of `context` read at `version`, if it is the one kept.
    fn get(&self, context: &str, version: i64) -> Option<Arc<FileList>> {
        let mut held = self.held.lock().ok()?;
        let listed = held.get_mut(context).filter(|l| l.version == version)?;
        listed.used = self.clock.fetch_add(1, Ordering::Relaxed);
        Some(Arc::clone(&listed.files))
    }

    /// Keeps `files`, the list of `context` read at `version`.
    fn put(&self, context: &str, version: i64, files: Arc<FileList>) {
        let Ok(mut held) = self.held.lock() else {
            return;
        };
        let used = self.clock.fetch_add(1, Ordering::Relaxed);
        let listed = Listed {
            version,
            files,
            used,
        };
        held.insert(context.to_string(), listed);
        while held.len() > MAX_LISTS {
            let Some(oldest) = (held.iter())
                .min_by_key(|(_, l)| l.used)
                .map(|(c, _)| c.clone())
            else {
                break;
            };
            held.remove(&oldest);
        }
    }
}

impl ContextFiles {
    /// Every file of `context_id` with the quotas a call must keep to. Blocking.
    pub fn work_dir(&self, context_id: &str) -> Result<WorkDir, FileError> {
        let files = self.work_list(context_id)?;
        Ok(WorkDir {
            files,
            max_file_bytes: self.limits.max_file_bytes,
            max_total_bytes: self.limits.max_total_bytes,
            max_files: self.limits.max_files,
            context_id: Some(context_id.to_string()),
        })
    }

    /// The list of `context_id`'s files: the one kept when its version is the
    /// database's, else read (the version first: a change between the two reads leaves a
    /// list newer than its version, read again next time, never an older one).
    fn work_list(&self, context_id: &str) -> Result<Arc<FileList>, FileError> {
        let version = self.store.context_files_version(context_id)?;
        if let Some(files) = self.lists.get(context_id, version) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn list(n: usize) -> Arc<FileList> {
        let file = |i: usize| WorkFile {
            path: format!("f{i}"),
            size: 1,
            sha256: "ab".repeat(32),
            executable: false,
        };
        Arc::new((0..n).map(file).collect())
    }

    /// A list is served at the version it was read at and at no other; at most
    /// [`MAX_LISTS`] are kept, the longest unused going first.
    #[test]
    fn a_kept_list_is_served_only_at_its_version_and_within_the_bound() {
        let lists = Lists::default();
        lists.put("c", 3, list(2));
        assert_eq!(lists.get("c", 3).map(|l| l.len()), Some(2));
        assert!(lists.get("c", 4).is_none(), "the list changed since");
        assert!(lists.get("other", 3).is_none());
        lists.put("c", 4, list(1));
        assert!(lists.get("c", 3).is_none(), "replaced");
        for i in 0..MAX_LISTS {
            lists.get("c", 4);
            lists.put(&format!("n{i}"), 1, list(1));
        }
        assert_eq!(lists.held.lock().unwrap().len(), MAX_LISTS);
        assert!(lists.get("c", 4).is_some(), "used most recently, kept");
        assert!(lists.get("n0", 1).is_none(), "the longest unused went");
    }
}
