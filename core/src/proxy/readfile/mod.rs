//! The readFile proxy: one workspace file, read by the core on a skill's behalf.
//!
//! readFile judges the file it opens, not the name it was asked for. A request names a
//! workspace-relative path. The proxy
//! 1. refuses empty paths, NUL bytes, absolute paths and `..` components, and drops `.`
//!    and empty components (`./notes//a.md` is `notes/a.md`);
//! 2. refuses the core's state folder (`.skillbox`) and its configuration
//!    (`skillbox.toml`) by name, ASCII case ignored, whatever the skill's globs ([`guard`]);
//! 3. requires the name asked for to match one of the skill's `permissions.workspace.read`
//!    globs, with `*` not crossing `/` (`notes/*` covers `notes/a.md`, not
//!    `notes/a/b.md`; `notes/**` covers both), so a skill cannot even probe which files
//!    exist outside its globs;
//! 4. opens it with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` relative to a
//!    directory fd of the workspace, so the kernel refuses any resolution (`..`, an
//!    absolute symlink, a relative one that climbs out, a `/proc` magic link) that would
//!    leave the workspace. Without `openat2` (Linux < 5.6, or a seccomp profile that hides
//!    it) readFile fails closed as unavailable;
//! 5. reads back where the kernel resolved it: the path of the opened fd
//!    (`/proc/self/fd/N`) relative to the path of the workspace fd, both as the kernel
//!    reports them after the open, with no second lookup by name that a swapped link could
//!    redirect. That resolved path must not be in the state folder or be the config, and
//!    must match the skill's globs too: a symlink `notes/tok -> ../.skillbox/api-token`
//!    or `notes/x -> ../private.txt` is refused although its own name matches `notes/**`.
//!    (The alternative, resolving component by component with `O_PATH|O_NOFOLLOW`, would
//!    re-implement the kernel's symlink walk; reading the fd's path keeps the kernel as the
//!    one resolver.) Without `/proc` readFile fails closed as unavailable;
//! 6. refuses the opened file when its device and inode are those of any file in the state
//!    folder or of the config: a hard link (or bind mount) under an innocent name reads
//!    the same bytes, and no name check sees it;
//! 7. reads regular files only (opened with `O_NONBLOCK`, so a FIFO cannot hang the core),
//!    at most `max_bytes`;
//! 8. returns the content as text and refuses files that are not valid UTF-8: a lossy
//!    conversion would silently corrupt binary data, so the skill is told instead.

mod guard;

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSetBuilder};
use skillbox_protocol::methods::{ReadFileParams, ReadFileResult};

use super::ProxyError;

const CAP: &str = "readFile";

/// Default largest file a skill may read: 1 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 1024 * 1024;

/// Longest path accepted (Linux `PATH_MAX`).
const MAX_PATH_LEN: usize = 4096;

/// Reads workspace files for skills (see the module docs for the rules).
#[derive(Debug, Clone)]
pub struct ReadFileProxy {
    workspace: PathBuf,
    max_bytes: u64,
}

impl ReadFileProxy {
    /// A proxy over the workspace directory `workspace`, returning files of at most
    /// `max_bytes` bytes ([`DEFAULT_MAX_BYTES`] is the usual value).
    pub fn new(workspace: PathBuf, max_bytes: u64) -> Self {
        Self {
            workspace,
            max_bytes,
        }
    }

    /// Reads `req.path` for a skill whose `permissions.workspace.read` is `globs`.
    ///
    /// # Errors
    /// `PermissionDenied` for an absolute path, `..`, an undeclared path (asked for or
    /// resolved), an escape from the workspace, the state folder or the config (by name,
    /// link or hard link); `InvalidParams` for an empty path, NUL, a non-regular or
    /// non-UTF-8 file; `NotFound`; `TooLarge`; `Unavailable` without `openat2` or `/proc`.
    pub fn read(
        &self,
        globs: &[String],
        req: &ReadFileParams,
    ) -> Result<ReadFileResult, ProxyError> {
        let path = normalize(&req.path)?;
        guard::refuse_protected_name(Path::new(&path), "")?;
        check_globs(globs, Path::new(&path), &format!("{path:?}"))?;
        let workspace = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(&self.workspace)
            .map_err(|e| ProxyError::Unavailable {
                capability: CAP,
                reason: format!(
                    "the workspace {} cannot be opened: {e}; check the core's --workspace",
                    self.workspace.display()
                ),
            })?;
        let file = File::from(open_beneath(&workspace, &path).map_err(|e| open_error(&path, e))?);
        let meta = file.metadata().map_err(|source| ProxyError::Read {
            path: path.clone(),
            step: "reading its metadata",
            source,
        })?;
        let resolved = guard::resolved_path(&workspace, &file, &meta)?;
        let how = format!("{path:?} resolves to ");
        if resolved != Path::new(&path) {
            guard::refuse_protected_name(&resolved, &how)?;
        }
        guard::refuse_protected_file(&self.workspace, &path, &meta)?;
        if resolved != Path::new(&path) {
            let shown = format!("{how}{:?}, which", resolved.display().to_string());
            check_globs(globs, &resolved, &shown)?;
        }
        if !meta.is_file() {
            return Err(ProxyError::invalid(
                CAP,
                format!(
                    "{path:?} is {}; readFile reads regular files only",
                    describe(&meta.file_type())
                ),
            ));
        }
        let too_large = || ProxyError::TooLarge {
            capability: CAP,
            what: "file",
            limit: self.max_bytes,
        };
        if meta.len() > self.max_bytes {
            return Err(too_large());
        }
        let mut content = Vec::new();
        file.take(self.max_bytes.saturating_add(1))
            .read_to_end(&mut content)
            .map_err(|source| ProxyError::Read {
                path: path.clone(),
                step: "reading it",
                source,
            })?;
        if content.len() as u64 > self.max_bytes {
            return Err(too_large());
        }
        let content = String::from_utf8(content).map_err(|_| {
            ProxyError::invalid(
                CAP,
                format!("{path:?} is not UTF-8 text; readFile returns text files only"),
            )
        })?;
        Ok(ReadFileResult { content })
    }
}

/// The path as `a/b/c`, or why it is refused.
fn normalize(path: &str) -> Result<String, ProxyError> {
    if path.is_empty() {
        return Err(ProxyError::invalid(CAP, "the path is empty"));
    }
    if path.contains('\0') {
        return Err(ProxyError::invalid(CAP, "the path contains a NUL byte"));
    }
    if path.len() > MAX_PATH_LEN {
        return Err(ProxyError::invalid(
            CAP,
            format!("the path is longer than {MAX_PATH_LEN} bytes"),
        ));
    }
    if path.starts_with('/') {
        return Err(ProxyError::denied(
            CAP,
            format!("absolute path {path:?}: readFile takes paths relative to the workspace"),
        ));
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(ProxyError::denied(
                    CAP,
                    format!("{path:?} contains \"..\": readFile stays inside the workspace"),
                ))
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(ProxyError::invalid(
            CAP,
            format!("{path:?} names the workspace itself, not a file"),
        ));
    }
    Ok(parts.join("/"))
}

/// Requires `path` to match one of `globs`; `shown` names it in the refusal.
fn check_globs(globs: &[String], path: &Path, shown: &str) -> Result<(), ProxyError> {
    if globs.is_empty() {
        return Err(ProxyError::denied(
            CAP,
            format!(
                "{shown}: the skill declares no permissions.workspace.read; declare a glob \
                 such as \"notes/**\" in skill.yaml"
            ),
        ));
    }
    let mut set = GlobSetBuilder::new();
    for glob in globs {
        match GlobBuilder::new(glob).literal_separator(true).build() {
            Ok(g) => {
                set.add(g);
            }
            Err(e) => {
                tracing::warn!(glob = %glob, error = %e, "ignoring an invalid workspace.read glob")
            }
        }
    }
    let set = set.build().map_err(|e| {
        ProxyError::denied(
            CAP,
            format!("the skill's workspace.read globs are invalid: {e}"),
        )
    })?;
    if set.is_match(path) {
        Ok(())
    } else {
        Err(ProxyError::denied(
            CAP,
            format!(
                "{shown} is not covered by the skill's permissions.workspace.read {globs:?}; \
                 declare a matching glob in skill.yaml"
            ),
        ))
    }
}

/// `struct open_how` of `linux/openat2.h` (libc's is `#[non_exhaustive]`).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Opens `path` read-only relative to `dir`, refusing any resolution that leaves `dir`.
fn open_beneath(dir: &File, path: &str) -> io::Result<OwnedFd> {
    let c_path = CString::new(path).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let how = OpenHow {
        flags: (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK) as u64,
        mode: 0,
        resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
    };
    loop {
        // SAFETY: `dir` is an open directory fd for the duration of the call, `c_path` is
        // a NUL-terminated string that outlives it, and `how` points to a live, properly
        // initialized `open_how` whose exact size is passed; the kernel only reads them.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                c_path.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if ret >= 0 {
            let fd = RawFd::try_from(ret).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
            // SAFETY: the kernel just returned `fd` as a new descriptor that nothing else
            // owns; `OwnedFd` takes sole ownership and closes it once.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

fn open_error(path: &str, err: io::Error) -> ProxyError {
    match err.raw_os_error() {
        Some(libc::ENOSYS) => ProxyError::Unavailable {
            capability: CAP,
            reason: "this kernel has no openat2 (Linux 5.6+ is needed, or a seccomp profile \
                     hides it), so the core cannot confine reads to the workspace; readFile \
                     is disabled"
                .into(),
        },
        Some(libc::EXDEV) => ProxyError::denied(
            CAP,
            format!(
                "{path:?} leads outside the workspace (an absolute symlink, or a symlink or \
                 mount that escapes it)"
            ),
        ),
        Some(libc::ELOOP) => ProxyError::denied(
            CAP,
            format!("{path:?} goes through a magic link or too many symlinks"),
        ),
        Some(libc::EACCES | libc::EPERM) => ProxyError::denied(
            CAP,
            format!("{path:?} is not readable by the core's user: {err}"),
        ),
        Some(libc::ENOENT | libc::ENOTDIR) => ProxyError::NotFound {
            path: path.to_string(),
        },
        Some(libc::ENXIO) => ProxyError::invalid(
            CAP,
            format!("{path:?} is a socket or device; readFile reads regular files only"),
        ),
        _ => ProxyError::Read {
            path: path.to_string(),
            step: "opening it",
            source: err,
        },
    }
}

fn describe(kind: &std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a named pipe"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests;
