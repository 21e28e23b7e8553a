//! Which kept work folders changed since their last sync, as the kernel tells it
//! (inotify), so that a call in a context whose files nothing touched ends without
//! walking them (issue: the sync's walk, one `fstatat` per file, was most of an unchanged
//! call's cost in a context of 1,000 files).
//!
//! A folder is *armed* when a sync found it settled ([`super::Baseline`]): no process of
//! its user left, nothing in it but the context's files. From then on every one of its
//! folders and files has a watch, so whatever changes it, by any path and any process,
//! queues an event: a write (`IN_MODIFY`), the end of any writable open, a shared mapping
//! written then dropped included (`IN_CLOSE_WRITE`), a mode, owner, time or link count
//! changed (`IN_ATTRIB`), an entry made, removed or renamed. The one event ignored is the
//! root folder's own move (`IN_MOVE_SELF`), which is the executor moving it to and from
//! the shelf. Any other event, a lost queue (`IN_Q_OVERFLOW`) or a watch gone makes the
//! folder *touched* until the next sync walks it and arms it again.
//!
//! Only what is certain is skipped: a folder with no watch, one armed in part, or one
//! with any event, is walked as before. One inotify instance serves the executor (the
//! kernel's limit on instances is per user, shared with every other program of root),
//! holding at most [`MAX_WATCHES`] watches; a folder that would pass it is not armed.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use super::Known;

/// Most watches the executor holds at once (the kernel's per-user limit,
/// `fs.inotify.max_user_watches`, is shared with every program of the same user).
pub const MAX_WATCHES: usize = 32_768;

/// Every change to a watched entry, and nothing a reader causes.
const MASK: AddWatchFlags = AddWatchFlags::IN_MODIFY
    .union(AddWatchFlags::IN_ATTRIB)
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_CREATE)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_DONT_FOLLOW);

/// A work folder the watcher knows; dropped, the watcher forgets it (its watches go with
/// its files, which a folder not kept loses).
#[derive(Debug)]
pub struct Tracked {
    id: u64,
}

impl Tracked {
    /// Whether the folder is armed and nothing changed in it since (events read first).
    pub fn unchanged(&self) -> bool {
        let Some(watcher) = Watcher::global() else {
            return false;
        };
        let state = watcher.drained();
        state
            .folders
            .get(&self.id)
            .is_some_and(|f| f.armed && !f.touched)
    }

    /// Says the folder changed (the executor itself changed it, or a walk found it not
    /// settled): it is walked until armed again.
    pub fn touch(&self) {
        if let Some(watcher) = Watcher::global() {
            if let Some(folder) = watcher.lock().folders.get_mut(&self.id) {
                folder.touched = true;
            }
        }
    }
}

impl Drop for Tracked {
    /// Queued, not done here: a handle may go while the watcher's state is locked (in
    /// [`arm`]), and the next reader of the state forgets the folder.
    fn drop(&mut self) {
        if let Some(watcher) = Watcher::global() {
            if let Ok(mut gone) = watcher.forgotten.lock() {
                gone.push(self.id);
            }
        }
    }
}

/// Arms `work` (a folder a sync just found settled: nothing of its user runs, it holds
/// exactly `files` and the folders above them) for the changes that follow; `tracked` is
/// what it was known as, whose watches are kept. `None` when inotify is unavailable or
/// the watches would pass [`MAX_WATCHES`]: the folder is then walked at every sync.
pub fn arm(
    tracked: Option<Arc<Tracked>>,
    work: &Path,
    files: &BTreeMap<String, Known>,
) -> Option<Arc<Tracked>> {
    let watcher = Watcher::global()?;
    let mut state = watcher.drained();
    let tracked = match tracked {
        Some(t) if state.folders.contains_key(&t.id) => t,
        _ => {
            state.next += 1;
            let id = state.next;
            state.folders.insert(id, Folder::default());
            Arc::new(Tracked { id })
        }
    };
    let folders: BTreeSet<&str> = files
        .keys()
        .flat_map(|p| p.match_indices('/').map(move |(i, _)| &p[..i]))
        .collect();
    let new_files: Vec<(&String, u64)> = {
        let folder = &state.folders[&tracked.id];
        (files.iter())
            .filter(|(_, k)| !folder.files.contains(&k.stamp.ino))
            .map(|(p, k)| (p, k.stamp.ino))
            .collect()
    };
    if state.by_wd.len() + folders.len() + 1 + new_files.len() > MAX_WATCHES {
        tracing::debug!(
            files = files.len(),
            "too many watches to arm the kept folder; its syncs walk it"
        );
        watcher.unwatch(&mut state, tracked.id);
        return None;
    }
    let armed = (|| {
        let root = watcher
            .inotify
            .add_watch(work, MASK | AddWatchFlags::IN_ONLYDIR)?;
        state.by_wd.insert(root, (tracked.id, None));
        for dir in folders {
            let wd = watcher
                .inotify
                .add_watch(&work.join(dir), MASK | AddWatchFlags::IN_ONLYDIR)?;
            state.by_wd.insert(wd, (tracked.id, None));
        }
        for (path, ino) in new_files {
            let wd = watcher.inotify.add_watch(&work.join(path), MASK)?;
            state.by_wd.insert(wd, (tracked.id, Some(ino)));
            if let Some(folder) = state.folders.get_mut(&tracked.id) {
                folder.files.insert(ino);
            }
        }
        Ok::<_, Errno>(root)
    })();
    match armed {
        Ok(root) => {
            let folder = state.folders.get_mut(&tracked.id)?;
            (folder.root, folder.armed, folder.touched) = (Some(root), true, false);
            Some(tracked)
        }
        Err(e) => {
            tracing::debug!(error = %e, "cannot watch the kept folder; its syncs walk it");
            watcher.unwatch(&mut state, tracked.id);
            None
        }
    }
}

/// What the watcher knows of one folder.
#[derive(Debug, Default)]
struct Folder {
    /// The root folder's watch: its own move is the executor's.
    root: Option<WatchDescriptor>,
    /// The inodes of its files that have a watch.
    files: HashSet<u64>,
    /// Whether every entry had a watch when it was last armed.
    armed: bool,
    /// Whether anything changed since.
    touched: bool,
}

/// The executor's one inotify instance and what its watches belong to.
struct Watcher {
    inotify: Inotify,
    state: Mutex<State>,
    /// Folders whose last handle went, to forget at the next lock of `state`.
    forgotten: Mutex<Vec<u64>>,
}

#[derive(Default)]
struct State {
    next: u64,
    /// Each watch's folder and, for a file, its inode.
    by_wd: HashMap<WatchDescriptor, (u64, Option<u64>)>,
    folders: HashMap<u64, Folder>,
}

/// Whether the kept folders are watched (inotify works here): the health's sandbox facts
/// say so.
pub fn kept_folders_watched() -> bool {
    Watcher::global().is_some()
}

impl Watcher {
    /// The executor's watcher, made on first use; `None` (logged once) where inotify is
    /// not available.
    fn global() -> Option<&'static Watcher> {
        static WATCHER: OnceLock<Option<Watcher>> = OnceLock::new();
        WATCHER
            .get_or_init(|| {
                let flags = InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC;
                match Inotify::init(flags) {
                    Ok(inotify) => Some(Watcher {
                        inotify,
                        state: Mutex::default(),
                        forgotten: Mutex::default(),
                    }),
                    Err(e) => {
                        tracing::info!(error = %e, "inotify is not available: every call in a context walks its work folder at the end");
                        None
                    }
                }
            })
            .as_ref()
    }

    /// The state, with the folders whose handles went forgotten.
    fn lock(&self) -> MutexGuard<'_, State> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let gone = std::mem::take(&mut *self.forgotten.lock().unwrap_or_else(|p| p.into_inner()));
        for id in gone {
            state.folders.remove(&id);
        }
        state
    }

    /// The state with every queued event read into it.
    fn drained(&self) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        loop {
            let events = match self.inotify.read_events() {
                Ok(events) => events,
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "reading inotify events failed; every kept folder is walked");
                    state.folders.values_mut().for_each(|f| f.touched = true);
                    break;
                }
            };
            for event in events {
                state.take(event.wd, event.mask);
            }
        }
        state
    }

    /// Removes the watches of folder `id` (its files stay; no event of theirs counts).
    fn unwatch(&self, state: &mut State, id: u64) {
        let mine: Vec<WatchDescriptor> = (state.by_wd.iter())
            .filter(|(_, (f, _))| *f == id)
            .map(|(wd, _)| *wd)
            .collect();
        for wd in mine {
            state.by_wd.remove(&wd);
            let _ = self.inotify.rm_watch(wd);
        }
        state.folders.remove(&id);
    }
}

impl State {
    /// Counts one event against the folder its watch belongs to.
    fn take(&mut self, wd: WatchDescriptor, mask: AddWatchFlags) {
        if mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
            self.folders.values_mut().for_each(|f| f.touched = true);
            return;
        }
        let Some(&(id, ino)) = self.by_wd.get(&wd) else {
            return;
        };
        let gone = mask.contains(AddWatchFlags::IN_IGNORED);
        if gone {
            self.by_wd.remove(&wd);
        }
        let Some(folder) = self.folders.get_mut(&id) else {
            return;
        };
        if gone {
            if let Some(ino) = ino {
                folder.files.remove(&ino);
            }
            if folder.root == Some(wd) {
                folder.root = None;
            }
        }
        let own_move = folder.root == Some(wd)
            && mask.difference(AddWatchFlags::IN_ISDIR) == AddWatchFlags::IN_MOVE_SELF;
        folder.touched |= !own_move;
    }
}

#[cfg(test)]
mod tests;
