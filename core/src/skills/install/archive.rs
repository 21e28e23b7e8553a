//! Extracts a `.tar.gz` package into a staging folder in one pass over the stream.
//!
//! The tar reader runs in raw mode: this module handles the extension headers itself, each
//! with a small cap (GNU long names, PAX local and global headers), so no header can make it
//! buffer more than 64 KiB. Only regular files and folders are written, through
//! [`Sink`], which enforces the path, mode, duplicate, count, size and ratio rules. Links,
//! devices, FIFOs and GNU sparse entries are refused.

use std::cell::Cell;
use std::io::Read;
use std::path::Path;
use std::rc::Rc;

use flate2::read::GzDecoder;
use tar::{EntryType, PaxExtensions};

use super::sink::{check_mode, normalize, ExtractError, Limits, Sink, MAX_PATH_BYTES};

/// Largest PAX header (local or global) read.
pub const MAX_PAX_BYTES: u64 = 64 * 1024;

/// Counts the bytes read from the compressed file.
#[derive(Debug)]
struct Counting<R> {
    inner: R,
    count: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

/// Name and size from the extension headers in front of an entry.
#[derive(Debug, Default)]
struct Pending {
    long_name: Option<Vec<u8>>,
    pax_path: Option<Vec<u8>>,
    pax_size: Option<u64>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.long_name.is_none() && self.pax_path.is_none() && self.pax_size.is_none()
    }

    /// Reads `entry` when it is an extension header (of `kind`, `header_size` bytes: a GNU
    /// long name or a PAX header for the next entry, a PAX global header skipped); whether
    /// it was one. Two of a kind for one entry, or one over its size limit, is refused.
    fn read_extension(
        &mut self,
        kind: EntryType,
        entry: &mut impl Read,
        header_size: u64,
    ) -> Result<bool, ExtractError> {
        match kind {
            EntryType::GNULongName => {
                if header_size > MAX_PATH_BYTES as u64 + 1 {
                    return Err(ExtractError::Path {
                        name: "(GNU long name)".into(),
                        reason: "path longer than 1024 bytes",
                    });
                }
                let mut name = read_small(entry, header_size)?;
                while name.last() == Some(&0) {
                    name.pop();
                }
                if self.long_name.replace(name).is_some() {
                    return Err(malformed("two GNU long names for one entry"));
                }
                Ok(true)
            }
            EntryType::XHeader => {
                if header_size > MAX_PAX_BYTES {
                    return Err(malformed("a PAX header over 64 KiB"));
                }
                let data = read_small(entry, header_size)?;
                if self.pax_path.is_some() || self.pax_size.is_some() {
                    return Err(malformed("two PAX headers for one entry"));
                }
                for ext in PaxExtensions::new(&data) {
                    let ext = ext.map_err(|e| malformed(format!("PAX header: {e}")))?;
                    match ext.key_bytes() {
                        b"path" => self.pax_path = Some(ext.value_bytes().to_vec()),
                        b"size" => {
                            let size = std::str::from_utf8(ext.value_bytes())
                                .ok()
                                .and_then(|s| s.parse::<u64>().ok())
                                .ok_or_else(|| malformed("PAX size is not a number"))?;
                            self.pax_size = Some(size);
                        }
                        _ => {}
                    }
                }
                Ok(true)
            }
            EntryType::XGlobalHeader => {
                if header_size > MAX_PAX_BYTES {
                    return Err(malformed("a PAX global header over 64 KiB"));
                }
                read_small(entry, header_size)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

fn malformed(reason: impl std::fmt::Display) -> ExtractError {
    ExtractError::Malformed {
        reason: reason.to_string(),
    }
}

/// Extracts the `.tar.gz` at `src` into `dest` (an existing, private, empty folder).
pub fn extract(src: &Path, dest: &Path, limits: Limits) -> Result<(), ExtractError> {
    let file = std::fs::File::open(src).map_err(|source| ExtractError::Io {
        path: src.to_path_buf(),
        source,
    })?;
    extract_from(file, dest, limits)
}

/// Extracts a `.tar.gz` stream into `dest`, reading it once from the start.
pub fn extract_from(src: impl Read, dest: &Path, limits: Limits) -> Result<(), ExtractError> {
    let count = Rc::new(Cell::new(0u64));
    let gz = GzDecoder::new(Counting {
        inner: src,
        count: Rc::clone(&count),
    });
    let mut archive = tar::Archive::new(gz);
    let mut sink = Sink::new(dest, limits);
    let mut pending = Pending::default();
    let entries = archive.entries().map_err(malformed)?.raw(true);
    for entry in entries {
        let mut entry = entry.map_err(malformed)?;
        sink.count_entry()?;
        let kind = entry.header().entry_type();
        let header_size = entry.header().entry_size().map_err(malformed)?;
        if pending.read_extension(kind, &mut entry, header_size)? {
            continue;
        }
        let raw_name = pending
            .long_name
            .take()
            .or_else(|| pending.pax_path.take())
            .unwrap_or_else(|| entry.path_bytes().into_owned());
        let pax_size = pending.pax_size.take();
        let lossy = String::from_utf8_lossy(&raw_name).into_owned();
        match kind {
            EntryType::Regular | EntryType::Continuous => {
                let name = normalize(&raw_name)?.ok_or_else(|| ExtractError::Path {
                    name: lossy.clone(),
                    reason: "a file cannot be the package folder itself",
                })?;
                let mode = check_mode(&name, entry.header().mode().map_err(malformed)?)?;
                let declared = pax_size.unwrap_or(header_size);
                if declared > header_size {
                    // Only the header's size is read; a larger PAX size would be a lie
                    // or a file over 8 GiB, refused either way.
                    return Err(ExtractError::EntrySize {
                        name,
                        limit: limits.max_entry_bytes,
                    });
                }
                if declared != header_size {
                    return Err(malformed(format!(
                        "entry {name:?}: PAX size {declared} differs from the header's {header_size}"
                    )));
                }
                let c = Rc::clone(&count);
                sink.file(&name, mode, declared, &mut entry, &move || Some(c.get()))?;
            }
            EntryType::Directory => {
                let name = normalize(&raw_name)?;
                check_mode(&lossy, entry.header().mode().map_err(malformed)?)?;
                if header_size != 0 {
                    return Err(malformed(format!("folder {lossy:?} carries data")));
                }
                if let Some(name) = name {
                    sink.dir(&name)?;
                }
            }
            other => {
                return Err(refusal(
                    other,
                    entry.header(),
                    lossy,
                    limits.max_entry_bytes,
                )?)
            }
        }
    }
    if !pending.is_empty() {
        return Err(malformed("an extension header with no entry after it"));
    }
    Ok(())
}

fn read_small(entry: &mut impl Read, size: u64) -> Result<Vec<u8>, ExtractError> {
    let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    entry.take(size).read_to_end(&mut data).map_err(malformed)?;
    if data.len() as u64 != size {
        return Err(malformed("truncated extension header"));
    }
    Ok(data)
}

/// Why an entry of `kind` (its `header`, named `name`) is refused: links, devices, FIFOs,
/// GNU sparse files (too large first, when they would expand past `max_entry_bytes`) and
/// any other type than a regular file or a folder.
fn refusal(
    kind: EntryType,
    header: &tar::Header,
    name: String,
    max_entry_bytes: u64,
) -> Result<ExtractError, ExtractError> {
    Ok(match kind {
        EntryType::Symlink => ExtractError::Symlink { name },
        EntryType::Link => ExtractError::Hardlink { name },
        EntryType::GNULongLink => ExtractError::Symlink {
            name: "(GNU long link name)".into(),
        },
        EntryType::Char | EntryType::Block => ExtractError::EntryType {
            name,
            kind: "device".into(),
        },
        EntryType::Fifo => ExtractError::EntryType {
            name,
            kind: "FIFO".into(),
        },
        EntryType::GNUSparse => {
            // The size the file would expand to; refused as too large before any byte
            // is written, and refused as sparse otherwise.
            let real = header
                .as_gnu()
                .map(|g| g.real_size())
                .transpose()
                .map_err(malformed)?
                .unwrap_or(0);
            if real > max_entry_bytes {
                return Ok(ExtractError::EntrySize {
                    name,
                    limit: max_entry_bytes,
                });
            }
            ExtractError::EntryType {
                name,
                kind: "GNU sparse file (pack it as a regular file)".into(),
            }
        }
        other => ExtractError::EntryType {
            name,
            kind: format!("tar entry of type {:?}", other.as_byte() as char),
        },
    })
}
