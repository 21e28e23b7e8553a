//! Work folders kept between calls of a context, so that a call moves only what changed
//! since the last one on this executor rather than every file of its context (issue: a
//! call in a context holding one 100 MiB file paid a 100 MiB copy every time).
//!
//! After a call in a context ends, its files synced back and every process of its user
//! killed, its work folder is moved here (a rename, in the cache's folder) with what the
//! sync left as the context's state ([`Baseline`]: each file's digest and stamp). The next
//! call of that context on this executor takes it ([`WorkShelf::take`]) and [`adopt`]s it:
//! a file is kept only when the context still holds it with the same digest and mode and
//! its stamp (inode, size, modification and change times, one link) is the one the sync
//! recorded, so nothing written after the sync, by anyone, survives; everything else
//! (other files, links, devices, sockets, empty folders) is removed, and what is kept is
//! given to the new call's user. A folder its last sync found settled (no process of its
//! user left when the sync began, nothing in it but the context's files as laid out:
//! [`Baseline`]) and going back to that same user, with the context's files unchanged,
//! is taken as it is, without that walk: no call could write it since, and the kernel
//! watches it ([`super::watch`]), so one that anything else changed on disk is walked
//! as any other. When the context's files changed meanwhile, such a folder is not walked
//! either: what it records is what it holds, so the files the context no longer holds as
//! they are go by their paths ([`trim_settled`]). A call runs as
//! its context's last user when that id is free, so this is the common case. Two calls
//! of one context at once: the second lays out
//! anew. Only calls with a user of their own are kept (their end kills every process of
//! that user before the folder moves); bounded by [`MAX_SHELVED`] folders and as many bytes
//! as the blob cache may hold (512 MiB by default; both live in the scratch root,
//! which may be a bounded tmpfs), the longest unused going first.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::dir::Dir;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{fchmodat, fstat, fstatat, FchmodatFlags, FileStat, Mode, SFlag};
use nix::unistd::{fchownat, unlinkat, Gid, Uid, UnlinkatFlags};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use skillbox_protocol::workdir::WorkFile;

use super::watch::Tracked;
use super::{Baseline, Known, Stamp};
use crate::blobs::BlobCache;
use crate::sandbox::remove_tree::Sweeper;

/// Most work folders kept at once.
pub const MAX_SHELVED: usize = 64;

/// A kept folder and the state its context had when it was kept.
#[derive(Debug)]
pub struct Shelved {
    dir: PathBuf,
    baseline: Baseline,
    /// The user its files and folders were given to.
    uid: Option<u32>,
    bytes: u64,
    used: u64,
}

/// The kept folders of this executor, by context (see the module docs).
#[derive(Debug)]
pub struct WorkShelf {
    dir: PathBuf,
    cap_bytes: u64,
    held: Mutex<HashMap<String, Shelved>>,
    clock: AtomicU64,
}

impl WorkShelf {
    /// The shelf of the executor whose blob cache is `blobs`: in the cache's folder (both
    /// are caches of the context's files, removed together when an executor starts or is
    /// gone), holding as many bytes as the cache. Made on first use.
    pub fn of(blobs: &BlobCache) -> Option<Arc<WorkShelf>> {
        static SHELVES: OnceLock<Mutex<HashMap<u64, Arc<WorkShelf>>>> = OnceLock::new();
        let mut shelves = SHELVES.get_or_init(Mutex::default).lock().ok()?;
        if let Some(shelf) = shelves.get(&blobs.id()) {
            return Some(Arc::clone(shelf));
        }
        let made = WorkShelf::new(blobs.dir().join("shelf"), blobs.cap_bytes());
        let shelf = Arc::new(made.inspect_err(|e| tracing::warn!(error = %e, "cannot make the work shelf; every call lays its folder out anew")).ok()?);
        shelves.insert(blobs.id(), Arc::clone(&shelf));
        Some(shelf)
    }

    /// A shelf in `dir` (made 0700 when missing; the caller's cache folder, which is
    /// removed with what it holds when an executor starts or is gone) holding at most
    /// `cap_bytes` of files.
    pub fn new(dir: PathBuf, cap_bytes: u64) -> std::io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        Ok(Self {
            dir,
            cap_bytes,
            held: Mutex::default(),
            clock: AtomicU64::new(0),
        })
    }

    /// Keeps `work` (a call's folder, given to `uid`, every process that could write it
    /// dead) as the folder of `context`, in the state `baseline` says. A folder it
    /// replaces, and the longest unused beyond the bounds, are removed. Nothing is kept
    /// when the move fails.
    pub fn put(&self, context: &str, work: &Path, baseline: Baseline, uid: Option<u32>) {
        let bytes = baseline.files.values().map(|k| k.stamp.size).sum::<u64>();
        if bytes > self.cap_bytes {
            return;
        }
        let used = self.clock.fetch_add(1, Ordering::Relaxed);
        let dir = self.dir.join(used.to_string());
        if let Err(e) = std::fs::rename(work, &dir) {
            tracing::debug!(error = %e, "cannot keep the work folder; the next call lays it out anew");
            return;
        }
        let Ok(mut held) = self.held.lock() else {
            Sweeper::global().remove(dir);
            return;
        };
        let entry = Shelved {
            dir,
            baseline,
            uid,
            bytes,
            used,
        };
        if let Some(old) = held.insert(context.to_string(), entry) {
            Sweeper::global().remove(old.dir);
        }
        while held.len() > MAX_SHELVED
            || held.values().map(|s| s.bytes).sum::<u64>() > self.cap_bytes
        {
            let Some(oldest) = (held.iter())
                .min_by_key(|(_, s)| s.used)
                .map(|(c, _)| c.clone())
            else {
                break;
            };
            if let Some(gone) = held.remove(&oldest) {
                Sweeper::global().remove(gone.dir);
            }
        }
    }

    /// The folder kept for `context`, taken off the shelf.
    pub fn take(&self, context: &str) -> Option<Shelved> {
        self.held.lock().ok()?.remove(context)
    }

    /// The user the folder kept for `context` belongs to: its next call runs as that
    /// user when the id is free, and nothing kept has to be given to another.
    pub fn uid_of(&self, context: &str) -> Option<u32> {
        self.held.lock().ok()?.get(context)?.uid
    }

    /// How many folders are kept.
    pub fn len(&self) -> usize {
        self.held.lock().map(|h| h.len()).unwrap_or(0)
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Moves `shelved` into place as `work` (a folder holding only the empty folders the
/// call's preparation made, which go) and keeps of it what `files` still holds unchanged
/// (see the module docs), given to `uid`; everything else is removed. The caller makes
/// the call's working folder again. Returns what was kept, by path, and the folder's
/// watch ([`super::watch`]). On any failure the
/// folder is removed whole and nothing is kept: the call lays every file out anew.
///
/// A folder its last sync found settled ([`Baseline`]), going back to the same user, with
/// the context holding exactly its files, is taken as it is, with no walk: nothing could
/// change it since (no process of that user was left, and the id was held until the
/// folder was on the shelf, out of every call's reach).
pub fn adopt(mut shelved: Shelved, work: &Path, uid: Option<u32>, files: &[WorkFile]) -> Adopted {
    // A watched folder in which anything changed since its sync, by anyone, is checked
    // file by file.
    let tracked = shelved.baseline.tracked.take();
    let untouched = tracked.as_ref().is_none_or(|t| t.unchanged());
    let as_it_is = untouched
        && uid.is_some()
        && shelved.uid == uid
        && holds_exactly(&shelved.baseline, uid, files);
    if let Some(t) = tracked.as_ref().filter(|_| !as_it_is) {
        t.touch();
    }
    let fresh = |work: &Path| {
        let _ = std::fs::create_dir(work);
        if let Some(uid) = uid {
            let _ = std::os::unix::fs::lchown(work, Some(uid), Some(uid));
        }
    };
    let moved = crate::sandbox::remove_tree::remove_tree(work)
        .and_then(|()| std::fs::rename(&shelved.dir, work));
    if let Err(e) = moved {
        tracing::debug!(error = %e, "cannot take the kept work folder; laying it out anew");
        Sweeper::global().remove(shelved.dir);
        fresh(work);
        return Adopted::default();
    }
    if as_it_is {
        return Adopted {
            files: shelved.baseline.files,
            tracked,
            exact: true,
        };
    }
    let settled_here = untouched
        && uid.is_some()
        && shelved.uid == uid
        && shelved.baseline.settled
        && shelved.baseline.owner == uid;
    let mut recorded = shelved.baseline.files;
    if settled_here {
        match trim_settled(&mut recorded, work, files) {
            Ok(()) => {
                return Adopted {
                    files: recorded,
                    tracked,
                    exact: true,
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot trim the kept folder by its record; walking it")
            }
        }
    }
    match walk_kept(work, uid, files, &recorded) {
        Ok(kept) => Adopted {
            files: kept,
            tracked,
            exact: false,
        },
        Err(e) => {
            tracing::warn!(error = %e, "cannot reuse the kept work folder; laying it out anew");
            let aside = work.with_extension("discarded");
            if std::fs::rename(work, &aside).is_ok() {
                Sweeper::global().remove(aside);
            }
            fresh(work);
            Adopted::default()
        }
    }
}

/// Walks the kept folder now at `work` (given to `uid`): keeps each file `files` still
/// holds as `recorded` says it was left (digest, exec bit, stamp), given to `uid`, and
/// removes everything else. Returns what was kept, by path.
fn walk_kept(
    work: &Path,
    uid: Option<u32>,
    files: &[WorkFile],
    recorded: &BTreeMap<String, Known>,
) -> std::io::Result<BTreeMap<String, Known>> {
    let wanted: HashMap<&str, &WorkFile> = files.iter().map(|f| (f.path.as_str(), f)).collect();
    let mut kept = BTreeMap::new();
    let mut decide = |rel: &str, at: Entry<'_>, st: &FileStat| {
        let keep = (wanted.get(rel), recorded.get(rel));
        let (Some(want), Some(known)) = keep else {
            return Ok(false);
        };
        let unchanged = kind(st) == SFlag::S_IFREG
            && st.st_nlink == 1
            && known.sha256 == want.sha256
            && known.executable == want.executable
            && Stamp::of(st) == known.stamp;
        if !unchanged {
            return Ok(false);
        }
        let mode = if want.executable { 0o755 } else { 0o644 };
        // Given to another user or mode, its change time moved: stamped again.
        let stamp = match give(at, st, mode, uid)? {
            true => Stamp::of(&fstatat(at.dir, at.name, AtFlags::AT_SYMLINK_NOFOLLOW)?),
            false => Stamp::of(st),
        };
        kept.insert(
            rel.to_string(),
            Known {
                stamp,
                sha256: want.sha256.clone(),
                executable: want.executable,
            },
        );
        Ok(true)
    };
    // No process of the new call's user runs yet: nothing moves under the walk.
    let walked = open_dir(None, work).and_then(|dir| {
        let st = fstat(dir.as_fd())?;
        let me = Entry {
            dir: dir.as_fd(),
            name: c".",
        };
        give(me, &st, 0o700, uid)?;
        walk(dir, work, "", 0, &mut decide, uid)
    });
    walked.map(|_| kept)
}

/// Trims a settled folder nothing touched since its sync, going back to its user, whose
/// context's files changed since: it holds exactly what `recorded` says, so the files the
/// context no longer holds as they are (by digest and exec bit) are removed by their paths
/// and the folders they leave empty with them, without a walk. Leaves in `recorded` what
/// stays. On an error, what is left is walked as any other kept folder.
fn trim_settled(
    recorded: &mut BTreeMap<String, Known>,
    work: &Path,
    files: &[WorkFile],
) -> std::io::Result<()> {
    let wanted: HashMap<&str, &WorkFile> = files.iter().map(|f| (f.path.as_str(), f)).collect();
    let stale: Vec<String> = (recorded.iter())
        .filter(|(path, known)| {
            !wanted.get(path.as_str()).is_some_and(|want| {
                want.sha256 == known.sha256 && want.executable == known.executable
            })
        })
        .map(|(path, _)| path.clone())
        .collect();
    let mut left_empty = BTreeSet::new();
    for path in &stale {
        // No link anywhere in a settled folder: the path names the file it recorded.
        std::fs::remove_file(work.join(path))?;
        recorded.remove(path);
        left_empty.extend(path.match_indices('/').map(|(i, _)| &path[..i]));
    }
    // Deepest first (a folder sorts before the folders under it).
    for folder in left_empty.iter().rev() {
        match std::fs::remove_dir(work.join(folder)) {
            Err(e) if !matches!(e.raw_os_error(), Some(libc::ENOTEMPTY | libc::EEXIST)) => {
                return Err(e)
            }
            _ => {}
        }
    }
    Ok(())
}

/// What [`adopt`] kept of a folder.
#[derive(Debug, Default)]
pub struct Adopted {
    /// The files kept in place, by path.
    pub files: BTreeMap<String, Known>,
    /// The folder as the kernel watches it; touched unless it was taken as it is.
    pub tracked: Option<Arc<Tracked>>,
    /// Whether the folder holds `files` and nothing else, as a settled sync left it, with
    /// no process of its user started since (taken as it is, or trimmed by its record):
    /// once the rest is laid out it is settled again, and is watched without a walk.
    pub exact: bool,
}

/// Whether `baseline` is settled, `owner`'s, and holds exactly `files` (the same paths,
/// digests and exec bits). The core lists a context's files by path, the order of the
/// baseline's map, so the two are compared side by side; a list in another order is
/// looked up file by file.
fn holds_exactly(baseline: &Baseline, owner: Option<u32>, files: &[WorkFile]) -> bool {
    let same = |f: &WorkFile, k: &Known| k.sha256 == f.sha256 && k.executable == f.executable;
    let in_order =
        || (files.iter().zip(&baseline.files)).all(|(f, (path, k))| *path == f.path && same(f, k));
    let by_path =
        || (files.iter()).all(|f| baseline.files.get(&f.path).is_some_and(|k| same(f, k)));
    baseline.settled
        && baseline.owner == owner
        && baseline.files.len() == files.len()
        && (in_order() || by_path())
}

/// An entry of a folder the walk holds open: the folder and the entry's name in it (every
/// call on it is relative to the folder, never a path walked again from the root).
#[derive(Clone, Copy)]
struct Entry<'a> {
    dir: BorrowedFd<'a>,
    name: &'a CStr,
}

/// What `st` is (file, folder, link...).
fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits())
}

/// The folder `name` of `parent` (or `path` itself without a parent) opened for a walk,
/// never through a link.
fn open_dir(parent: Option<Entry<'_>>, path: &Path) -> std::io::Result<Dir> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let opened = match parent {
        Some(at) => Dir::openat(at.dir, at.name, flags, Mode::empty()),
        None => Dir::open(path, flags, Mode::empty()),
    };
    Ok(opened?)
}

/// Walks `dir` (the folder at `path`, `rel` inside the work folder, `depth` deep) without
/// following a link: `keep` decides for each entry that is not a folder (false: removed);
/// a folder is given to `uid` (0700) and removed when nothing under it was kept. Returns
/// whether anything under `dir` was kept.
fn walk(
    mut dir: Dir,
    path: &Path,
    rel: &str,
    depth: usize,
    keep: &mut dyn FnMut(&str, Entry<'_>, &FileStat) -> std::io::Result<bool>,
    uid: Option<u32>,
) -> std::io::Result<bool> {
    if depth > super::MAX_DEPTH {
        return Err(std::io::Error::other("the kept folder is nested too deep"));
    }
    let names: Vec<CString> = (dir.iter())
        .map(|e| e.map(|e| e.file_name().to_owned()))
        .filter(|n| !matches!(n, Ok(n) if n.as_bytes() == b"." || n.as_bytes() == b".."))
        .collect::<Result<_, _>>()?;
    let fd = dir.as_fd();
    let mut any = false;
    for name in &names {
        let at = Entry { dir: fd, name };
        let Ok(text) = name.to_str() else {
            remove_entry(&path.join(std::ffi::OsStr::from_bytes(name.as_bytes())))?;
            continue;
        };
        let child_rel = if rel.is_empty() {
            text.to_string()
        } else {
            format!("{rel}/{text}")
        };
        let st = fstatat(fd, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
        if kind(&st) == SFlag::S_IFDIR {
            let sub = open_dir(Some(at), path)?;
            if walk(sub, &path.join(text), &child_rel, depth + 1, keep, uid)? {
                give(at, &st, 0o700, uid)?;
                any = true;
            } else {
                unlinkat(fd, name.as_c_str(), UnlinkatFlags::RemoveDir)?;
            }
        } else if keep(&child_rel, at, &st)? {
            any = true;
        } else {
            unlinkat(fd, name.as_c_str(), UnlinkatFlags::NoRemoveDir)?;
        }
    }
    Ok(any)
}

/// Gives `at` (a folder or file of the kept folder, owned by the call that left it, as
/// `st` found it) to `uid` with `mode`. The mode is set while the executor owns it: root
/// changes the mode of a file it does not own only with `CAP_FOWNER`, which the shipped
/// containers do not grant (`CAP_CHOWN` they do). `at` is a file or folder (never a link:
/// the walk saw it so, and no process can swap it meanwhile). Returns whether anything
/// changed: nothing does when it has that mode and owner already (the context's last
/// call ran as `uid`), which saves a `chown` and a `stat` per kept file.
fn give(at: Entry<'_>, st: &FileStat, mode: u32, uid: Option<u32>) -> std::io::Result<bool> {
    let owned = uid.is_none_or(|id| st.st_uid == id && st.st_gid == id);
    if st.st_mode & 0o7777 == mode && owned {
        return Ok(false);
    }
    let own = |id: u32| {
        let id = (Some(Uid::from_raw(id)), Some(Gid::from_raw(id)));
        fchownat(at.dir, at.name, id.0, id.1, AtFlags::AT_SYMLINK_NOFOLLOW)
    };
    if st.st_mode & 0o7777 != mode {
        own(nix::unistd::geteuid().as_raw())?;
        fchmodat(
            at.dir,
            at.name,
            Mode::from_bits_truncate(mode),
            FchmodatFlags::FollowSymlink,
        )?;
    }
    if let Some(uid) = uid {
        own(uid)?;
    }
    Ok(true)
}

/// Removes one entry a walk cannot name (not UTF-8): a folder with all it holds.
fn remove_entry(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path)?.is_dir() {
        true => crate::sandbox::remove_tree::remove_tree(path),
        false => std::fs::remove_file(path),
    }
}

#[cfg(test)]
mod tests;
