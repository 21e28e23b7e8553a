//! Revocation: adding a certificate to `<trust>/revoked.json` by everything that names it
//! (fingerprint, issuer and serial, public key), so that a re-encoded copy of it, with
//! other bytes and so another fingerprint, is refused as well.

use std::fs;
use std::io::Read;
use std::path::Path;
use std::time::SystemTime;

use super::rotate::write_json;
use super::{io_err, IssueError};
use crate::cert;
use crate::digest::SIGNATURE_FILE;
use crate::fsutil::{normalize_fingerprint, unix_seconds};
use crate::signature::{PackageSignature, MAX_SIGNATURE_BYTES};
use crate::trust::{Revocation, RevocationList, TrustStore, REVOKED_FILE};

/// Folder depth searched below each place by [`find_certificate`].
const SEARCH_DEPTH: usize = 5;
/// Entries looked at, at most, by one [`find_certificate`].
const SEARCH_ENTRIES: usize = 20_000;

/// Revokes a certificate (leaf, intermediate or root) given as PEM text, the path of a PEM
/// file (its first certificate), or a SHA-256 fingerprint. Adds it to
/// `trust_dir/revoked.json` with its fingerprint, issuer and serial, and public key, and
/// returns the entry.
///
/// A fingerprint alone names only one encoding of the certificate: the certificate is
/// looked up among the trust store's roots and in `search` (folders or files: `*.pem`
/// and `SIGNATURE` files, a few levels deep) to record the rest. When it is not found the
/// entry holds the fingerprint only; [`Revocation::names_content`] says so.
///
/// Revoking twice keeps the first entry, completing it when it held only a fingerprint.
pub fn revoke(
    trust_dir: &Path,
    cert_pem_or_fingerprint: &str,
    reason: &str,
    search: &[&Path],
) -> Result<Revocation, IssueError> {
    let input = cert_pem_or_fingerprint;
    let invalid = || IssueError::InvalidCertOrFingerprint {
        input: input.chars().take(80).collect(),
    };
    let first_der = |text: &str| -> Result<Vec<u8>, IssueError> {
        let mut ders = cert::pem_certificates(text).map_err(|_| invalid())?;
        if ders.is_empty() {
            return Err(invalid());
        }
        Ok(ders.swap_remove(0))
    };
    if !trust_dir.is_dir() {
        return Err(IssueError::Trust(crate::trust::TrustError::NotFound {
            path: trust_dir.to_path_buf(),
        }));
    }
    let (fingerprint, der) = if input.contains("-----BEGIN") {
        let der = first_der(input)?;
        (cert::fingerprint(&der), Some(der))
    } else if let Some(fp) = normalize_fingerprint(input) {
        let der = find_in_store(trust_dir, &fp).or_else(|| find_certificate(&fp, search));
        (fp, der)
    } else if Path::new(input).is_file() {
        let text = fs::read_to_string(input).map_err(io_err(Path::new(input)))?;
        let der = first_der(&text)?;
        (cert::fingerprint(&der), Some(der))
    } else {
        return Err(invalid());
    };
    let parsed = match &der {
        Some(der) => Some(cert::parse(der).map_err(|_| invalid())?),
        None => None,
    };
    let id = match (&der, &parsed) {
        (Some(der), Some(p)) => Some(cert::identity(der, p)),
        _ => None,
    };

    let path = trust_dir.join(REVOKED_FILE);
    let mut list: RevocationList = crate::trust::read_list(&path)?;
    if let Some(existing) = list
        .revoked
        .iter_mut()
        .find(|r| normalize_fingerprint(&r.fingerprint).as_deref() == Some(fingerprint.as_str()))
    {
        if existing.names_content() {
            return Ok(existing.clone());
        }
        let Some(id) = id else {
            return Ok(existing.clone());
        };
        existing.issuer = Some(id.issuer);
        existing.serial = Some(id.serial);
        existing.spki_sha256 = Some(id.spki_sha256);
        if existing.subject.is_none() {
            existing.subject = parsed.as_ref().map(cert::subject);
        }
        let done = existing.clone();
        write_json(&path, &list)?;
        return Ok(done);
    }
    let reason: String = reason
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    let entry = Revocation {
        fingerprint,
        issuer: id.as_ref().map(|i| i.issuer.clone()),
        serial: id.as_ref().map(|i| i.serial.clone()),
        spki_sha256: id.as_ref().map(|i| i.spki_sha256.clone()),
        reason: if reason.is_empty() {
            "unspecified".to_string()
        } else {
            reason
        },
        revoked_at: unix_seconds(SystemTime::now()),
        subject: parsed.as_ref().map(cert::subject),
    };
    list.revoked.push(entry.clone());
    write_json(&path, &list)?;
    Ok(entry)
}

/// The DER of a root the trust store knows (configured or rotated) with this fingerprint.
fn find_in_store(trust_dir: &Path, fingerprint: &str) -> Option<Vec<u8>> {
    let store = TrustStore::load(trust_dir).ok()?;
    let pem = store.root_pem(fingerprint)?;
    cert::single_pem_certificate(&pem).ok()
}

/// Looks for the certificate whose DER has SHA-256 `fingerprint` in `places` (files, or
/// folders searched a few levels deep without following links): PEM files (`*.pem`) and
/// package `SIGNATURE` files. Returns its DER.
pub fn find_certificate(fingerprint: &str, places: &[&Path]) -> Option<Vec<u8>> {
    let fingerprint = normalize_fingerprint(fingerprint)?;
    let mut budget = SEARCH_ENTRIES;
    let mut pending: Vec<(std::path::PathBuf, usize)> =
        places.iter().map(|p| (p.to_path_buf(), 0)).collect();
    while let Some((path, depth)) = pending.pop() {
        if budget == 0 {
            return None;
        }
        budget -= 1;
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            if depth >= SEARCH_DEPTH {
                continue;
            }
            let Ok(entries) = fs::read_dir(&path) else {
                continue;
            };
            pending.extend(entries.flatten().map(|e| (e.path(), depth + 1)));
            continue;
        }
        if !meta.is_file() || meta.len() > MAX_SIGNATURE_BYTES {
            continue;
        }
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let pems = match name.as_deref() {
            Some(SIGNATURE_FILE) => read_small(&path)
                .and_then(|b| serde_json::from_slice::<PackageSignature>(&b).ok())
                .map(|s| s.chain.concat()),
            Some(n) if n.ends_with(".pem") => {
                read_small(&path).and_then(|b| String::from_utf8(b).ok())
            }
            _ => None,
        };
        let Some(pems) = pems else { continue };
        if let Ok(ders) = cert::pem_certificates(&pems) {
            if let Some(der) = ders
                .into_iter()
                .find(|d| cert::fingerprint(d) == fingerprint)
            {
                return Some(der);
            }
        }
    }
    None
}

/// The bytes of a file of at most [`MAX_SIGNATURE_BYTES`].
fn read_small(path: &Path) -> Option<Vec<u8>> {
    let file = fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_SIGNATURE_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() as u64 <= MAX_SIGNATURE_BYTES).then_some(bytes)
}
