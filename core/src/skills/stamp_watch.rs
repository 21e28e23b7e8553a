//! An inotify watch over the installed skills' files, so admission re-reads a skill's
//! stamp ([`super::stamp`]) only when something in it may have changed, not on every call.
//!
//! Reading the stamp again is one `lstat` per entry: about 23 µs a call for a dozen
//! files and 1.7 ms for a thousand, on the call's async thread (`cargo bench -p
//! skillbox-core --bench stamp`). Every folder and every file of a stamped skill is
//! watched for changes (made, written, closed after writing, metadata, removed, renamed)
//! before its stamp is read. The kernel queues such an event before the system call that
//! made the change returns, so a change finished before a call's admission is in the queue
//! that admission drains (one non-blocking `read`). A skill with any event is *dirty*
//! until the next load: its stamp is read on every call, as without the watch. A queue
//! overflow makes every skill dirty.
//!
//! Some changes raise no event: a write through a shared memory mapping made before the
//! watch, a change made by another host on a network file system, a mount over a folder.
//! So a clean skill's stamp is still read when the last read is older than [`REFRESH`],
//! which bounds how long such a change can go unseen; and only a skill wholly on a local
//! file system whose changes all pass through this kernel (ext2/3/4, XFS, Btrfs, tmpfs; a
//! skill folder that spans a mount point is not) is watched at all. Any other skill, or
//! one whose watches the kernel's limit refused, has its stamp read on every call.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};

/// Longest a watched skill with no event goes without its stamp being read again.
pub const REFRESH: Duration = Duration::from_secs(1);

/// Most inotify watches one load holds over all skills (the kernel's per-user limit is
/// shared with every other watch of the core's user); skills past it are not watched.
pub const MAX_WATCHES: usize = 50_000;

/// Bytes read from the kernel at a time (a few hundred events).
const EVENT_BUFFER_BYTES: usize = 16 * 1024;

/// What a change to a folder raises: an entry made, written, removed or renamed, its
/// metadata changed, the folder itself removed or moved.
fn folder_changes() -> WatchMask {
    file_changes()
        | WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::ONLYDIR
}

/// What a change to a file raises, by whatever path it is reached (a hard link outside
/// the skill folder too).
fn file_changes() -> WatchMask {
    WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::ATTRIB
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::DONT_FOLLOW
}

/// Whether every change to a file system of this type passes through this kernel's
/// inotify: local disk file systems and tmpfs. Not overlayfs (its lower and upper folders
/// can be written beside it), not network or FUSE file systems.
fn events_are_complete(fs: nix::sys::statfs::FsType) -> bool {
    use nix::sys::statfs::{BTRFS_SUPER_MAGIC, EXT4_SUPER_MAGIC, TMPFS_MAGIC, XFS_SUPER_MAGIC};
    // EXT4_SUPER_MAGIC is ext2's and ext3's too.
    [
        EXT4_SUPER_MAGIC,
        XFS_SUPER_MAGIC,
        BTRFS_SUPER_MAGIC,
        TMPFS_MAGIC,
    ]
    .contains(&fs)
}

/// One watched skill.
#[derive(Debug)]
struct Watched {
    /// An event came: the stamp is read on every call until the next load.
    dirty: bool,
    /// When the last stamp read that matched began.
    read_at: Instant,
}

#[derive(Debug)]
struct State {
    inotify: Option<Inotify>,
    /// The watched skills by name; a skill not here is never admitted unread.
    skills: HashMap<String, Watched>,
    /// The skills each watch belongs to (a file linked into two skills has one watch).
    owners: HashMap<WatchDescriptor, Vec<String>>,
    buffer: Vec<u8>,
    max_watches: usize,
}

/// The watch of one load's installed skills ([`StampWatch::unchanged`]).
#[derive(Debug)]
pub struct StampWatch {
    state: Mutex<State>,
    refresh: Duration,
}

impl Default for StampWatch {
    /// A watch of nothing: every skill's stamp is read on every call.
    fn default() -> Self {
        Self::with(None, REFRESH, 0)
    }
}

impl StampWatch {
    /// A watch with an inotify instance of its own; without one (the kernel's limit of
    /// instances), every skill's stamp is read on every call, with a warning.
    pub fn new() -> Self {
        Self::with_limits(REFRESH, MAX_WATCHES)
    }

    /// [`StampWatch::new`] with another refresh interval and watch limit (tests).
    pub fn with_limits(refresh: Duration, max_watches: usize) -> Self {
        let inotify = Inotify::init()
            .map_err(|e| {
                tracing::warn!(error = %e, "no inotify instance for the installed skills' stamps; each call reads its skill's stamp");
            })
            .ok();
        Self::with(inotify, refresh, max_watches)
    }

    fn with(inotify: Option<Inotify>, refresh: Duration, max_watches: usize) -> Self {
        Self {
            state: Mutex::new(State {
                inotify,
                skills: HashMap::new(),
                owners: HashMap::new(),
                buffer: vec![0; EVENT_BUFFER_BYTES],
                max_watches,
            }),
            refresh,
        }
    }

    /// Watches every folder and file of skill `name` in `dir`, counting its stamp as read
    /// now: call it just before the load reads the skill's stamp, so any change after
    /// that read raises an event. A skill that cannot be watched wholly is left out (its
    /// stamp is read on every call).
    pub fn watch(&self, name: &str, dir: &Path) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        match state.add_tree(name, dir) {
            Ok(()) => {
                let watched = Watched {
                    dirty: false,
                    read_at: Instant::now(),
                };
                state.skills.insert(name.to_string(), watched);
            }
            Err(why) => {
                tracing::info!(
                    skill = name,
                    why,
                    "installed skill not watched; each call reads its stamp"
                );
            }
        }
    }

    /// Whether skill `name` is watched, had no event, and its stamp was read less than
    /// the refresh interval ago: then admission need not read it again. Drains the
    /// events the kernel queued first.
    pub fn unchanged(&self, name: &str) -> bool {
        let Ok(mut state) = self.state.lock() else {
            return false;
        };
        state.drain();
        state
            .skills
            .get(name)
            .is_some_and(|w| !w.dirty && w.read_at.elapsed() < self.refresh)
    }

    /// Skill `name`'s stamp, read from `began`, matched the one verified.
    pub fn verified(&self, name: &str, began: Instant) {
        if let Ok(mut state) = self.state.lock() {
            if let Some(watched) = state.skills.get_mut(name) {
                watched.read_at = watched.read_at.max(began);
            }
        }
    }

    /// How many skills are watched (tests, logs).
    pub fn watched(&self) -> usize {
        self.state.lock().map(|s| s.skills.len()).unwrap_or(0)
    }
}

impl State {
    /// Adds a watch on every folder (before it is listed) and file under `dir`.
    fn add_tree(&mut self, name: &str, dir: &Path) -> Result<(), String> {
        let top = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
        let fs = nix::sys::statfs::statfs(dir).map_err(|e| e.to_string())?;
        if !events_are_complete(fs.filesystem_type()) {
            return Err(format!(
                "its file system ({:#x}) may change without an inotify event",
                fs.filesystem_type().0
            ));
        }
        let mut pending = vec![dir.to_path_buf()];
        self.add(name, dir, folder_changes())?;
        while let Some(folder) = pending.pop() {
            let listed = std::fs::read_dir(&folder).map_err(|e| e.to_string())?;
            for child in listed {
                let child = child.map_err(|e| e.to_string())?;
                let meta = child.metadata().map_err(|e| e.to_string())?;
                if meta.dev() != top.dev() {
                    return Err("a folder in it is on another file system".into());
                }
                let path = child.path();
                if meta.is_dir() {
                    self.add(name, &path, folder_changes())?;
                    pending.push(path);
                } else if !meta.file_type().is_symlink() {
                    // A link itself cannot be written; replacing it is its folder's event.
                    self.add(name, &path, file_changes())?;
                }
            }
        }
        Ok(())
    }

    fn add(&mut self, name: &str, path: &Path, mask: WatchMask) -> Result<(), String> {
        if self.owners.len() >= self.max_watches {
            return Err(format!("the load's {} watches are taken", self.max_watches));
        }
        let inotify = (self.inotify.as_mut()).ok_or("no inotify instance")?;
        let wd = (inotify.watches())
            .add(path, mask)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let owners = self.owners.entry(wd).or_default();
        if !owners.iter().any(|o| o == name) {
            owners.push(name.to_string());
        }
        Ok(())
    }

    /// Reads every queued event and marks the skills they concern dirty.
    fn drain(&mut self) {
        let Some(inotify) = self.inotify.as_mut() else {
            return;
        };
        loop {
            let events = match inotify.read_events(&mut self.buffer) {
                Ok(events) => events,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    // Events may be lost: nothing is trusted unread any more.
                    tracing::warn!(error = %e, "cannot read the installed skills' watch; each call reads its skill's stamp");
                    self.inotify = None;
                    self.skills.clear();
                    return;
                }
            };
            let mut all = false;
            let mut names: Vec<&str> = Vec::new();
            for event in events {
                if event.mask.contains(EventMask::Q_OVERFLOW) {
                    all = true;
                } else if let Some(owners) = self.owners.get(&event.wd) {
                    names.extend(owners.iter().map(String::as_str));
                }
            }
            for (name, watched) in self.skills.iter_mut() {
                if all || names.contains(&name.as_str()) {
                    watched.dirty = true;
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "stamp_watch_tests.rs"]
mod tests;
