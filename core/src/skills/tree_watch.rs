//! A recursive inotify watch of folder trees that reports changes and nothing else.
//!
//! It replaced the `notify` crate's watch, which always asks the kernel for opens
//! (`IN_OPEN`, with no way to leave it out): every call of a skill's tool execs a program
//! inside a skills root, so the core's watcher thread woke once per call only to drop the
//! event (about 6 % of the core's CPU under 16 clients, docs/hot-path.md). Here the mask
//! holds changes only, so a call wakes nothing, and events are read on the runtime (no
//! thread of its own).
//!
//! Folders are watched as they appear (a folder made or moved in is walked and watched
//! with everything under it); links to folders are followed, each folder watched once
//! however many paths lead to it. When the kernel's queue overflowed, events were lost:
//! that is reported as a change, and the roots are walked again for folders made
//! meanwhile.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use futures_util::StreamExt;
use inotify::{EventMask, EventStream, Inotify, WatchDescriptor, WatchMask};

/// Most folders watched at once; a larger tree is watched in part (a warning says so).
pub const MAX_WATCHED_FOLDERS: usize = 8192;

/// Bytes read from the kernel at a time (a few hundred events).
const EVENT_BUFFER_BYTES: usize = 16 * 1024;

/// What counts as a change: an entry made, written, removed, renamed or with its metadata
/// changed, and a watched folder itself removed or moved. Not opens, reads or closes
/// after reading: those change nothing.
fn changes() -> WatchMask {
    WatchMask::CREATE
        | WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::ATTRIB
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
}

/// A watch of every folder under some roots.
#[derive(Debug)]
pub struct TreeWatch {
    events: EventStream<Vec<u8>>,
    /// The watched folders by watch (one path per folder, the first found).
    folders: HashMap<WatchDescriptor, PathBuf>,
    roots: Vec<PathBuf>,
    /// Most folders watched ([`MAX_WATCHED_FOLDERS`]).
    max_folders: usize,
    warned_full: bool,
}

impl TreeWatch {
    /// Watches every folder under `roots`. Needs a tokio runtime. Fails when a root cannot
    /// be watched: missing, not a folder, or no inotify instance or watch left.
    pub fn start(roots: &[PathBuf]) -> io::Result<Self> {
        Self::start_with_limit(roots, MAX_WATCHED_FOLDERS)
    }

    fn start_with_limit(roots: &[PathBuf], max_folders: usize) -> io::Result<Self> {
        let events = Inotify::init()?.into_event_stream(vec![0u8; EVENT_BUFFER_BYTES])?;
        let mut watch = Self {
            events,
            folders: HashMap::new(),
            roots: roots.to_vec(),
            max_folders,
            warned_full: false,
        };
        for root in roots {
            watch.add_tree(root, true)?;
        }
        Ok(watch)
    }

    /// How many folders are watched.
    pub fn folders(&self) -> usize {
        self.folders.len()
    }

    /// Waits for the next change under the roots. An error means the watch is broken (the
    /// caller falls back to polling).
    pub async fn changed(&mut self) -> io::Result<()> {
        loop {
            let event = match self.events.next().await {
                Some(event) => event?,
                None => return Err(io::Error::other("the inotify event stream ended")),
            };
            if event.mask.contains(EventMask::Q_OVERFLOW) {
                for root in self.roots.clone() {
                    let _ = self.add_tree(&root, false);
                }
                return Ok(());
            }
            if event.mask.contains(EventMask::IGNORED) {
                // The folder is gone (or unmounted): its watch went with it.
                self.folders.remove(&event.wd);
                continue;
            }
            if event
                .mask
                .intersects(EventMask::CREATE | EventMask::MOVED_TO)
            {
                let made = (self.folders.get(&event.wd), event.name.as_ref());
                if let (Some(parent), Some(name)) = made {
                    let path = parent.join(name);
                    // A folder, or a link to one: watched with everything under it.
                    if path.is_dir() {
                        let _ = self.add_tree(&path, false);
                    }
                }
            }
            return Ok(());
        }
    }

    /// Watches `top` and every folder under it. With `must`, failing to watch `top` itself
    /// is an error; anything else that cannot be watched is skipped.
    fn add_tree(&mut self, top: &Path, must: bool) -> io::Result<()> {
        let mut walked: HashSet<(u64, u64)> = HashSet::new();
        let mut pending = vec![top.to_path_buf()];
        while let Some(dir) = pending.pop() {
            let is_top = dir == top;
            let meta = match std::fs::metadata(&dir) {
                Ok(meta) if meta.is_dir() => meta,
                Ok(_) if must && is_top => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotADirectory,
                        format!("{} is not a folder", dir.display()),
                    ))
                }
                Err(e) if must && is_top => return Err(e),
                _ => continue,
            };
            // A folder reached twice (links) is walked once.
            if !walked.insert((meta.dev(), meta.ino())) {
                continue;
            }
            if self.folders.len() >= self.max_folders {
                if !self.warned_full {
                    self.warned_full = true;
                    tracing::warn!(
                        folder = %dir.display(),
                        "more than {} folders under the skills roots; changes in the rest are not picked up until a reload (POST /v1/skills/reload)",
                        self.max_folders
                    );
                }
                return Ok(());
            }
            match self.events.watches().add(&dir, changes()) {
                Ok(wd) => {
                    self.folders.entry(wd).or_insert_with(|| dir.clone());
                }
                Err(e) if must && is_top => return Err(e),
                Err(e) => {
                    tracing::debug!(folder = %dir.display(), error = %e, "cannot watch a folder");
                    continue;
                }
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                // A link is followed only if it leads to a folder (checked when popped).
                if entry
                    .file_type()
                    .is_ok_and(|t| t.is_dir() || t.is_symlink())
                {
                    pending.push(entry.path());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Whether a change is reported within a short wait. The kernel queues an event
    /// inside the system call that causes it, so an unreported change is not a slow one.
    async fn reported(watch: &mut TreeWatch) -> bool {
        tokio::time::timeout(Duration::from_millis(300), watch.changed())
            .await
            .is_ok_and(|r| r.is_ok())
    }

    #[tokio::test]
    async fn reads_opens_and_execs_are_not_changes_but_writes_are() {
        let root = tempfile::tempdir().unwrap();
        let tool = root.path().join("skill/tool.sh");
        std::fs::create_dir_all(tool.parent().unwrap()).unwrap();
        std::fs::write(&tool, "#!/bin/sh\necho hi\n").unwrap();
        std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let mut watch = TreeWatch::start(&[root.path().to_path_buf()]).unwrap();
        std::fs::read_to_string(&tool).unwrap();
        let out = std::process::Command::new(&tool).output().unwrap();
        assert_eq!(out.stdout, b"hi\n");
        std::fs::read_dir(root.path().join("skill"))
            .unwrap()
            .count();
        assert!(
            !reported(&mut watch).await,
            "a read or an exec was reported"
        );
        std::fs::write(&tool, "#!/bin/sh\necho changed\n").unwrap();
        assert!(reported(&mut watch).await, "a write was not reported");
    }

    #[tokio::test]
    async fn a_folder_made_after_the_start_is_watched_with_what_it_holds() {
        let root = tempfile::tempdir().unwrap();
        let mut watch = TreeWatch::start(&[root.path().to_path_buf()]).unwrap();
        assert_eq!(watch.folders(), 1);
        let deep = root.path().join("new/skill/scripts");
        std::fs::create_dir_all(&deep).unwrap();
        assert!(
            reported(&mut watch).await,
            "the new folder was not reported"
        );
        // Drain what the burst queued, then change a file deep in the new tree.
        while reported(&mut watch).await {}
        assert_eq!(watch.folders(), 4, "{:?}", watch.folders);
        std::fs::write(deep.join("run.py"), "print(1)").unwrap();
        assert!(
            reported(&mut watch).await,
            "a file in a new folder was missed"
        );
    }

    #[tokio::test]
    async fn a_link_loop_is_watched_once() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("a")).unwrap();
        std::os::unix::fs::symlink(root.path(), root.path().join("a/back")).unwrap();
        let watch = TreeWatch::start(&[root.path().to_path_buf()]).unwrap();
        assert_eq!(watch.folders(), 2);
    }

    #[tokio::test]
    async fn a_missing_root_is_an_error() {
        let base = tempfile::tempdir().unwrap();
        let err = TreeWatch::start(&[base.path().join("missing")]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[tokio::test]
    async fn a_removed_folder_is_reported_and_its_watch_dropped() {
        let root = tempfile::tempdir().unwrap();
        let skill = root.path().join("skill");
        std::fs::create_dir(&skill).unwrap();
        let mut watch = TreeWatch::start(&[root.path().to_path_buf()]).unwrap();
        assert_eq!(watch.folders(), 2);
        std::fs::remove_dir(&skill).unwrap();
        assert!(reported(&mut watch).await, "the removal was not reported");
        while reported(&mut watch).await {}
        assert_eq!(watch.folders(), 1);
    }

    #[tokio::test]
    async fn at_most_the_limit_of_folders_is_watched() {
        let root = tempfile::tempdir().unwrap();
        for i in 0..10 {
            std::fs::create_dir(root.path().join(format!("skill-{i}"))).unwrap();
        }
        let mut watch = TreeWatch::start_with_limit(&[root.path().to_path_buf()], 4).unwrap();
        assert_eq!(watch.folders(), 4);
        assert!(watch.warned_full);
        // A folder made later is not watched either; the change itself is still seen.
        std::fs::create_dir(root.path().join("late")).unwrap();
        assert!(reported(&mut watch).await);
        assert_eq!(watch.folders(), 4);
    }
}
