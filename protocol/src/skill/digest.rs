//! The canonical package digest (docs/signing-runbook.md): SHA-256 over a sorted listing of every
//! regular file's path, mode and SHA-256, the top-level `SIGNATURE` excluded. It is what a
//! signature covers and what the install lock records.
//!
//! It lives here, with the skill model, because it is part of the package format: the core
//! checks it on install (through `skillbox-certs`, which re-exports this module), and the
//! executor checks installed skills against the install lock on load without linking any
//! code-signing code (ARCHITECTURE: the executor never links it). The listing format is
//! documented byte for byte in `certs/README.md`; [`canonical_listing`] is the one place
//! that writes it.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use ring::digest::{Context, SHA256};

/// Name of the signature file at the top of a package; it is not part of the digest.
pub const SIGNATURE_FILE: &str = "SIGNATURE";

/// First line of the canonical listing; bump it if the listing format ever changes.
pub const DIGEST_VERSION_LINE: &str = "skillbox-digest-v1";

/// The prefix of a digest's written form (`sha256:<hex>`).
pub const DIGEST_PREFIX: &str = "sha256:";

/// One regular file of a package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Path relative to the package folder, components separated by `/`.
    pub path: String,
    /// `st_mode & 0o7777` (permission, setuid, setgid and sticky bits).
    pub mode: u32,
    /// SHA-256 of the file's bytes, lower-case hex.
    pub sha256: String,
}

/// The digest of a package folder and the files it covers (sorted by path bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageDigest {
    /// SHA-256 of [`canonical_listing`]`(&files)`, lower-case hex.
    pub hex: String,
    /// Every file covered, sorted by the bytes of `path`.
    pub files: Vec<FileEntry>,
}

impl PackageDigest {
    /// The digest as written in `SIGNATURE` and the install lock: `sha256:<hex>`.
    pub fn prefixed(&self) -> String {
        format!("{DIGEST_PREFIX}{}", self.hex)
    }
}

/// The hex part of a digest written as `sha256:<hex>` (or already bare).
pub fn digest_hex(written: &str) -> &str {
    written.strip_prefix(DIGEST_PREFIX).unwrap_or(written)
}

/// Why a package folder could not be digested. Each refusal names the file.
#[derive(Debug, thiserror::Error)]
pub enum DigestError {
    /// The path is not a folder.
    #[error("digest: {} is not a folder; point at the unpacked skill package", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// A folder or file could not be read.
    #[error("digest: cannot read {}: {source}; check the package's permissions", path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// A symbolic link.
    #[error("digest: {path} is a symbolic link; packages hold regular files only, replace the link with a copy of its target")]
    Symlink {
        /// Package-relative path.
        path: String,
    },
    /// A device, FIFO or socket.
    #[error("digest: {path} is a {kind}; packages hold regular files and folders only, remove it")]
    SpecialFile {
        /// Package-relative path.
        path: String,
        /// What it is.
        kind: &'static str,
    },
    /// A name that is not UTF-8.
    #[error("digest: the name {} is not UTF-8; rename the file", path.display())]
    NonUtf8Name {
        /// The path.
        path: PathBuf,
    },
    /// A name with a newline, carriage return or backslash.
    #[error("digest: the name {path:?} contains {what}; rename the file")]
    ForbiddenName {
        /// Package-relative path.
        path: String,
        /// What it contains.
        what: &'static str,
    },
    /// The top-level `SIGNATURE` is a folder, link or special file.
    #[error(
        "digest: the top-level {SIGNATURE_FILE} is not a regular file; remove it and sign again"
    )]
    SignatureNotAFile,
    /// A file changed between listing and reading.
    #[error(
        "digest: {path} changed while it was being read; digest a folder nobody is writing to"
    )]
    Changed {
        /// Package-relative path.
        path: String,
    },
}

/// The canonical listing the digest is taken over:
/// `"skillbox-digest-v1\n"` then, for each file in the given order,
/// `"{mode:o} {sha256} {path}\n"` (mode in octal without leading zeros).
pub fn canonical_listing(files: &[FileEntry]) -> String {
    let mut out = String::with_capacity(32 + files.len() * 96);
    out.push_str(DIGEST_VERSION_LINE);
    out.push('\n');
    for f in files {
        let _ = writeln!(out, "{:o} {} {}", f.mode, f.sha256, f.path);
    }
    out
}

/// Digests every regular file under `dir` except the top-level [`SIGNATURE_FILE`].
///
/// Refuses symbolic links, devices, FIFOs, sockets, names that are not UTF-8 and names
/// containing `\n`, `\r` or `\`. Folders are walked but not listed (an empty folder does
/// not change the digest).
pub fn package_digest(dir: &Path) -> Result<PackageDigest, DigestError> {
    let meta = fs::symlink_metadata(dir).map_err(|source| DigestError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(DigestError::NotADirectory {
            path: dir.to_path_buf(),
        });
    }

    let mut files = Vec::new();
    // Explicit stack: a deeply nested package must not exhaust the thread's stack.
    let mut pending: Vec<(PathBuf, String)> = vec![(dir.to_path_buf(), String::new())];
    while let Some((abs, rel)) = pending.pop() {
        let entries = fs::read_dir(&abs).map_err(|source| DigestError::Read {
            path: abs.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| DigestError::Read {
                path: abs.clone(),
                source,
            })?;
            let child_abs = entry.path();
            let name = entry
                .file_name()
                .into_string()
                .map_err(|_| DigestError::NonUtf8Name {
                    path: child_abs.clone(),
                })?;
            let child_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            check_name(&name, &child_rel)?;
            let meta = fs::symlink_metadata(&child_abs).map_err(|source| DigestError::Read {
                path: child_abs.clone(),
                source,
            })?;
            let ft = meta.file_type();
            if rel.is_empty() && name == SIGNATURE_FILE {
                if ft.is_file() {
                    continue;
                }
                return Err(DigestError::SignatureNotAFile);
            }
            if ft.is_symlink() {
                return Err(DigestError::Symlink { path: child_rel });
            } else if ft.is_dir() {
                pending.push((child_abs, child_rel));
            } else if ft.is_file() {
                let sha256 = hash_file(&child_abs, &child_rel, &meta)?;
                files.push(FileEntry {
                    path: child_rel,
                    mode: meta.mode() & 0o7777,
                    sha256,
                });
            } else {
                return Err(DigestError::SpecialFile {
                    path: child_rel,
                    kind: special_kind(&ft),
                });
            }
        }
    }

    files.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    let listing = canonical_listing(&files);
    let hex = hex(ring::digest::digest(&SHA256, listing.as_bytes()).as_ref());
    Ok(PackageDigest { hex, files })
}

fn check_name(name: &str, rel: &str) -> Result<(), DigestError> {
    let what = if name.contains('\n') {
        "a newline"
    } else if name.contains('\\') {
        "a backslash"
    } else if name.contains('\r') {
        "a carriage return"
    } else {
        return Ok(());
    };
    Err(DigestError::ForbiddenName {
        path: rel.to_string(),
        what,
    })
}

fn special_kind(ft: &fs::FileType) -> &'static str {
    if ft.is_block_device() {
        "block device"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// Hashes one regular file, making sure the file opened is the one `lstat` saw.
fn hash_file(abs: &Path, rel: &str, lstat: &fs::Metadata) -> Result<String, DigestError> {
    let read_err = |source| DigestError::Read {
        path: abs.to_path_buf(),
        source,
    };
    let mut file = File::open(abs).map_err(read_err)?;
    let fstat = file.metadata().map_err(read_err)?;
    if !fstat.is_file() || fstat.ino() != lstat.ino() || fstat.dev() != lstat.dev() {
        return Err(DigestError::Changed {
            path: rel.to_string(),
        });
    }
    let mut ctx = Context::new(&SHA256);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(read_err(e)),
        };
        ctx.update(&buf[..n]);
    }
    Ok(hex(ctx.finish().as_ref()))
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(dir: &Path, rel: &str, body: &[u8], mode: u32) {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, body).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn sha(bytes: &[u8]) -> String {
        hex(ring::digest::digest(&SHA256, bytes).as_ref())
    }

    #[test]
    fn canonical_listing_is_byte_exact() {
        let files = vec![
            FileEntry {
                path: "a".into(),
                mode: 0o644,
                sha256: "00".repeat(32),
            },
            FileEntry {
                path: "b/c".into(),
                mode: 0o4755,
                sha256: "ff".repeat(32),
            },
        ];
        let expected = format!(
            "skillbox-digest-v1\n644 {} a\n4755 {} b/c\n",
            "00".repeat(32),
            "ff".repeat(32)
        );
        assert_eq!(canonical_listing(&files), expected);
    }

    #[test]
    fn empty_package_digest_is_hash_of_version_line() {
        let dir = tempfile::tempdir().unwrap();
        let d = package_digest(dir.path()).unwrap();
        assert!(d.files.is_empty());
        assert_eq!(d.hex, sha(b"skillbox-digest-v1\n"));
    }

    #[test]
    fn digest_matches_the_documented_listing() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "SKILL.md", b"skill", 0o644);
        write(d.path(), "scripts/run.py", b"run", 0o755);
        let got = package_digest(d.path()).unwrap();
        let listing = format!(
            "skillbox-digest-v1\n644 {} SKILL.md\n755 {} scripts/run.py\n",
            sha(b"skill"),
            sha(b"run")
        );
        assert_eq!(got.hex, sha(listing.as_bytes()));
        assert_eq!(got.prefixed(), format!("sha256:{}", got.hex));
        assert_eq!(digest_hex(&got.prefixed()), got.hex);
    }

    #[test]
    fn digest_ignores_top_level_signature_only_and_sees_every_change() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "SKILL.md", b"skill", 0o644);
        write(d.path(), "scripts/run.py", b"run", 0o755);
        let base = package_digest(d.path()).unwrap().hex;
        write(d.path(), SIGNATURE_FILE, b"{}", 0o644);
        assert_eq!(package_digest(d.path()).unwrap().hex, base);
        write(d.path(), "scripts/run.py", b"ruN", 0o755);
        assert_ne!(package_digest(d.path()).unwrap().hex, base);
        write(d.path(), "scripts/run.py", b"run", 0o644);
        assert_ne!(package_digest(d.path()).unwrap().hex, base);
        write(d.path(), "scripts/run.py", b"run", 0o755);
        assert_eq!(package_digest(d.path()).unwrap().hex, base);
        write(d.path(), "scripts/SIGNATURE", b"{}", 0o644);
        assert_ne!(package_digest(d.path()).unwrap().hex, base);
    }

    #[test]
    fn digest_refuses_symlink() {
        let d = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("link")).unwrap();
        let err = package_digest(d.path()).unwrap_err();
        assert!(matches!(err, DigestError::Symlink { .. }), "{err}");
    }
}
