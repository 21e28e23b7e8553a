//! Removing what a tool left in its scratch dir, whatever it built there: chains of
//! directories deeper than any stack or fd limit, millions of entries, folders it made
//! unreadable or sticky.
//!
//! [`remove_tree`] walks the tree without recursion and with at most three descriptors
//! open: it empties one directory, descends into the first subdirectory that is not
//! empty, and climbs back through `..` when a directory is empty (the tool's processes are
//! dead by then, so nothing moves under it). [`Sweeper`] runs the removals on a thread of
//! their own, so a huge tree never delays the end of a call or another call.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use nix::dir::{Dir, Type};
use nix::errno::Errno;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fchmod, fstatat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

/// What emptying one directory found.
enum Level {
    /// Every entry is gone.
    Empty,
    /// A subdirectory that is not empty, opened.
    Descend(OwnedFd),
}

/// Removes `path` and everything beneath it. A missing `path` is not an error.
///
/// # Errors
/// The first system call that failed for another reason than the entry being gone
/// already (a file system that is read-only, a file the executor may not remove).
pub fn remove_tree(path: &Path) -> io::Result<()> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} has no parent folder", path.display()),
        ));
    };
    let parent = open_dir_path(parent)?;
    let root = match openat(&parent, name, dir_flags(), Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Ok(()),
        // Not a directory (or a symlink): remove the entry itself.
        Err(Errno::ENOTDIR | Errno::ELOOP) => return remove_entry(&parent, &name_cstr(name)?),
        Err(e) => return Err(e.into()),
    };
    let mut current = root;
    let mut depth = 0usize;
    loop {
        match empty_one_level(&current)? {
            Level::Descend(child) => {
                current = child;
                depth += 1;
            }
            Level::Empty if depth == 0 => break,
            Level::Empty => {
                current = openat(&current, "..", dir_flags(), Mode::empty())?;
                depth -= 1;
            }
        }
    }
    drop(current);
    match unlinkat(&parent, name, UnlinkatFlags::RemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    Ok(nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

fn name_cstr(name: &std::ffi::OsStr) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a file name"))
}

/// Removes every entry of `dir` that is not a non-empty directory; returns the first
/// non-empty subdirectory, opened, or [`Level::Empty`] once a listing finds nothing.
fn empty_one_level(dir: &OwnedFd) -> io::Result<Level> {
    loop {
        let mut seen = 0usize;
        let mut listing = Dir::openat(dir, ".", dir_flags(), Mode::empty())?;
        for entry in listing.iter() {
            let entry = entry?;
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            seen += 1;
            let is_dir = match entry.file_type() {
                Some(kind) => kind == Type::Directory,
                None => match fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
                    Ok(stat) => {
                        SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
                    }
                    Err(Errno::ENOENT) => continue,
                    Err(e) => return Err(e.into()),
                },
            };
            if !is_dir {
                remove_entry(dir, name)?;
                continue;
            }
            match with_permission_fix(dir, || unlinkat(dir, name, UnlinkatFlags::RemoveDir)) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(Errno::ENOTEMPTY | Errno::EEXIST) => {
                    return Ok(Level::Descend(open_child(dir, name)?));
                }
                Err(e) => return Err(e.into()),
            }
        }
        if seen == 0 {
            return Ok(Level::Empty);
        }
    }
}

/// Unlinks a non-directory entry of `dir`.
fn remove_entry(dir: &impl AsFd, name: &CStr) -> io::Result<()> {
    match with_permission_fix(dir, || unlinkat(dir, name, UnlinkatFlags::NoRemoveDir)) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Opens the subdirectory `name` of `dir`; one the tool made unreadable is given 0700 first.
fn open_child(dir: &OwnedFd, name: &CStr) -> io::Result<OwnedFd> {
    match openat(dir, name, dir_flags(), Mode::empty()) {
        Err(Errno::EACCES | Errno::EPERM) => {
            nix::sys::stat::fchmodat(
                dir,
                name,
                Mode::S_IRWXU,
                nix::sys::stat::FchmodatFlags::NoFollowSymlink,
            )?;
            Ok(openat(dir, name, dir_flags(), Mode::empty())?)
        }
        other => Ok(other?),
    }
}

/// Runs `op`; when it fails for permissions (a directory the tool made read-only or
/// sticky), gives `dir` mode 0700 and runs it once more.
fn with_permission_fix<F>(dir: &impl AsFd, op: F) -> Result<(), Errno>
where
    F: Fn() -> Result<(), Errno>,
{
    match op() {
        Err(Errno::EACCES | Errno::EPERM) => {
            fchmod(dir, Mode::S_IRWXU)?;
            op()
        }
        other => other,
    }
}

/// Removes trees on a thread of its own, in the order they were handed over.
#[derive(Debug)]
pub struct Sweeper {
    queue: Sender<PathBuf>,
    pending: Arc<(Mutex<usize>, Condvar)>,
}

impl Sweeper {
    /// The process's sweeper, started on first use.
    pub fn global() -> &'static Sweeper {
        static SWEEPER: OnceLock<Sweeper> = OnceLock::new();
        SWEEPER.get_or_init(Sweeper::start)
    }

    fn start() -> Self {
        let (queue, jobs) = mpsc::channel::<PathBuf>();
        let pending = Arc::new((Mutex::new(0usize), Condvar::new()));
        let counter = Arc::clone(&pending);
        let spawned = std::thread::Builder::new()
            .name("scratch-sweeper".into())
            .spawn(move || sweep(&jobs, &counter));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the scratch sweeper; scratch dirs will be removed at the next start");
        }
        Self { queue, pending }
    }

    /// Queues `path` for removal.
    pub fn remove(&self, path: PathBuf) {
        if let Ok(mut n) = self.pending.0.lock() {
            *n += 1;
        }
        if let Err(mpsc::SendError(path)) = self.queue.send(path) {
            // The thread is gone: remove here rather than leave the tree.
            finish_one(&path, &self.pending);
        }
    }

    /// Waits at most `limit` for every queued tree to be removed; whether none is left.
    pub fn wait_idle_for(&self, limit: std::time::Duration) -> bool {
        let (lock, idle) = &*self.pending;
        let Ok(n) = lock.lock() else { return false };
        match idle.wait_timeout_while(n, limit, |n| *n > 0) {
            Ok((n, _)) => *n == 0,
            Err(_) => false,
        }
    }

    /// Waits until every queued tree is removed (the one-shot `exec` calls this before it
    /// exits, which would otherwise end the thread mid-removal).
    pub fn wait_idle(&self) {
        let (lock, idle) = &*self.pending;
        let Ok(mut n) = lock.lock() else { return };
        while *n > 0 {
            n = match idle.wait(n) {
                Ok(n) => n,
                Err(_) => return,
            };
        }
    }
}

fn sweep(jobs: &Receiver<PathBuf>, pending: &Arc<(Mutex<usize>, Condvar)>) {
    for path in jobs {
        finish_one(&path, pending);
    }
}

fn finish_one(path: &Path, pending: &Arc<(Mutex<usize>, Condvar)>) {
    if let Err(e) = remove_tree(path) {
        tracing::warn!(path = %path.display(), error = %e, "cannot remove a scratch dir; the next start of the executor retries");
    }
    let (lock, idle) = &**pending;
    if let Ok(mut n) = lock.lock() {
        *n = n.saturating_sub(1);
        idle.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn chain(root: &Path, depth: usize) {
        // Relative mkdir + chdir-free: each level is made through a descriptor of the last,
        // so the path length (past PATH_MAX) does not matter.
        let mut current = open_dir_path(root).unwrap();
        for _ in 0..depth {
            nix::sys::stat::mkdirat(&current, "d", Mode::S_IRWXU).unwrap();
            current = openat(&current, "d", dir_flags(), Mode::empty()).unwrap();
        }
        nix::fcntl::openat(
            &current,
            "leaf",
            OFlag::O_CREAT | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
            Mode::S_IRUSR,
        )
        .unwrap();
    }

    /// A temporary folder on tmpfs where the host has one: deep and wide trees on a
    /// journaled disk take far longer to make than to test.
    fn fast_tempdir() -> tempfile::TempDir {
        let shm = Path::new("/dev/shm");
        if shm.is_dir() {
            tempfile::tempdir_in(shm).unwrap()
        } else {
            tempfile::tempdir().unwrap()
        }
    }

    #[test]
    fn remove_tree_removes_a_chain_deeper_than_the_stack_and_fd_limit() {
        let base = fast_tempdir();
        let top = base.path().join("scratch");
        std::fs::create_dir(&top).unwrap();
        // 30,000 levels: std's recursive remove_dir_all overflows a 2 MiB thread stack and
        // holds one descriptor a level (past a 1024 or 4096 fd limit).
        chain(&top, 30_000);
        remove_tree(&top).unwrap();
        assert!(!top.exists());
        assert!(base.path().read_dir().unwrap().next().is_none());
    }

    #[test]
    fn remove_tree_removes_wide_folders_and_every_kind_of_entry() {
        let base = tempfile::tempdir().unwrap();
        let top = base.path().join("scratch");
        std::fs::create_dir_all(top.join("a/b/c")).unwrap();
        for i in 0..5_000 {
            std::fs::write(top.join(format!("a/f{i}")), b"x").unwrap();
        }
        std::os::unix::fs::symlink("/etc", top.join("a/b/link-to-etc")).unwrap();
        std::os::unix::fs::symlink(base.path(), top.join("link-to-base")).unwrap();
        nix::unistd::mkfifo(&top.join("a/b/c/fifo"), Mode::S_IRWXU).unwrap();
        // A folder made unreadable and one made sticky and read-only.
        std::fs::create_dir(top.join("locked")).unwrap();
        std::fs::write(top.join("locked/secret"), b"x").unwrap();
        std::fs::set_permissions(top.join("locked"), std::fs::Permissions::from_mode(0o000))
            .unwrap();
        std::fs::create_dir(top.join("sticky")).unwrap();
        std::fs::write(top.join("sticky/f"), b"x").unwrap();
        std::fs::set_permissions(top.join("sticky"), std::fs::Permissions::from_mode(0o1555))
            .unwrap();
        remove_tree(&top).unwrap();
        assert!(!top.exists());
        // Symlinks were removed, not followed.
        assert!(Path::new("/etc/passwd").exists());
        assert!(base.path().exists());
    }

    #[test]
    fn remove_tree_of_a_missing_path_or_a_file_succeeds() {
        let base = tempfile::tempdir().unwrap();
        remove_tree(&base.path().join("missing")).unwrap();
        let file = base.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        remove_tree(&file).unwrap();
        assert!(!file.exists());
    }

    #[test]
    fn sweeper_removes_queued_trees_and_reports_idle() {
        let base = tempfile::tempdir().unwrap();
        let top = base.path().join("queued");
        chain_dirs(&top, 50);
        let sweeper = Sweeper::start();
        sweeper.remove(top.clone());
        sweeper.wait_idle();
        assert!(!top.exists());
    }

    fn chain_dirs(top: &Path, depth: usize) {
        std::fs::create_dir(top).unwrap();
        chain(top, depth);
    }
}
