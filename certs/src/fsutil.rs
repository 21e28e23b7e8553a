//! Small file and encoding helpers shared by the signing, issuing and trust code.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Mode of private key files.
pub(crate) const KEY_MODE: u32 = 0o600;
/// Mode of certificates, statements, lists and `SIGNATURE`.
pub(crate) const PUBLIC_MODE: u32 = 0o644;

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// SHA-256 of `bytes`, lower-case hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

/// True for exactly 64 lower-case hex digits (a SHA-256 in the form this crate writes).
pub(crate) fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Normalises a fingerprint typed by an operator: optional `sha256:` prefix, `:`
/// separators and upper case are accepted. `None` if it is not a SHA-256.
pub(crate) fn normalize_fingerprint(input: &str) -> Option<String> {
    let trimmed = input.trim();
    let body = trimmed.strip_prefix("sha256:").unwrap_or(trimmed);
    let fp: String = body
        .chars()
        .filter(|c| *c != ':')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    is_sha256_hex(&fp).then_some(fp)
}

/// Seconds since the Unix epoch (negative before it).
pub(crate) fn unix_seconds(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_secs()).map_or(i64::MIN, |s| -s),
    }
}

/// Creates `dir` (and parents) if missing; a directory this call creates gets `mode`.
pub(crate) fn create_dir(dir: &Path, mode: u32) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new().recursive(true).mode(mode).create(dir)
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder with `mode`
/// from the start, flushed to disk, then renamed over `path`. The core writes its own
/// state files (token, PKI) with it too.
///
/// # Errors
/// The file system's.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    synced_temp(path, bytes, mode)?
        .persist(path)
        .map_err(|e| e.error)?;
    Ok(())
}

/// Writes `bytes` to `path` (mode `mode`) only if `path` does not exist yet.
pub(crate) fn write_new(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    synced_temp(path, bytes, mode)?
        .persist_noclobber(path)
        .map_err(|e| e.error)?;
    Ok(())
}

/// A temporary file beside `path` holding `bytes` with `mode`, flushed to disk.
fn synced_temp(path: &Path, bytes: &[u8], mode: u32) -> io::Result<tempfile::NamedTempFile> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // tempfile creates the file 0600; widen (never narrow below 0600) before writing.
    let mut tmp = tempfile::Builder::new()
        .prefix(".skillbox-tmp-")
        .tempfile_in(parent)?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(mode))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    Ok(tmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_encodes_lower_case() {
        assert_eq!(hex(&[0x00, 0xab, 0xff]), "00abff");
    }

    #[test]
    fn normalize_fingerprint_accepts_operator_forms() {
        let fp = "ab".repeat(32);
        assert_eq!(normalize_fingerprint(&fp), Some(fp.clone()));
        assert_eq!(
            normalize_fingerprint(&format!("sha256:{}", fp.to_uppercase())),
            Some(fp.clone())
        );
        let colons = fp
            .as_bytes()
            .chunks(2)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect::<Vec<_>>()
            .join(":");
        assert_eq!(normalize_fingerprint(&colons), Some(fp));
        assert_eq!(normalize_fingerprint("abc"), None);
    }

    #[test]
    fn write_atomic_sets_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        write_atomic(&p, b"x", KEY_MODE).unwrap();
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(write_new(&p, b"y", KEY_MODE).is_err());
        assert_eq!(fs::read(&p).unwrap(), b"x");
    }
}
