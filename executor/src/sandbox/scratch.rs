//! The per-call scratch directory: the only writable place a tool has (`HOME`, `TMPDIR`),
//! owned by the call's user, removed when the call ends: moved at once into
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
    /// by `owner` when given.
    pub fn create(root: &Path, owner: Option<u32>) -> std::io::Result<Self> {
        if !root.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o711)
                .create(root)?;
            std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o711))?;
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = root.join(format!("call-{}-{n}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        if let Some(uid) = owner {
            std::os::unix::fs::chown(&path, Some(uid), Some(uid))?;
        }
        Ok(Self { path })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Writes `content` to a new file `path` (mode 0600), owned by `owner` when given.
pub fn write_owned(path: &Path, content: &[u8], owner: Option<u32>) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(content)?;
    if let Some(uid) = owner {
        std::os::unix::fs::fchown(&file, Some(uid), Some(uid))?;
    }
    Ok(())
}

impl Drop for Scratch {
    fn drop(&mut self) {
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
