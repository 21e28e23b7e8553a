//! A mount namespace per call that may use UNIX sockets (`execution.unix_sockets`,
//! docs/sandbox.md "UNIX sockets"): the call's scratch folder is its `/tmp`, and `/run`
//! and `/var/tmp` are an empty read-only folder.
//!
//! Why: Landlock (ABI 7) does not govern `connect` to a socket file, so a program that may
//! make UNIX sockets could reach any socket file of the host its user may write to (the
//! D-Bus system bus, journald, an X server in `/tmp/.X11-unix`, another call's
//! LibreOffice pipe in `/tmp`). Sockets live in `/run` and `/tmp` by convention; in this
//! namespace those are the call's own or empty. LibreOffice puts its single-instance pipe
//! in `/tmp` (it checks `/tmp` then `/var/tmp` and gives up), which is now the call's.
//! Abstract sockets are scoped by network namespace, and such a call always has its own
//! ([`crate::launch::plan::Plan::unix_sockets`]).
//!
//! Made like a call's network namespace: a short-lived thread unshares `CLONE_NEWNS`,
//! makes every mount private (nothing propagates to or from the executor's namespace),
//! bind-mounts, opens `/proc/thread-self/ns/mnt` and ends; the tool's process joins it
//! (`setns`) between clone and exec, before it enters its working directory. The
//! executor's own seccomp filter (`policies/seccomp/executor.json`) allows `mount` with
//! exactly these two flag sets and nothing else, so no remount, no new file system.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The folders a call with UNIX sockets sees empty (read-only): where the host's daemons
/// keep their sockets. Skipped where missing or a symbolic link (`/var/run` is one to
/// `/run` on most systems, and is then covered by it).
pub const HIDDEN: [&str; 3] = ["/run", "/var/run", "/var/tmp"];

/// Why a call's mount namespace could not be made.
#[derive(Debug, thiserror::Error)]
pub enum MntnsError {
    /// The thread could not start.
    #[error("cannot start the thread that makes a call's mount namespace: {0}")]
    Thread(io::Error),
    /// `unshare(CLONE_NEWNS)` failed (no `CAP_SYS_ADMIN`).
    #[error("unshare(CLONE_NEWNS) failed: {0} (the executor needs CAP_SYS_ADMIN)")]
    Unshare(io::Error),
    /// A mount failed.
    #[error("mounting {what} failed: {source} (under Docker, an AppArmor profile that forbids mount does this)")]
    Mount {
        /// Which mount.
        what: String,
        /// The error.
        source: io::Error,
    },
    /// The namespace was made but cannot be joined.
    #[error("joining a call's mount namespace failed: {0} (setns needs CAP_SYS_CHROOT besides CAP_SYS_ADMIN)")]
    Join(io::Error),
    /// The empty folder could not be made.
    #[error("cannot make the empty folder {0}: {1}")]
    Empty(PathBuf, io::Error),
    /// `/proc/thread-self/ns/mnt` could not be opened.
    #[error("opening /proc/thread-self/ns/mnt failed: {0}")]
    Open(io::Error),
    /// The thread ended without answering.
    #[error("the thread that makes a call's mount namespace ended without an answer")]
    Lost,
}

/// What the executor says when a call's mount namespace cannot be made here.
pub const UNAVAILABLE: &str = "skills with UNIX sockets (execution.unix_sockets, or [grants.<skill>] unix_sockets) are unavailable: the executor cannot give a call a /tmp of its own (it needs CAP_SYS_ADMIN and, to join it, CAP_SYS_CHROOT; root under skillbox up)";

/// Makes a mount namespace where `tmp` is `/tmp` and [`HIDDEN`] are `empty` (made here,
/// root's, mode 0555, when missing); returns its fd. `needed` are paths the call must
/// still reach (its skill folder, the scratch root with its dependencies): those under
/// `/tmp` (the default scratch root is) stay where they are, each first folder below
/// `/tmp` bound again on a folder of that name in the call's `/tmp`.
pub fn create(tmp: &Path, empty: &Path, needed: &[&Path]) -> Result<OwnedFd, MntnsError> {
    make_empty(empty)?;
    let (tmp, empty) = (tmp.to_path_buf(), empty.to_path_buf());
    let kept = kept_under_tmp(needed);
    std::thread::Builder::new()
        .name("call-mntns".into())
        .spawn(move || make_here(&tmp, &empty, &kept))
        .map_err(MntnsError::Thread)?
        .join()
        .map_err(|_| MntnsError::Lost)?
}

/// Whether this process can make (and join) a call's mount namespace: makes one with
/// `scratch_root` as `/tmp`, joins it from a thread, and drops it.
pub fn probe(scratch_root: &Path) -> Result<(), MntnsError> {
    let ns = create(scratch_root, &empty_dir(scratch_root), &[])?;
    std::thread::Builder::new()
        .name("mntns-probe".into())
        .spawn(move || join(ns))
        .map_err(MntnsError::Thread)?
        .join()
        .map_err(|_| MntnsError::Lost)?
        .map_err(|e| MntnsError::Join(e.into()))
}

/// Joins `ns` on this thread, which first stops sharing its file system attributes with
/// the process's other threads (a mount namespace is joined by one whose root and
/// working directory are its own; a tool's process is, cloned without `CLONE_FS`).
fn join(ns: OwnedFd) -> nix::Result<()> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS)?;
    nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNS)
}

/// The empty folder under the scratch root.
pub fn empty_dir(scratch_root: &Path) -> PathBuf {
    scratch_root.join(".empty")
}

fn make_empty(empty: &Path) -> Result<(), MntnsError> {
    match std::fs::DirBuilder::new().mode(0o555).create(empty) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(MntnsError::Empty(empty.to_path_buf(), e)),
    }
}

/// The steps, on the calling thread, which stays in the new namespace: only for a thread
/// that ends right after.
/// The first folders below `/tmp` of `needed` (`/tmp/skillbox-scratch` for
/// `/tmp/skillbox-scratch/.deps/x`), each once.
fn kept_under_tmp(needed: &[&Path]) -> Vec<PathBuf> {
    let mut kept: Vec<PathBuf> = (needed.iter())
        .filter_map(|p| p.strip_prefix("/tmp").ok())
        .filter_map(|rest| rest.components().next())
        .map(|first| Path::new("/tmp").join(first))
        .collect();
    kept.sort();
    kept.dedup();
    kept
}

fn make_here(tmp: &Path, empty: &Path, kept: &[PathBuf]) -> Result<OwnedFd, MntnsError> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
        .map_err(|e| MntnsError::Unshare(e.into()))?;
    mount(
        None,
        Path::new("/"),
        libc::MS_REC | libc::MS_PRIVATE,
        "/ private",
    )?;
    // Both sources held open (in the new namespace: a bind takes its source from the
    // caller's) before any mount: a scratch root under /tmp or /var/tmp would be out of
    // sight by its path once the mounts below are made.
    let hold = |p: &Path, what: &str| {
        std::fs::File::open(p).map_err(|source| MntnsError::Mount {
            what: format!("{what} ({})", p.display()),
            source,
        })
    };
    let (tmp, empty) = (
        hold(tmp, "the call's /tmp")?,
        hold(empty, "the empty folder")?,
    );
    let kept = (kept.iter())
        .map(|p| Ok((p, hold(p, "a folder the call needs under /tmp")?)))
        .collect::<Result<Vec<_>, MntnsError>>()?;
    let by_fd =
        |f: &std::fs::File| PathBuf::from(format!("/proc/thread-self/fd/{}", f.as_raw_fd()));
    mount(
        Some(&by_fd(&tmp)),
        Path::new("/tmp"),
        libc::MS_BIND,
        "the call's /tmp",
    )?;
    for (path, held) in &kept {
        // The folder to mount on, made in the call's /tmp (root's; the call cannot remove
        // a mount point).
        match std::fs::DirBuilder::new().mode(0o755).create(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(source) => {
                return Err(MntnsError::Mount {
                    what: format!("a mount point for {}", path.display()),
                    source,
                })
            }
        }
        mount(
            Some(&by_fd(held)),
            path,
            libc::MS_BIND,
            "a folder the call needs under /tmp",
        )?;
    }
    for hidden in HIDDEN {
        let path = Path::new(hidden);
        let is_dir = path.symlink_metadata().is_ok_and(|m| m.is_dir());
        if is_dir {
            mount(Some(&by_fd(&empty)), path, libc::MS_BIND, hidden)?;
        }
    }
    // SAFETY: a static NUL-terminated path; the new fd is owned below.
    let fd = unsafe {
        libc::open(
            c"/proc/thread-self/ns/mnt".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(MntnsError::Open(io::Error::last_os_error()));
    }
    // SAFETY: just opened, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `mount(source, target, NULL, flags, NULL)`: a bind or a propagation change only (the
/// executor's filter refuses any other flags).
fn mount(
    source: Option<&Path>,
    target: &Path,
    flags: libc::c_ulong,
    what: &str,
) -> Result<(), MntnsError> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let failed = |source| MntnsError::Mount {
        what: what.to_string(),
        source,
    };
    let source = source.map(c).transpose().map_err(failed)?;
    let target = c(target).map_err(failed)?;
    // SAFETY: mount reads NUL-terminated strings that live across the call; a null source
    // is allowed for a propagation change; no data.
    let r = unsafe {
        libc::mount(
            source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(failed(io::Error::last_os_error()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_call_needs_under_tmp_is_kept_by_its_first_folder() {
        let kept = kept_under_tmp(&[
            Path::new("/tmp/skillbox-scratch/.deps/ab"),
            Path::new("/tmp/skillbox-scratch"),
            Path::new("/tmp/.tmpX/skills/office"),
            Path::new("/skills/office"),
            Path::new("/tmpfoo/x"),
        ]);
        assert_eq!(
            kept,
            [Path::new("/tmp/.tmpX"), Path::new("/tmp/skillbox-scratch")]
        );
    }

    #[test]
    fn a_call_namespace_has_its_own_tmp_and_an_empty_run() {
        let root = tempfile::tempdir().unwrap();
        let tmp = root.path().join("call");
        std::fs::create_dir(&tmp).unwrap();
        std::fs::write(tmp.join("mine"), "x").unwrap();
        let ns = match create(&tmp, &empty_dir(root.path()), &[]) {
            Ok(ns) => ns,
            Err(e) => {
                println!("SKIPPED: mount namespaces unavailable here: {e}");
                return;
            }
        };
        let seen = std::thread::spawn(move || {
            join(ns).unwrap();
            let tmp: Vec<_> = std::fs::read_dir("/tmp")
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            let run = std::fs::read_dir("/run").unwrap().count();
            (tmp, run)
        })
        .join()
        .unwrap();
        assert_eq!(seen.0, ["mine"]);
        assert_eq!(seen.1, 0, "/run is empty in the call's namespace");
        // The executor's own namespace is untouched.
        assert!(!Path::new("/tmp/mine").exists());
    }
}
