//! `skillbox skill pack`: a deterministic `.tar.gz` of a skill folder. The same folder
//! always gives the same bytes: entries sorted by path, mtime 0, uid/gid 0, no user or group
//! names, modes kept, gzip header without a name or time. Entries sit at the top of the
//! archive (`SKILL.md`, `scripts/`, …), `SIGNATURE` included when the folder is signed.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::{Compression, GzBuilder};
use tar::{EntryType, Header};

use super::sink::{MAX_ENTRIES, MAX_ENTRY_BYTES};

/// Why a folder could not be packed.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// The folder or a file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Something install would refuse (a link, a device, special mode bits, a bad name).
    #[error("{path}: {reason}; install would refuse it")]
    Refused {
        /// The path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The archive would land inside the folder it packs.
    #[error("the output {out} is inside {dir}; write it elsewhere with --out FILE")]
    OutputInside {
        /// The output.
        out: PathBuf,
        /// The folder.
        dir: PathBuf,
    },
    /// The archive could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The output.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// What was packed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    /// The archive written.
    pub out: PathBuf,
    /// Files and folders in it.
    pub entries: usize,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Packs `dir` into the `.tar.gz` `out` (written through a temporary file and a rename).
pub fn pack(dir: &Path, out: &Path) -> Result<Packed, PackError> {
    let read = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PackError::Read { path, source }
    };
    let dir = dir.canonicalize().map_err(read(dir))?;
    let out_parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let out_parent = out_parent.canonicalize().map_err(read(out_parent))?;
    if out_parent.starts_with(&dir) {
        return Err(PackError::OutputInside {
            out: out.to_path_buf(),
            dir,
        });
    }
    let mut entries = Vec::new();
    list(&dir, "", &mut entries)?;
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));

    let file_name = out.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = out_parent.join(format!(
        ".{}.tmp.{}",
        file_name.unwrap_or_default(),
        std::process::id()
    ));
    let write_err = |source| PackError::Write {
        path: out.to_path_buf(),
        source,
    };
    let result = write_archive(&dir, &entries, &tmp).map_err(write_err);
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, out).map_err(write_err)?;
    let bytes = std::fs::metadata(out).map_err(write_err)?.len();
    Ok(Packed {
        out: out.to_path_buf(),
        entries: entries.len(),
        bytes,
    })
}

/// `(path, is_dir, mode)` of every entry below `dir`.
type Listed = (String, bool, u32);

fn list(dir: &Path, rel: &str, out: &mut Vec<Listed>) -> Result<(), PackError> {
    let here = dir.join(rel);
    let rd = std::fs::read_dir(&here).map_err(|source| PackError::Read {
        path: here.clone(),
        source,
    })?;
    for entry in rd {
        let entry = entry.map_err(|source| PackError::Read {
            path: here.clone(),
            source,
        })?;
        let path = entry.path();
        let refuse = |reason: &str| PackError::Refused {
            path: path.clone(),
            reason: reason.to_string(),
        };
        let name = entry
            .file_name()
            .into_string()
            .map_err(|_| refuse("the name is not UTF-8"))?;
        if name.contains(['\\', '\n', '\r']) {
            return Err(refuse("the name holds a backslash or a line break"));
        }
        let child = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let meta = std::fs::symlink_metadata(&path).map_err(|source| PackError::Read {
            path: path.clone(),
            source,
        })?;
        let mode = meta.permissions().mode();
        if mode & 0o7000 != 0 {
            return Err(refuse("setuid, setgid or sticky bit"));
        }
        if meta.is_dir() {
            out.push((child.clone(), true, mode & 0o777));
            list(dir, &child, out)?;
        } else if meta.is_file() {
            if meta.len() > MAX_ENTRY_BYTES {
                return Err(refuse("larger than 100 MiB"));
            }
            out.push((child, false, mode & 0o777));
        } else if meta.file_type().is_symlink() {
            return Err(refuse("a symlink"));
        } else {
            return Err(refuse("not a regular file or folder"));
        }
        if out.len() > MAX_ENTRIES {
            return Err(refuse("more than 10000 entries in the package"));
        }
    }
    Ok(())
}

fn write_archive(dir: &Path, entries: &[Listed], tmp: &Path) -> std::io::Result<()> {
    let file = File::create(tmp)?;
    let gz: GzEncoder<BufWriter<File>> = GzBuilder::new()
        .mtime(0)
        .write(BufWriter::new(file), Compression::default());
    let mut builder = tar::Builder::new(gz);
    for (path, is_dir, mode) in entries {
        let mut header = Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mode(*mode);
        if *is_dir {
            header.set_entry_type(EntryType::Directory);
            header.set_size(0);
            builder.append_data(&mut header, format!("{path}/"), std::io::empty())?;
        } else {
            let full = dir.join(path);
            let mut f = File::open(&full)?;
            let meta = f.metadata()?;
            if !meta.is_file() || meta.mode() & 0o7000 != 0 {
                return Err(std::io::Error::other(format!(
                    "{} changed while it was packed",
                    full.display()
                )));
            }
            header.set_entry_type(EntryType::Regular);
            header.set_size(meta.len());
            builder.append_data(&mut header, path, (&mut f).take(meta.len()))?;
        }
    }
    let gz = builder.into_inner()?;
    let mut buf = gz.finish()?;
    buf.flush()?;
    buf.into_inner().map_err(|e| e.into_error())?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_is_deterministic_and_keeps_modes() {
        let d = tempfile::tempdir().unwrap();
        let skill = d.path().join("s");
        std::fs::create_dir_all(skill.join("scripts")).unwrap();
        std::fs::write(skill.join("SKILL.md"), b"---\nname: s\n---\n").unwrap();
        std::fs::write(skill.join("scripts/run.sh"), b"echo hi\n").unwrap();
        std::fs::set_permissions(
            skill.join("scripts/run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let a = pack(&skill, &d.path().join("a.tar.gz")).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(1100));
        std::fs::write(skill.join("SKILL.md"), b"---\nname: s\n---\n").unwrap();
        pack(&skill, &d.path().join("b.tar.gz")).unwrap();
        assert_eq!(a.entries, 3);
        let bytes_a = std::fs::read(d.path().join("a.tar.gz")).unwrap();
        assert_eq!(bytes_a, std::fs::read(d.path().join("b.tar.gz")).unwrap());
        let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(&bytes_a[..]));
        let listed: Vec<(String, u32, u64)> = ar
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                (
                    String::from_utf8(e.path_bytes().into_owned()).unwrap(),
                    h.mode().unwrap(),
                    h.mtime().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            listed.iter().map(|l| l.0.as_str()).collect::<Vec<_>>(),
            ["SKILL.md", "scripts/", "scripts/run.sh"]
        );
        assert_eq!(listed[2].1 & 0o777, 0o755);
        assert!(listed.iter().all(|l| l.2 == 0));
    }

    #[test]
    fn pack_refuses_symlink_and_output_inside() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("SKILL.md"), b"x").unwrap();
        let err = pack(d.path(), &d.path().join("x.tar.gz")).unwrap_err();
        assert!(matches!(err, PackError::OutputInside { .. }), "{err}");
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("l")).unwrap();
        let out = tempfile::tempdir().unwrap();
        let err = pack(d.path(), &out.path().join("x.tar.gz")).unwrap_err();
        assert!(matches!(err, PackError::Refused { .. }), "{err}");
    }
}
