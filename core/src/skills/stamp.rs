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
//! is still seen. Local skills (not in the install lock) are not stamped: they may be
//! edited while they run.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use skillbox_protocol::skill::{Catalog, InstallLock, Skill};

use crate::skills::install::TrustPolicy;

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

/// The stamps of the installed skills of one load, by name.
#[derive(Debug, Default)]
pub struct InstalledStamps(HashMap<String, Result<FolderStamp, String>>);

impl InstalledStamps {
    /// Stamps every skill of `catalog` that the install lock of `policy` lists and that is
    /// in its install place (the skills the trust policy re-verifies). Call it before
    /// they are hashed, so a change during the hashing is seen too.
    pub fn read(catalog: &Catalog, policy: &TrustPolicy) -> Self {
        let Ok(Some(lock)) = InstallLock::read(&policy.skills_root) else {
            return Self::default();
        };
        let stamps = (catalog.skills.iter())
            .filter(|s| lock.get(&s.name).is_some())
            .filter(|s| s.dir == policy.skills_root.join(&s.name))
            .map(|s| {
                let stamp = FolderStamp::read(&s.dir).map_err(|e| e.to_string());
                (s.name.clone(), stamp)
            })
            .collect();
        Self(stamps)
    }

    /// Refuses `skill` when it is stamped and its files are no longer as verified: the
    /// reason, saying what changed and what to do.
    pub fn check(&self, skill: &Skill) -> Result<(), String> {
        let Some(stamped) = self.0.get(&skill.name) else {
            return Ok(());
        };
        let what = match (stamped, FolderStamp::read(&skill.dir)) {
            (Ok(then), Ok(now)) => match then.first_change(&now) {
                None => return Ok(()),
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
mod tests {
    use serde_json::json;
    use skillbox_protocol::result::ErrorKind;
    use skillbox_protocol::skill::{discover, DiscoveryOptions, LockedSkill, Trust};

    use super::*;
    use crate::state::Workspace;

    /// A workspace with the installed skill `echo` (in the lock) and the local skill
    /// `draft`; the catalogue and its stamps.
    fn installed(ws: &Path) -> (Catalog, InstalledStamps) {
        let skills = ws.join("skills");
        for name in ["echo", "draft"] {
            let d = skills.join(name);
            std::fs::create_dir_all(d.join("scripts")).unwrap();
            std::fs::write(
                d.join("skill.yaml"),
                format!("name: {name}\ndescription: d\ntools:\n  - name: run\n    description: r\n    command: [\"sh\", \"scripts/run.sh\"]\n"),
            )
            .unwrap();
            std::fs::write(d.join("scripts/run.sh"), "echo '{}'\n").unwrap();
        }
        let mut lock = InstallLock::default();
        lock.skills.insert(
            "echo".into(),
            LockedSkill {
                version: None,
                digest: format!("sha256:{}", "0".repeat(64)),
                trust: Trust::Local,
                publisher: None,
                leaf_fingerprint: None,
                publisher_key: None,
                root_fingerprint: None,
                installed_at: "2026-01-01T00:00:00Z".into(),
                origin: None,
            },
        );
        std::fs::write(
            InstallLock::path(&skills),
            serde_json::to_vec(&lock).unwrap(),
        )
        .unwrap();
        let catalog = discover(std::slice::from_ref(&skills), DiscoveryOptions::default());
        let policy = TrustPolicy::for_workspace(&Workspace::new(ws), false);
        let stamps = InstalledStamps::read(&catalog, &policy);
        (catalog, stamps)
    }

    #[tokio::test]
    async fn call_of_an_installed_skill_edited_after_verification_is_refused_at_admission() {
        let dir = tempfile::tempdir().unwrap();
        let (catalog, stamps) = installed(dir.path());
        let dispatcher = crate::calls::test_dispatcher(dir.path(), Catalog::default());
        dispatcher.load().swap(catalog, None, stamps);
        // Unchanged: admitted (it then finds no executor here).
        let r = dispatcher.call_named("echo:run", json!({})).await;
        assert!(
            !r.error
                .clone()
                .unwrap_or_default()
                .contains("files changed"),
            "{r:?}"
        );
        // Edited in place, as an attacker with write access to the skills folder would.
        let script = dir.path().join("skills/echo/scripts/run.sh");
        std::fs::write(&script, "cat /etc/passwd\n").unwrap();
        let r = dispatcher.call_named("echo:run", json!({})).await;
        assert!(!r.success);
        assert_eq!(r.error_kind, Some(ErrorKind::PermissionDenied), "{r:?}");
        let error = r.error.unwrap();
        assert!(error.contains("files changed since install"), "{error}");
        assert!(error.contains("\"scripts/run.sh\" changed"), "{error}");
        assert!(error.contains("reinstall it"), "{error}");
        // A file added is seen too.
        std::fs::write(dir.path().join("skills/echo/extra.sh"), "x").unwrap();
        let e = dispatcher
            .call_named("echo:run", json!({}))
            .await
            .error
            .unwrap();
        assert!(e.contains("files changed since install"), "{e}");
        // A folder that cannot be read any more is refused too, saying so.
        std::fs::rename(
            dir.path().join("skills/echo"),
            dir.path().join("echo-moved"),
        )
        .unwrap();
        let e = dispatcher
            .call_named("echo:run", json!({}))
            .await
            .error
            .unwrap();
        assert!(e.contains("its files cannot be read now"), "{e}");
        // A local skill (not in the lock) may be edited while it runs.
        std::fs::write(dir.path().join("skills/draft/scripts/run.sh"), "echo 1\n").unwrap();
        let r = dispatcher.call_named("draft:run", json!({})).await;
        assert!(
            !r.error
                .clone()
                .unwrap_or_default()
                .contains("files changed"),
            "{r:?}"
        );
    }

    #[test]
    fn stamp_names_what_changed_a_file_removed_or_added() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), "1").unwrap();
        std::fs::write(dir.path().join("b"), "1").unwrap();
        let then = FolderStamp::read(dir.path()).unwrap();
        assert_eq!(
            then.first_change(&FolderStamp::read(dir.path()).unwrap()),
            None
        );
        std::fs::remove_file(dir.path().join("a")).unwrap();
        let now = FolderStamp::read(dir.path()).unwrap();
        let what = then.first_change(&now).unwrap();
        // Removing a file changes the folder first (its times), then names the file.
        assert!(
            what.contains("changed") || what.contains("removed"),
            "{what}"
        );
        let mut only_files = then.clone();
        only_files.0.retain(|e| !e.path.as_os_str().is_empty());
        let mut now_files = now.clone();
        now_files.0.retain(|e| !e.path.as_os_str().is_empty());
        assert_eq!(
            only_files.first_change(&now_files).unwrap(),
            "\"a\" was removed"
        );
        assert_eq!(
            now_files.first_change(&only_files).unwrap(),
            "\"a\" was added"
        );
    }
}
