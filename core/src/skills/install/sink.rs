//! Writes the entries of a package (from an archive or a folder) into a private staging
//! folder, enforcing one set of rules for both: safe relative names, only files and
//! folders, no setuid/setgid/sticky bits, no duplicates, and caps on the number of
//! entries, the bytes of one file, the bytes of all files and the compression ratio —
//! every size counted from the bytes actually written, never from what a header claims.

use std::collections::HashSet;
use std::fs::{DirBuilder, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Most entries (files and folders) in one package.
pub const MAX_ENTRIES: usize = 10_000;
/// Largest single file.
pub const MAX_ENTRY_BYTES: u64 = 100 * 1024 * 1024;
/// Largest total of all files.
pub const MAX_TOTAL_BYTES: u64 = 500 * 1024 * 1024;
/// Highest ratio of bytes written to compressed bytes read.
pub const MAX_RATIO: u64 = 100;
/// Bytes written before the ratio applies (a tiny archive of text compresses well).
pub const RATIO_GRACE_BYTES: u64 = 1024 * 1024;
/// Longest path inside a package.
pub const MAX_PATH_BYTES: usize = 1024;
/// Deepest nesting inside a package.
pub const MAX_DEPTH: usize = 32;

/// The caps of one extraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most entries.
    pub max_entries: usize,
    /// Largest file.
    pub max_entry_bytes: u64,
    /// Largest total.
    pub max_total_bytes: u64,
    /// Highest written:compressed ratio.
    pub max_ratio: u64,
    /// Bytes written before the ratio applies.
    pub ratio_grace_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_entries: MAX_ENTRIES,
            max_entry_bytes: MAX_ENTRY_BYTES,
            max_total_bytes: MAX_TOTAL_BYTES,
            max_ratio: MAX_RATIO,
            ratio_grace_bytes: RATIO_GRACE_BYTES,
        }
    }
}

/// Why a package's contents were refused. Each variant is one rule; [`check`] names it.
///
/// [`check`]: ExtractError::check
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    /// An entry's name is not a safe relative path.
    #[error("entry {name:?}: {reason}; package entries must be relative paths inside the package")]
    Path {
        /// The name as found (lossy).
        name: String,
        /// Which rule it broke.
        reason: &'static str,
    },
    /// A symbolic link.
    #[error("entry {name:?} is a symlink; packages may not contain links, ship the file itself")]
    Symlink {
        /// The name.
        name: String,
    },
    /// A hard link.
    #[error("entry {name:?} is a hard link; packages may not contain links, ship the file itself")]
    Hardlink {
        /// The name.
        name: String,
    },
    /// A device, FIFO, socket, sparse file or an entry type this reader does not know.
    #[error("entry {name:?} is a {kind}; packages hold only regular files and folders")]
    EntryType {
        /// The name.
        name: String,
        /// What it is.
        kind: String,
    },
    /// setuid, setgid or sticky bits.
    #[error("entry {name:?} has mode {mode:o} with setuid/setgid/sticky bits; remove them (chmod u-s,g-s,-t)")]
    SpecialBits {
        /// The name.
        name: String,
        /// The mode found.
        mode: u32,
    },
    /// The same name twice (or a file where a folder is, or the reverse).
    #[error("entry {name:?} appears twice (or clashes with a folder of that name)")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// More entries than allowed.
    #[error("more than {limit} entries in the package")]
    EntryCount {
        /// The cap.
        limit: usize,
    },
    /// One file larger than allowed.
    #[error("entry {name:?} is larger than {limit} bytes")]
    EntrySize {
        /// The name.
        name: String,
        /// The cap.
        limit: u64,
    },
    /// All files together larger than allowed.
    #[error("the package holds more than {limit} bytes in all")]
    TotalSize {
        /// The cap.
        limit: u64,
    },
    /// The archive expands more than allowed.
    #[error("the archive expands more than {limit}:1 ({written} bytes from {compressed} compressed bytes); a compression bomb?")]
    Ratio {
        /// The cap.
        limit: u64,
        /// Bytes written so far.
        written: u64,
        /// Compressed bytes read so far.
        compressed: u64,
    },
    /// The archive is not a valid `.tar.gz` (bad gzip, bad tar header, truncated).
    #[error("not a valid .tar.gz package: {reason}")]
    Malformed {
        /// What is wrong.
        reason: String,
    },
    /// Reading the source or writing into staging failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

impl ExtractError {
    /// The name of the rule that refused the package.
    pub fn check(&self) -> &'static str {
        match self {
            ExtractError::Path { .. } => "path",
            ExtractError::Symlink { .. } => "symlink",
            ExtractError::Hardlink { .. } => "hardlink",
            ExtractError::EntryType { .. } => "entry_type",
            ExtractError::SpecialBits { .. } => "special_bits",
            ExtractError::Duplicate { .. } => "duplicate",
            ExtractError::EntryCount { .. } => "entry_count",
            ExtractError::EntrySize { .. } => "entry_size",
            ExtractError::TotalSize { .. } => "total_size",
            ExtractError::Ratio { .. } => "ratio",
            ExtractError::Malformed { .. } => "malformed",
            ExtractError::Io { .. } => "io",
        }
    }
}

/// Checks an entry name and returns it normalized (`a/b/c`, no leading `./`, no trailing
/// `/`); `None` for the package folder itself (`./`).
pub fn normalize(raw: &[u8]) -> Result<Option<String>, ExtractError> {
    let lossy = || String::from_utf8_lossy(raw).into_owned();
    let refuse = |reason| ExtractError::Path {
        name: lossy(),
        reason,
    };
    if raw.contains(&0) {
        return Err(refuse("NUL byte in the name"));
    }
    let name = std::str::from_utf8(raw).map_err(|_| refuse("name is not UTF-8"))?;
    if name.contains('\\') {
        return Err(refuse("backslash in the name"));
    }
    if name.chars().any(char::is_control) {
        return Err(refuse("control character in the name"));
    }
    if name.starts_with('/') {
        return Err(refuse("absolute path"));
    }
    if name.len() > MAX_PATH_BYTES {
        return Err(refuse("path longer than 1024 bytes"));
    }
    let mut rest = name;
    while let Some(r) = rest.strip_prefix("./") {
        rest = r;
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() || rest == "." {
        return Ok(None);
    }
    let mut parts = 0;
    for part in rest.split('/') {
        parts += 1;
        match part {
            ".." => return Err(refuse("`..` in the path")),
            "" | "." => return Err(refuse("empty or `.` component in the path")),
            p if p.len() > 255 => return Err(refuse("a name longer than 255 bytes")),
            _ => {}
        }
    }
    if parts > MAX_DEPTH {
        return Err(refuse("folders nest deeper than 32 levels"));
    }
    Ok(Some(rest.to_string()))
}

/// Refuses setuid, setgid and sticky bits.
pub fn check_mode(name: &str, mode: u32) -> Result<u32, ExtractError> {
    if mode & 0o7000 != 0 {
        return Err(ExtractError::SpecialBits {
            name: name.to_string(),
            mode,
        });
    }
    Ok(mode & 0o777)
}

/// Writes checked entries below one folder and keeps the counts.
#[derive(Debug)]
pub struct Sink {
    root: PathBuf,
    limits: Limits,
    seen: HashSet<String>,
    entries: usize,
    total: u64,
}

impl Sink {
    /// A sink writing below `root` (which must exist and be private).
    pub fn new(root: &Path, limits: Limits) -> Self {
        Self {
            root: root.to_path_buf(),
            limits,
            seen: HashSet::new(),
            entries: 0,
            total: 0,
        }
    }

    /// Bytes of file contents written so far.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Counts one entry of any kind against the entry cap.
    pub fn count_entry(&mut self) -> Result<(), ExtractError> {
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(ExtractError::EntryCount {
                limit: self.limits.max_entries,
            });
        }
        Ok(())
    }

    fn claim(&mut self, name: &str) -> Result<PathBuf, ExtractError> {
        if !self.seen.insert(name.to_string()) {
            return Err(ExtractError::Duplicate {
                name: name.to_string(),
            });
        }
        Ok(self.root.join(name))
    }

    /// Creates a folder (0755) and its missing parents.
    pub fn dir(&mut self, name: &str) -> Result<(), ExtractError> {
        let path = self.claim(name)?;
        self.make_dirs(name, &path)
    }

    fn make_dirs(&self, name: &str, path: &Path) -> Result<(), ExtractError> {
        match DirBuilder::new().recursive(true).mode(0o755).create(path) {
            Ok(()) => Ok(()),
            // A file where a folder is needed: two entries clash.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists || is_not_dir(&e) => {
                Err(ExtractError::Duplicate {
                    name: name.to_string(),
                })
            }
            Err(source) => Err(ExtractError::Io {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Writes a file with `mode` from `data`, counting the bytes as they are written.
    /// `declared` is what the source says the size is (refused early when over the cap);
    /// `compressed` reports the compressed bytes read so far, for the ratio cap.
    pub fn file(
        &mut self,
        name: &str,
        mode: u32,
        declared: u64,
        data: &mut dyn Read,
        compressed: &dyn Fn() -> Option<u64>,
    ) -> Result<(), ExtractError> {
        let entry_limit = self.limits.max_entry_bytes;
        let too_big = || ExtractError::EntrySize {
            name: name.to_string(),
            limit: entry_limit,
        };
        if declared > entry_limit {
            return Err(too_big());
        }
        if self.total.saturating_add(declared) > self.limits.max_total_bytes {
            return Err(ExtractError::TotalSize {
                limit: self.limits.max_total_bytes,
            });
        }
        let path = self.claim(name)?;
        if let Some(parent) = Path::new(name)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
        {
            let parent_name = parent.to_string_lossy();
            self.make_dirs(&parent_name, &self.root.join(parent))?;
        }
        let io = |source| ExtractError::Io {
            path: path.clone(),
            source,
        };
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists || is_not_dir(&e) {
                    ExtractError::Duplicate {
                        name: name.to_string(),
                    }
                } else {
                    io(e)
                }
            })?;
        let mut buf = vec![0u8; 64 * 1024];
        let mut written: u64 = 0;
        loop {
            let n = data.read(&mut buf).map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidData => {
                    ExtractError::Malformed {
                        reason: format!("entry {name:?}: {e}"),
                    }
                }
                _ => io(e),
            })?;
            if n == 0 {
                break;
            }
            written += n as u64;
            self.total += n as u64;
            if written > entry_limit {
                return Err(too_big());
            }
            if self.total > self.limits.max_total_bytes {
                return Err(ExtractError::TotalSize {
                    limit: self.limits.max_total_bytes,
                });
            }
            if let Some(c) = compressed() {
                if self.total > self.limits.ratio_grace_bytes
                    && self.total > c.saturating_mul(self.limits.max_ratio)
                {
                    return Err(ExtractError::Ratio {
                        limit: self.limits.max_ratio,
                        written: self.total,
                        compressed: c,
                    });
                }
            }
            out.write_all(&buf[..n]).map_err(io)?;
        }
        if written != declared {
            return Err(ExtractError::Malformed {
                reason: format!("entry {name:?}: {written} bytes read where {declared} were declared (truncated or changed while read)"),
            });
        }
        out.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io)?;
        Ok(())
    }
}

fn is_not_dir(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOTDIR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_accepts_plain_and_dot_prefixed_names() {
        assert_eq!(normalize(b"a/b.txt").unwrap().as_deref(), Some("a/b.txt"));
        assert_eq!(normalize(b"./a/").unwrap().as_deref(), Some("a"));
        assert_eq!(normalize(b"./").unwrap(), None);
    }

    #[test]
    fn normalize_refuses_unsafe_names() {
        for bad in [
            &b"../x"[..],
            b"a/../../x",
            b"/etc/passwd",
            b"a\\b",
            b"a\0b",
            b"a//b",
            b"a/./b",
            b"\xff",
        ] {
            let e = normalize(bad).unwrap_err();
            assert_eq!(e.check(), "path", "{bad:?}");
        }
    }

    #[test]
    fn check_mode_refuses_setuid_setgid_sticky() {
        assert_eq!(check_mode("a", 0o100755).unwrap(), 0o755);
        for m in [0o4755, 0o2755, 0o1777] {
            assert_eq!(check_mode("a", m).unwrap_err().check(), "special_bits");
        }
    }
}
