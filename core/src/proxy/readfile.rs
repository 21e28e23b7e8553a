//! The readFile proxy: one workspace file, read by the core on a skill's behalf.
//!
//! A request names a workspace-relative path. The proxy
//! 1. refuses empty paths, NUL bytes, absolute paths and `..` components, and drops `.`
//!    and empty components (`./notes//a.md` is `notes/a.md`);
//! 2. requires the path to match one of the skill's `permissions.workspace.read` globs,
//!    with `*` not crossing `/` (`notes/*` covers `notes/a.md`, not `notes/a/b.md`;
//!    `notes/**` covers both);
//! 3. opens it with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` relative to a
//!    directory fd of the workspace, so the kernel refuses any resolution (`..`, an
//!    absolute or relative symlink, a `/proc` magic link) that would leave the workspace.
//!    Symlinks that stay inside the workspace are followed; the glob is checked against
//!    the path the skill named, not the link's target. Without `openat2` (Linux < 5.6,
//!    or a seccomp profile that hides it) readFile fails closed as unavailable;
//! 4. reads regular files only (opened with `O_NONBLOCK`, so a FIFO cannot hang the core),
//!    at most `max_bytes`;
//! 5. returns the content as text and refuses files that are not valid UTF-8: a lossy
//!    conversion would silently corrupt binary data, so the skill is told instead.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::PathBuf;

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
    /// `PermissionDenied` for an absolute path, `..`, an undeclared path or an escape from
    /// the workspace; `InvalidParams` for an empty path, NUL, a non-regular or non-UTF-8
    /// file; `NotFound`; `TooLarge`; `Unavailable` without `openat2`.
    pub fn read(
        &self,
        globs: &[String],
        req: &ReadFileParams,
    ) -> Result<ReadFileResult, ProxyError> {
        let path = normalize(&req.path)?;
        check_globs(globs, &path)?;
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

fn check_globs(globs: &[String], path: &str) -> Result<(), ProxyError> {
    if globs.is_empty() {
        return Err(ProxyError::denied(
            CAP,
            format!(
                "{path:?}: the skill declares no permissions.workspace.read; declare a glob \
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
                "{path:?} is not covered by the skill's permissions.workspace.read {globs:?}; \
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
            format!("{path:?} leads outside the workspace (a symlink or mount escapes it)"),
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
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _root: tempfile::TempDir,
        outside: PathBuf,
        proxy: ReadFileProxy,
        workspace: PathBuf,
    }

    /// `<root>/ws` is the workspace with `notes/a.md`, `notes/sub/b.md`, `secret.txt`;
    /// `<root>/outside.txt` is outside it.
    fn fixture(max_bytes: u64) -> Fixture {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(ws.join("notes/sub")).unwrap();
        std::fs::write(ws.join("notes/a.md"), "hello").unwrap();
        std::fs::write(ws.join("notes/sub/b.md"), "deep").unwrap();
        std::fs::write(ws.join("secret.txt"), "secret").unwrap();
        let outside = root.path().join("outside.txt");
        std::fs::write(&outside, "outside").unwrap();
        Fixture {
            proxy: ReadFileProxy::new(ws.clone(), max_bytes),
            workspace: ws,
            outside,
            _root: root,
        }
    }

    fn globs(g: &[&str]) -> Vec<String> {
        g.iter().map(|s| s.to_string()).collect()
    }

    fn read(f: &Fixture, g: &[&str], path: &str) -> Result<ReadFileResult, ProxyError> {
        f.proxy.read(
            &globs(g),
            &ReadFileParams {
                path: path.to_string(),
            },
        )
    }

    fn denied(r: Result<ReadFileResult, ProxyError>) -> String {
        match r {
            Err(ProxyError::PermissionDenied { reason, .. }) => reason,
            other => panic!("expected a permission refusal, got {other:?}"),
        }
    }

    fn invalid(r: Result<ReadFileResult, ProxyError>) -> String {
        match r {
            Err(ProxyError::InvalidParams { reason, .. }) => reason,
            other => panic!("expected an invalid-params refusal, got {other:?}"),
        }
    }

    #[test]
    fn readfile_reads_declared_file() {
        let f = fixture(DEFAULT_MAX_BYTES);
        assert_eq!(
            read(&f, &["notes/**"], "notes/a.md").unwrap().content,
            "hello"
        );
        assert_eq!(
            read(&f, &["notes/**"], "./notes//sub/b.md")
                .unwrap()
                .content,
            "deep"
        );
        assert_eq!(
            read(&f, &["notes/*"], "notes/a.md").unwrap().content,
            "hello"
        );
    }

    #[test]
    fn readfile_refuses_dotdot() {
        let f = fixture(DEFAULT_MAX_BYTES);
        for path in ["../outside.txt", "notes/../secret.txt", "notes/.."] {
            let reason = denied(read(&f, &["**"], path));
            assert!(reason.contains("\"..\""), "{path}: {reason}");
        }
    }

    #[test]
    fn readfile_refuses_absolute_path() {
        let f = fixture(DEFAULT_MAX_BYTES);
        let abs = f.workspace.join("notes/a.md");
        for path in ["/etc/passwd", abs.to_str().unwrap()] {
            let reason = denied(read(&f, &["**"], path));
            assert!(reason.starts_with("absolute path"), "{path}: {reason}");
        }
    }

    #[test]
    fn readfile_refuses_symlink_out_of_workspace() {
        let f = fixture(DEFAULT_MAX_BYTES);
        symlink(&f.outside, f.workspace.join("notes/abs-link")).unwrap();
        symlink("../../outside.txt", f.workspace.join("notes/rel-link")).unwrap();
        symlink("/etc", f.workspace.join("notes/etc")).unwrap();
        for path in ["notes/abs-link", "notes/rel-link", "notes/etc/passwd"] {
            let reason = denied(read(&f, &["notes/**"], path));
            assert!(
                reason.contains("leads outside the workspace"),
                "{path}: {reason}"
            );
        }
    }

    #[test]
    fn readfile_follows_symlink_inside_workspace() {
        let f = fixture(DEFAULT_MAX_BYTES);
        symlink("sub/b.md", f.workspace.join("notes/inside")).unwrap();
        assert_eq!(
            read(&f, &["notes/**"], "notes/inside").unwrap().content,
            "deep"
        );
    }

    #[test]
    fn readfile_refuses_magic_link() {
        let f = fixture(DEFAULT_MAX_BYTES);
        symlink("/proc/self/root", f.workspace.join("notes/root")).unwrap();
        let reason = denied(read(&f, &["notes/**"], "notes/root/etc/passwd"));
        assert!(
            reason.contains("outside the workspace") || reason.contains("magic link"),
            "{reason}"
        );
    }

    #[test]
    fn readfile_refuses_undeclared_glob() {
        let f = fixture(DEFAULT_MAX_BYTES);
        let reason = denied(read(&f, &["notes/**"], "secret.txt"));
        assert!(
            reason.contains("not covered by the skill's permissions.workspace.read"),
            "{reason}"
        );
        // `*` does not cross a directory separator.
        let reason = denied(read(&f, &["notes/*"], "notes/sub/b.md"));
        assert!(reason.contains("not covered"), "{reason}");
        let reason = denied(read(&f, &[], "notes/a.md"));
        assert!(
            reason.contains("declares no permissions.workspace.read"),
            "{reason}"
        );
    }

    #[test]
    fn readfile_refuses_directory() {
        let f = fixture(DEFAULT_MAX_BYTES);
        let reason = invalid(read(&f, &["notes/**"], "notes/sub"));
        assert!(reason.contains("is a directory"), "{reason}");
        let reason = invalid(read(&f, &["**"], "."));
        assert!(reason.contains("the workspace itself"), "{reason}");
    }

    #[test]
    fn readfile_refuses_fifo_without_blocking() {
        let f = fixture(DEFAULT_MAX_BYTES);
        nix::unistd::mkfifo(
            &f.workspace.join("notes/pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let reason = invalid(read(&f, &["notes/**"], "notes/pipe"));
        assert!(reason.contains("named pipe"), "{reason}");
    }

    #[test]
    fn readfile_refuses_oversize_file() {
        let f = fixture(4);
        let err = read(&f, &["notes/**"], "notes/a.md").unwrap_err();
        assert!(
            matches!(
                err,
                ProxyError::TooLarge {
                    what: "file",
                    limit: 4,
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            read(&f, &["notes/**"], "notes/sub/b.md").unwrap().content,
            "deep"
        );
    }

    #[test]
    fn readfile_refuses_binary_file() {
        let f = fixture(DEFAULT_MAX_BYTES);
        std::fs::write(f.workspace.join("notes/bin"), [0x7f, b'E', 0xff, 0xfe]).unwrap();
        let reason = invalid(read(&f, &["notes/**"], "notes/bin"));
        assert!(reason.contains("not UTF-8 text"), "{reason}");
    }

    #[test]
    fn readfile_refuses_empty_and_nul_paths() {
        let f = fixture(DEFAULT_MAX_BYTES);
        assert!(invalid(read(&f, &["**"], "")).contains("empty"));
        assert!(invalid(read(&f, &["**"], "notes/a.md\0x")).contains("NUL"));
    }

    #[test]
    fn readfile_reports_missing_file() {
        let f = fixture(DEFAULT_MAX_BYTES);
        let err = read(&f, &["notes/**"], "notes/none.md").unwrap_err();
        assert!(
            matches!(err, ProxyError::NotFound { ref path } if path == "notes/none.md"),
            "{err:?}"
        );
    }
}
