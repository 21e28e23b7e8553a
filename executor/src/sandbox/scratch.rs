//! The per-call scratch directory: the only writable place a tool has (`HOME`, `TMPDIR`),
//! owned by the call's user, removed when the call ends: in place when it holds nothing
//! but the arguments file (an `unlink` and an `rmdir`), otherwise moved at once into
//! `<scratch root>/.trash/` (one rename, so the name is free and the call ends without
//! waiting) and removed there by the [`Sweeper`], whatever the tool built in it.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::remove_tree::{remove_tree, Sweeper};

/// The folder of the scratch root where ended calls' dirs wait for the sweeper.
pub const TRASH_DIR: &str = ".trash";

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A scratch directory, removed on drop.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// Creates a fresh directory under `root` (created 0711 if missing), mode 0700, owned
    /// by `owner` when given. Once: a caller that can wait for room on a full scratch
    /// file system runs it through [`super::room::when_room`].
    pub fn create(root: &Path, owner: Option<u32>) -> std::io::Result<Self> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = root.join(format!("call-{}-{n}", std::process::id()));
        let dir = std::fs::DirBuilder::new().mode(0o700).create(&path);
        // The root is made on first need only, not looked up on every call.
        if matches!(&dir, Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o711)
                .create(root)?;
            std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o711))?;
            std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        } else {
            dir?;
        }
        // Made now, so a failure below removes it again (on drop).
        let scratch = Self { path };
        if let Some(uid) = owner {
            std::os::unix::fs::chown(&scratch.path, Some(uid), Some(uid))?;
        }
        Ok(scratch)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Writes `content` to a new file `path` (mode 0600), owned by `owner` when given. On a
/// failure the file is removed again, so nothing half-written stays and the write can be
/// tried again (a full scratch tmpfs: [`super::room::when_room`]).
pub fn write_owned(path: &Path, content: &[u8], owner: Option<u32>) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    let written = file.write_all(content).and_then(|()| match owner {
        Some(uid) => std::os::unix::fs::fchown(&file, Some(uid), Some(uid)),
        None => Ok(()),
    });
    if written.is_err() {
        // This call made the file (`create_new`), so the name is its own to remove.
        let _ = std::fs::remove_file(path);
    }
    written
}

/// Makes `dir` and its missing parents up to `base` (which exists), each 0700 and owned
/// by `owner` when given; an existing one must be a folder (not a link).
pub fn make_owned_dirs(base: &Path, dir: &Path, owner: Option<u32>) -> std::io::Result<()> {
    let rel = dir.strip_prefix(base).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not under the scratch dir",
        )
    })?;
    let mut at = base.to_path_buf();
    for part in rel.components() {
        at.push(part);
        match std::fs::DirBuilder::new().mode(0o700).create(&at) {
            Ok(()) => {
                if let Some(uid) = owner {
                    std::os::unix::fs::lchown(&at, Some(uid), Some(uid))?;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if !std::fs::symlink_metadata(&at)?.is_dir() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        format!("{} is a file, not a folder", at.display()),
                    ));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Most tools leave nothing but the arguments file: two system calls, in place,
        // remove the dir then (no rename, no sweeper to wake, no walk). Neither follows a
        // link the tool may have made: `unlink` removes the entry itself, and `rmdir`
        // fails on anything but an empty directory. Anything else goes to the sweeper.
        let gone = |r: std::io::Result<()>| match r {
            Ok(()) => true,
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        };
        if gone(std::fs::remove_file(self.path.join(super::ARGS_FILE_NAME)))
            && gone(std::fs::remove_dir(&self.path))
        {
            return;
        }
        self.sweep();
    }
}

impl Scratch {
    /// Moves the dir into the trash for the sweeper, or removes it in place when it cannot
    /// be moved.
    fn sweep(&self) {
        let (Some(root), Some(name)) = (self.path.parent(), self.path.file_name()) else {
            return;
        };
        let trash = root.join(TRASH_DIR);
        let moved = trash.join(name);
        let renamed = std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&trash)
            .or_else(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => Ok(()),
                _ => Err(e),
            })
            .and_then(|()| std::fs::rename(&self.path, &moved));
        match renamed {
            Ok(()) => Sweeper::global().remove(moved),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot move the scratch dir aside; removing it in place");
                if let Err(e) = remove_tree(&self.path) {
                    tracing::warn!(path = %self.path.display(), error = %e, "cannot remove scratch dir");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trash_entry(scratch: &Scratch) -> PathBuf {
        let path = scratch.path();
        path.parent()
            .unwrap()
            .join(TRASH_DIR)
            .join(path.file_name().unwrap())
    }

    #[test]
    fn a_missing_root_is_made_0711() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("a/b");
        let scratch = Scratch::create(&root, None).unwrap();
        assert!(scratch.path().is_dir());
        let mode = std::fs::metadata(&root).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o711);
    }

    #[test]
    fn a_dir_holding_only_the_arguments_file_is_removed_in_place() {
        let root = tempfile::tempdir().unwrap();
        let scratch = Scratch::create(root.path(), None).unwrap();
        write_owned(
            &scratch.path().join(super::super::ARGS_FILE_NAME),
            b"{}",
            None,
        )
        .unwrap();
        let (path, trash) = (scratch.path().to_path_buf(), trash_entry(&scratch));
        drop(scratch);
        assert!(!path.exists(), "the scratch dir is left");
        assert!(!trash.exists(), "the scratch dir went to the sweeper");
        assert!(
            !root.path().join(TRASH_DIR).exists(),
            "the trash was made for a dir that needed none"
        );
    }

    #[test]
    fn an_arguments_file_turned_into_a_link_removes_the_link_not_its_target() {
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("precious");
        std::fs::write(&outside, b"keep").unwrap();
        let scratch = Scratch::create(&root.path().join("scratch"), None).unwrap();
        std::os::unix::fs::symlink(&outside, scratch.path().join(super::super::ARGS_FILE_NAME))
            .unwrap();
        let path = scratch.path().to_path_buf();
        drop(scratch);
        assert!(!path.exists(), "the scratch dir is left");
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
    }

    #[test]
    fn a_dir_with_more_than_the_arguments_file_goes_to_the_sweeper() {
        let root = tempfile::tempdir().unwrap();
        let scratch = Scratch::create(root.path(), None).unwrap();
        // The arguments file replaced by a folder with content, and another file.
        let args = scratch.path().join(super::super::ARGS_FILE_NAME);
        std::fs::create_dir(&args).unwrap();
        std::fs::write(args.join("inside"), b"x").unwrap();
        std::fs::write(scratch.path().join("made-by-the-tool"), b"x").unwrap();
        let (path, trash) = (scratch.path().to_path_buf(), trash_entry(&scratch));
        drop(scratch);
        assert!(!path.exists(), "the scratch dir is left in place");
        Sweeper::global().wait_idle();
        assert!(!trash.exists(), "the sweeper left the scratch dir");
        assert!(
            root.path().join(TRASH_DIR).is_dir(),
            "it never went to the trash"
        );
    }
}
