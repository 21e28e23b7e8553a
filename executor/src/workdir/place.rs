//! Writing a context's files into a call's work folder, on the blocking threads: each
//! file made new (never through a link), its bytes copied from the open cache entry of
//! its content (`copy_file_range` where the kernel can) unless the fetch wrote them as
//! they came ([`Started`]), its mode and owner set, its size checked, its stamp taken for
//! the sync after the call. Files of the same content are copied from one entry, so it
//! is fetched once.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use super::{Known, Stamp, WorkDirError};

/// One file to write: where it goes and what the context holds it as.
#[derive(Debug)]
pub(super) struct ToPlace {
    /// Its path in the context (for the record and errors).
    pub(super) path: String,
    /// Where it is written.
    pub(super) target: PathBuf,
    /// Its size, which the copy must reach.
    pub(super) size: u64,
    /// Its SHA-256, as the list says.
    pub(super) sha256: String,
    /// Whether the context holds it executable.
    pub(super) executable: bool,
}

/// A file of the call's folder made before its content was fetched, so that the fetch
/// could write into it as the bytes came.
pub(super) struct Started {
    /// What it is.
    pub(super) place: ToPlace,
    /// The file, open for writing.
    pub(super) out: File,
    /// Whether the fetch wrote it whole (else it is empty and is copied like the others).
    pub(super) written: bool,
}

/// Makes `place`'s file new and empty (0644, never through a link).
pub(super) fn create(place: &ToPlace) -> Result<File, WorkDirError> {
    open_new(place).map_err(|source| WorkDirError::Write {
        path: place.path.clone(),
        source,
    })
}

fn open_new(place: &ToPlace) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&place.target)
}

/// Writes `first` (when the fetch made it) and every file of `places`, all of one
/// content, from `source`, owned by `uid` when given; returns each one's record for the
/// baseline. Stops at the first failure.
pub(super) fn place_all(
    mut source: File,
    first: Option<Started>,
    places: Vec<ToPlace>,
    uid: Option<u32>,
) -> Result<Vec<(String, Known)>, WorkDirError> {
    let mut placed = Vec::with_capacity(places.len() + 1);
    let started = first.map(|s| (s.place, Some((s.out, s.written))));
    let rest = places.into_iter().map(|p| (p, None));
    for (place, out) in started.into_iter().chain(rest) {
        let known = place_one(&mut source, &place, out, uid).map_err(|e| match e {
            Placing::Io(source) => WorkDirError::Write {
                path: place.path.clone(),
                source,
            },
            Placing::Short => WorkDirError::Mismatch {
                path: place.path.clone(),
                what: "size",
            },
        })?;
        placed.push((place.path, known));
    }
    Ok(placed)
}

/// Why one file could not be written.
enum Placing {
    Io(std::io::Error),
    /// The source held another number of bytes than the list says.
    Short,
}

impl From<std::io::Error> for Placing {
    fn from(e: std::io::Error) -> Self {
        Placing::Io(e)
    }
}

/// Writes one file: into `out` when it was made already (and not at all when the fetch
/// wrote it whole), else into a new one; then its mode, owner and stamp.
fn place_one(
    source: &mut File,
    place: &ToPlace,
    out: Option<(File, bool)>,
    uid: Option<u32>,
) -> Result<Known, Placing> {
    let (mut out, written) = match out {
        Some((out, written)) => (out, written),
        None => (open_new(place)?, false),
    };
    if !written {
        source.seek(SeekFrom::Start(0))?;
        let copied = std::io::copy(source, &mut out)?;
        if copied != place.size {
            return Err(Placing::Short);
        }
    }
    let mode = if place.executable { 0o755 } else { 0o644 };
    out.set_permissions(std::fs::Permissions::from_mode(mode))?;
    if let Some(uid) = uid {
        std::os::unix::fs::fchown(&out, Some(uid), Some(uid))?;
    }
    let st = nix::sys::stat::fstat(&out).map_err(std::io::Error::from)?;
    if u64::try_from(st.st_size).ok() != Some(place.size) {
        return Err(Placing::Short);
    }
    Ok(Known {
        stamp: Stamp::of(&st),
        sha256: place.sha256.clone(),
        executable: place.executable,
    })
}
