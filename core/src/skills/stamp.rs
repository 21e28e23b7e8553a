//! What an installed skill's files looked like when they were verified, so a call is
//! refused the moment they change, not at the next reload.
//!
//! A reload (and the start) re-hashes every installed skill against the digest its
//! install recorded; an edit after that would run until the watch's reload disables the
//! skill (a few hundred ms). So the load also records, just before hashing, a
//! [`FolderStamp`] of each installed skill: every entry's path, type and mode, inode,
//! size, and modification and change times. Admission ([`InstalledStamps::check`]) reads
//! the stamp again, one `lstat` per entry and no hashing, and refuses the call
//! (`permission_denied`, "files changed since install") when it differs. The change time
//! cannot be set back by a user, so an edit that restores the size and modification time
//! is still seen. An inotify watch ([`super::stamp_watch`]) spares that read while nothing
//! in the skill changed. Local skills (not in the install lock) are not stamped: they may
//! be edited while they run.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use skillbox_protocol::skill::{Catalog, InstallLock, Skill};

use crate::skills::install::TrustPolicy;
use crate::skills::stamp_watch::StampWatch;

/// Most entries stamped in one skill folder; a bigger one cannot be stamped and its calls
/// are refused until it is reinstalled smaller (a package holds far fewer files).
pub const MAX_STAMPED_ENTRIES: usize = 10_000;

/// One entry of a folder: what a change to it would change.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    path: PathBuf,
    mode: u32,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Entry {
    fn of(path: PathBuf, meta: &std::fs::Metadata) -> Self {
        Entry {
            path,
            mode: meta.mode(),
            ino: meta.ino(),
            size: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// The entries of a skill folder, sorted by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderStamp(Vec<Entry>);

/// Why a folder could not be stamped.
#[derive(Debug, thiserror::Error)]
pub enum StampError {
    /// An entry could not be listed or looked at.
    #[error("{} cannot be read: {source}", path.display())]
    Read {
        /// The entry.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The folder holds more entries than are stamped.
    #[error("it holds more than {MAX_STAMPED_ENTRIES} files and folders")]
    TooMany,
}

impl FolderStamp {
    /// Stamps `dir` and everything under it (links are not followed). Each entry is looked
    /// at relative to its open folder (`DirEntry::metadata`, an `fstatat` without following
    /// a link), not by its whole path again.
    pub fn read(dir: &Path) -> Result<Self, StampError> {
        let read = |path: &Path, source| StampError::Read {
            path: path.to_owned(),
            source,
        };
        let top = std::fs::symlink_metadata(dir).map_err(|e| read(dir, e))?;
        let mut entries = vec![Entry::of(PathBuf::new(), &top)];
        let mut pending = match top.is_dir() {
            true => vec![PathBuf::new()],
            false => Vec::new(),
        };
        while let Some(rel) = pending.pop() {
            let at = dir.join(&rel);
            for child in std::fs::read_dir(&at).map_err(|e| read(&at, e))? {
                let child = child.map_err(|e| read(&at, e))?;
                let path = rel.join(child.file_name());
                let meta = child.metadata().map_err(|e| read(&dir.join(&path), e))?;
                if meta.is_dir() {
                    pending.push(path.clone());
                }
                entries.push(Entry::of(path, &meta));
                if entries.len() > MAX_STAMPED_ENTRIES {
                    return Err(StampError::TooMany);
                }
            }
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Self(entries))
    }

    /// The first path that differs between `self` (as verified) and `now`.
    fn first_change(&self, now: &Self) -> Option<String> {
        let shown = |p: &Path| match p.as_os_str().is_empty() {
            true => "the skill folder".to_string(),
            false => format!("{:?}", p.display().to_string()),
        };
        let mut old = self.0.iter();
        let mut new = now.0.iter();
        loop {
            match (old.next(), new.next()) {
                (None, None) => return None,
                (Some(a), Some(b)) if a == b => {}
                (Some(a), Some(b)) if a.path == b.path => {
                    return Some(format!("{} changed", shown(&a.path)))
                }
                (Some(a), Some(b)) if a.path < b.path => {
                    return Some(format!("{} was removed", shown(&a.path)))
                }
                (_, Some(b)) => return Some(format!("{} was added", shown(&b.path))),
                (Some(a), None) => return Some(format!("{} was removed", shown(&a.path))),
            }
        }
    }
}

/// The stamps of the installed skills of one load, by name, and the watch that says when
/// one need not be read again ([`StampWatch`]).
#[derive(Debug, Default)]
pub struct InstalledStamps {
    stamps: HashMap<String, Result<FolderStamp, String>>,
    watch: StampWatch,
}

impl InstalledStamps {
    /// Stamps every skill of `catalog` that the install lock of `policy` lists and that is
    /// in its install place (the skills the trust policy re-verifies). Call it before
    /// they are hashed, so a change during the hashing is seen too.
    pub fn read(catalog: &Catalog, policy: &TrustPolicy) -> Self {
        Self::read_watched(catalog, policy, StampWatch::new)
    }

    /// [`InstalledStamps::read`] with the watch `watch` makes when there is an install
    /// lock (tests: another refresh interval or limit). Each skill is watched before its
    /// stamp is read, so no change falls between them.
    pub fn read_watched(
        catalog: &Catalog,
        policy: &TrustPolicy,
        watch: impl FnOnce() -> StampWatch,
    ) -> Self {
        let Ok(Some(lock)) = InstallLock::read(&policy.skills_root) else {
            return Self::default();
        };
        let watch = watch();
        let stamps = (catalog.skills.iter())
            .filter(|s| lock.get(&s.name).is_some())
            .filter(|s| s.dir == policy.skills_root.join(&s.name))
            .map(|s| {
                watch.watch(&s.name, &s.dir);
                let stamp = FolderStamp::read(&s.dir).map_err(|e| e.to_string());
                (s.name.clone(), stamp)
            })
            .collect();
        Self { stamps, watch }
    }

    /// The watch of this load's skills.
    pub fn watch(&self) -> &StampWatch {
        &self.watch
    }

    /// Refuses `skill` when it is stamped and its files are no longer as verified: the
    /// reason, saying what changed and what to do.
    pub fn check(&self, skill: &Skill) -> Result<(), String> {
        let Some(stamped) = self.stamps.get(&skill.name) else {
            return Ok(());
        };
        // Watched with no event since its stamp was last read, not long ago: as verified.
        if stamped.is_ok() && self.watch.unchanged(&skill.name) {
            return Ok(());
        }
        let began = std::time::Instant::now();
        let what = match (stamped, FolderStamp::read(&skill.dir)) {
            (Ok(then), Ok(now)) => match then.first_change(&now) {
                None => {
                    self.watch.verified(&skill.name, began);
                    return Ok(());
                }
                Some(what) => what,
            },
            (Err(e), _) => format!("its files could not be stamped when it was verified ({e})"),
            (_, Err(e)) => format!("its files cannot be read now ({e})"),
        };
        Err(format!(
            "files changed since install: {what} after the skill was verified against the \
             digest it was installed with; reinstall it from its signed package (`skillbox \
             skill install PACKAGE`) or remove it (DELETE /v1/skills/{})",
            skill.name
        ))
    }
}

#[cfg(test)]
#[path = "stamp_tests.rs"]
pub(crate) mod tests;
