//! The private staging folder of one install, `<skills-root>/.staging-<random>` (0700, on
//! the skills root's filesystem so the final rename is atomic), and the swap that moves a
//! verified package into place. Dropping the [`Staging`] removes it with whatever is in it:
//! a refused package, or the previous version after a successful swap.

use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::random::{self, SystemSource};
use skillbox_protocol::skill::manifest_files;

/// Prefix of staging folder names (hidden from discovery by the leading dot).
pub const STAGING_PREFIX: &str = ".staging-";
const PACKAGE: &str = "package";
const PREVIOUS: &str = "previous";

/// A staging folder, removed on drop.
#[derive(Debug)]
pub struct Staging {
    dir: PathBuf,
}

impl Staging {
    /// Creates a fresh staging folder in `skills_root` and its `package` folder (0755).
    pub fn create(skills_root: &Path) -> std::io::Result<Self> {
        let suffix = random::hex(&SystemSource::default(), 12, "staging folder name")
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let dir = skills_root.join(format!("{STAGING_PREFIX}{suffix}"));
        // Not recursive: creating must fail if the name exists (it is never reused).
        DirBuilder::new().mode(0o700).create(&dir)?;
        let staging = Self { dir };
        DirBuilder::new().mode(0o755).create(staging.package())?;
        Ok(staging)
    }

    /// The staging folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the package is extracted.
    pub fn package(&self) -> PathBuf {
        self.dir.join(PACKAGE)
    }

    /// The package folder: `package/` itself, or its only subfolder when the archive
    /// wrapped everything in one top folder (`name/SKILL.md`, as `tar czf x.tgz name/` does).
    pub fn package_root(&self) -> PathBuf {
        let pkg = self.package();
        if !manifest_files(&pkg).is_empty() {
            return pkg;
        }
        let Ok(entries) = std::fs::read_dir(&pkg) else {
            return pkg;
        };
        let children: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        match children.as_slice() {
            [only] if only.symlink_metadata().is_ok_and(|m| m.is_dir()) => only.clone(),
            _ => pkg,
        }
    }

    /// Moves the package at `from` (inside this staging folder) to `target`, replacing
    /// what is there; the replaced folder moves into this staging folder (removed on drop).
    pub fn swap_in(&self, from: &Path, target: &Path) -> std::io::Result<Swap> {
        let previous = self.dir.join(PREVIOUS);
        if target.symlink_metadata().is_err() {
            rename_noreplace(from, target)?;
            return Ok(Swap {
                target: target.to_path_buf(),
                previous: None,
                undo_to: self.dir.join("undone"),
            });
        }
        if exchange(from, target)? {
            std::fs::rename(from, &previous)?;
        } else {
            std::fs::rename(target, &previous)?;
            if let Err(e) = std::fs::rename(from, target) {
                let _ = std::fs::rename(&previous, target);
                return Err(e);
            }
        }
        Ok(Swap {
            target: target.to_path_buf(),
            previous: Some(previous),
            undo_to: self.dir.join("undone"),
        })
    }
}

/// Removes staging folders left by installs that died (killed, power loss). Call it only
/// while holding the install lock on the root: then no live install owns one.
pub fn sweep(skills_root: &Path) {
    let Ok(entries) = std::fs::read_dir(skills_root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let is_staging = name.to_string_lossy().starts_with(STAGING_PREFIX);
        if is_staging && entry.file_type().is_ok_and(|t| t.is_dir()) {
            let path = entry.path();
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    tracing::info!(dir = %path.display(), "removed a staging folder left by an earlier install")
                }
                Err(e) => {
                    tracing::warn!(dir = %path.display(), error = %e, "could not remove a stale staging folder")
                }
            }
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "could not remove the staging folder");
        }
    }
}

/// A package moved into place, which can still be undone (when recording it fails).
#[derive(Debug)]
pub struct Swap {
    target: PathBuf,
    previous: Option<PathBuf>,
    undo_to: PathBuf,
}

impl Swap {
    /// Puts back what was there before (or nothing).
    pub fn undo(self) -> std::io::Result<()> {
        match &self.previous {
            Some(previous) => {
                if !exchange(previous, &self.target)? {
                    std::fs::rename(&self.target, &self.undo_to)?;
                    std::fs::rename(previous, &self.target)?;
                }
                Ok(())
            }
            None => std::fs::rename(&self.target, &self.undo_to),
        }
    }
}

/// Atomically exchanges two paths; `Ok(false)` when the filesystem cannot.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn exchange(a: &Path, b: &Path) -> std::io::Result<bool> {
    use nix::errno::Errno;
    use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
    match renameat2(AT_FDCWD, a, AT_FDCWD, b, RenameFlags::RENAME_EXCHANGE) {
        Ok(()) => Ok(true),
        Err(Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn exchange(_a: &Path, _b: &Path) -> std::io::Result<bool> {
    Ok(false)
}

/// Renames `from` to `to`, failing if `to` appeared meanwhile (where the kernel can say).
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::errno::Errno;
        use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
        match renameat2(AT_FDCWD, from, AT_FDCWD, to, RenameFlags::RENAME_NOREPLACE) {
            Ok(()) => return Ok(()),
            Err(Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => {}
            Err(e) => return Err(e.into()),
        }
    }
    std::fs::rename(from, to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn staging_is_private_and_removed_on_drop() {
        let root = tempfile::tempdir().unwrap();
        let dir = {
            let s = Staging::create(root.path()).unwrap();
            let mode = std::fs::metadata(s.dir()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
            std::fs::write(s.package().join("f"), b"x").unwrap();
            s.dir().to_path_buf()
        };
        assert!(!dir.exists());
    }

    #[test]
    fn sweep_removes_leftover_staging_only() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join(".staging-dead/package")).unwrap();
        std::fs::create_dir(root.path().join("skill")).unwrap();
        sweep(root.path());
        let names: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["skill"]);
    }

    #[test]
    fn swap_replaces_and_undo_restores() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("skill");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("v"), b"old").unwrap();
        let s = Staging::create(root.path()).unwrap();
        std::fs::write(s.package().join("v"), b"new").unwrap();
        let swap = s.swap_in(&s.package(), &target).unwrap();
        assert_eq!(std::fs::read(target.join("v")).unwrap(), b"new");
        swap.undo().unwrap();
        assert_eq!(std::fs::read(target.join("v")).unwrap(), b"old");
        drop(s);
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 1);
    }
}
