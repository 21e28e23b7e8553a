//! The scratch root on a private tmpfs of bounded size (`serve --scratch-tmpfs-mb`).
//!
//! Every call makes a scratch dir, a `plain` call writes its arguments file there, and the
//! sweeper removes both afterwards. On a disk file system that is inode and block
//! allocation per call (ext4's allocator was the largest item of a profile under load,
//! docs/hot-path.md). On a tmpfs it is memory only. The tmpfs is mounted in a mount
//! namespace of the executor's own, so:
//! - it is bounded (`size=`): tools of all calls together cannot take more memory for files
//!   than that, and one that tries gets `ENOSPC`;
//! - it is private: no other process of the host sees the scratch dirs, and it disappears
//!   with the executor and its tools, leaving nothing to sweep after a crash;
//! - the host's folder of the same path is untouched (it only serves as the mount point).
//!
//! It needs `CAP_SYS_ADMIN` (an executor running as root, as `skillbox up` starts it);
//! the caller decides what to do without it (the scratch stays on disk).

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

use nix::errno::Errno;
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};

/// Why the scratch tmpfs could not be mounted.
#[derive(Debug, thiserror::Error)]
pub enum ScratchMountError {
    /// `unshare` only moves the calling thread; the others would keep the host's mounts.
    #[error("the executor already runs {0} threads; the scratch tmpfs must be mounted before any other thread starts")]
    Threads(usize),
    /// No mount namespace of our own (not root, or no `CAP_SYS_ADMIN`).
    #[error("cannot make a mount namespace of the executor's own: {0} (the scratch tmpfs needs root or CAP_SYS_ADMIN; `[executor] scratch_tmpfs_mb = 0` under skillbox up, or --scratch-tmpfs-mb 0, keeps the scratch on disk without this warning; docs/sandbox.md)")]
    Unshare(Errno),
    /// The namespace's mounts could not be made private.
    #[error("cannot make the executor's mounts private: {0}")]
    Private(Errno),
    /// The mount point could not be made.
    #[error("cannot create the scratch root {root}: {source}")]
    Root {
        /// The scratch root.
        root: String,
        /// Why.
        source: std::io::Error,
    },
    /// The tmpfs mount failed.
    #[error("cannot mount a tmpfs of {size_mb} MiB on {root}: {errno}")]
    Mount {
        /// The scratch root.
        root: String,
        /// The size asked for.
        size_mb: u64,
        /// Why.
        errno: Errno,
    },
}

impl ScratchMountError {
    /// Whether it failed for want of privilege (the executor is not root): the caller may
    /// keep the scratch on disk then.
    pub fn is_permission(&self) -> bool {
        matches!(self, ScratchMountError::Unshare(Errno::EPERM))
    }
}

/// Moves the executor into a mount namespace of its own and mounts there, on `root`, a
/// tmpfs of `size_mb` MiB (mode 0711, `nosuid`, `nodev`). Must run before the process
/// starts a second thread: threads made later, and every process they start, share it.
pub fn mount_private_tmpfs(root: &Path, size_mb: u64) -> Result<(), ScratchMountError> {
    let threads = thread_count();
    if threads > 1 {
        return Err(ScratchMountError::Threads(threads));
    }
    unshare(CloneFlags::CLONE_NEWNS).map_err(ScratchMountError::Unshare)?;
    // A host whose mounts are shared (systemd's default) would otherwise see our tmpfs.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(ScratchMountError::Private)?;
    let shown = root.display().to_string();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(root)
        .and_then(|()| std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o711)))
        .map_err(|source| ScratchMountError::Root {
            root: shown.clone(),
            source,
        })?;
    let options = format!("size={size_mb}m,mode=0711");
    mount(
        Some("tmpfs"),
        root,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .map_err(|errno| ScratchMountError::Mount {
        root: shown,
        size_mb,
        errno,
    })
}

/// The number of threads of this process (1 when it cannot be read: the kernel's own
/// check then decides).
fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(1, |d| d.count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_with_a_second_thread_is_refused_before_anything_is_unshared() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("scratch");
        // The test harness runs this test on a thread of its own: two threads at least.
        let err = mount_private_tmpfs(&root, 8).unwrap_err();
        assert!(
            matches!(err, ScratchMountError::Threads(n) if n >= 2),
            "{err}"
        );
        assert!(
            err.to_string().contains("before any other thread starts"),
            "{err}"
        );
        assert!(!err.is_permission());
        assert!(!root.exists(), "nothing is made when refused");
    }
}
