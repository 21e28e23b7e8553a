//! Root rotation and retirement: the operator's changes to the trust folder (revocation
//! is in `revoke.rs`).

use std::fs;
use std::path::Path;
use std::time::SystemTime;

use base64::Engine as _;

use super::{
    dn_entries, io_err, new_root, write_cert, write_key, Ca, IssueError, INTERMEDIATE_CERT,
    INTERMEDIATE_KEY, ROOT_CERT, ROOT_KEY,
};
use crate::cert;
use crate::fsutil::{create_dir, normalize_fingerprint, unix_seconds, write_atomic, PUBLIC_MODE};
use crate::rotation::{rotation_signed_bytes, RotationStatement};
use crate::signature::ALGORITHM;
use crate::trust::{
    RetiredList, Retirement, RootSource, TrustStore, RETIRED_FILE, ROOTS_DIR, ROTATIONS_DIR,
};

/// Makes a new root (same subject as the current one, new key) and a statement signed by
/// the current root's key accepting it, written to `trust_dir/rotations/<new fp>.json`.
/// In `ca_dir` the old root is kept as `root-<old fp>.pem/.key` and the new one becomes
/// `root.pem`/`root.key`; an intermediate of the old root is set aside as
/// `intermediate-<fp>.*` so new developer certificates chain to the new root.
///
/// Both roots verify until the old one is retired with [`retire_root`].
pub fn rotate_root(
    ca_dir: &Path,
    trust_dir: &Path,
    days: u32,
) -> Result<RotationStatement, IssueError> {
    super::check_days(days)?;
    let old = Ca::load(&ca_dir.join(ROOT_CERT), &ca_dir.join(ROOT_KEY))?;
    let old_fp = cert::fingerprint(&old.der);
    let old_parsed = cert::parse(&old.der).map_err(|reason| IssueError::ReadCa {
        path: ca_dir.join(ROOT_CERT),
        reason,
    })?;
    let name = dn_entries(&old_parsed).map_err(|reason| IssueError::ReadCa {
        path: ca_dir.join(ROOT_CERT),
        reason,
    })?;
    let (new_der, new_pem, new_key) = new_root(&name, days)?;
    let new_fp = cert::fingerprint(&new_der);

    let issued_at = unix_seconds(SystemTime::now());
    let signer = cert::p256_signer(&old.key_pem).map_err(|reason| IssueError::ReadCa {
        path: ca_dir.join(ROOT_KEY),
        reason,
    })?;
    let sig = cert::p256_sign(&signer, &rotation_signed_bytes(&old_fp, &new_fp, issued_at))
        .map_err(|_| IssueError::Sign)?;
    let statement = RotationStatement {
        old_root_fingerprint: old_fp.clone(),
        new_root_fingerprint: new_fp.clone(),
        new_root_pem: new_pem.clone(),
        issued_at,
        algorithm: ALGORITHM.to_string(),
        signature: base64::engine::general_purpose::STANDARD.encode(sig),
    };

    // 1. The statement, so the trust store accepts the new root.
    let rotations = trust_dir.join(ROTATIONS_DIR);
    create_dir(&rotations, 0o755).map_err(io_err(&rotations))?;
    let path = rotations.join(format!("{new_fp}.json"));
    let mut json = serde_json::to_vec_pretty(&statement).map_err(|e| IssueError::Io {
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    json.push(b'\n');
    write_atomic(&path, &json, PUBLIC_MODE).map_err(io_err(&path))?;

    // 2. Keep the old root under its fingerprint, then install the new one.
    archive_pair(ca_dir, ROOT_CERT, ROOT_KEY, "root", &old_fp)?;
    archive_intermediate(ca_dir)?;
    write_key(&ca_dir.join(ROOT_KEY), &new_key)?;
    write_cert(&ca_dir.join(ROOT_CERT), &new_pem)?;
    Ok(statement)
}

/// Retires the root `fingerprint`: packages that chain to it stop verifying
/// (`RetiredRoot`). Roots it vouched for through rotation statements are copied into
/// `roots/` first, since a retired root's statements no longer count; the retired root
/// itself is kept in `roots/` so refusals can name it. Refuses to retire the last
/// current root. Retiring twice is a no-op.
pub fn retire_root(trust_dir: &Path, fingerprint: &str) -> Result<(), IssueError> {
    let fp =
        normalize_fingerprint(fingerprint).ok_or_else(|| IssueError::InvalidCertOrFingerprint {
            input: fingerprint.to_string(),
        })?;
    let store = TrustStore::load(trust_dir)?;
    let roots = store.roots();
    let Some(target) = roots.iter().find(|r| r.fingerprint == fp) else {
        return Err(IssueError::UnknownRoot { fingerprint: fp });
    };
    if target.retired {
        return Ok(());
    }
    if !roots.iter().any(|r| !r.retired && r.fingerprint != fp) {
        return Err(IssueError::LastRoot { fingerprint: fp });
    }
    let roots_dir = trust_dir.join(ROOTS_DIR);
    create_dir(&roots_dir, 0o755).map_err(io_err(&roots_dir))?;
    for r in &roots {
        let promote = matches!(&r.source, RootSource::Rotated { from } if *from == fp);
        let keep = r.fingerprint == fp && r.source != RootSource::Configured;
        if promote || keep {
            if let Some(pem) = store.root_pem(&r.fingerprint) {
                write_cert(&roots_dir.join(format!("{}.pem", r.fingerprint)), &pem)?;
            }
        }
    }
    let path = trust_dir.join(RETIRED_FILE);
    let mut list: RetiredList = crate::trust::read_list(&path)?;
    list.retired.push(Retirement {
        fingerprint: fp,
        retired_at: unix_seconds(SystemTime::now()),
    });
    write_json(&path, &list)
}

/// Moves `ca_dir/intermediate.*` aside as `intermediate-<fp>.*`, if present.
pub(crate) fn archive_intermediate(ca_dir: &Path) -> Result<(), IssueError> {
    let cert_path = ca_dir.join(INTERMEDIATE_CERT);
    if !cert_path.exists() {
        return Ok(());
    }
    let pem = fs::read_to_string(&cert_path).map_err(io_err(&cert_path))?;
    let der = cert::single_pem_certificate(&pem).map_err(|reason| IssueError::ReadCa {
        path: cert_path.clone(),
        reason,
    })?;
    archive_pair(
        ca_dir,
        INTERMEDIATE_CERT,
        INTERMEDIATE_KEY,
        "intermediate",
        &cert::fingerprint(&der),
    )
}

/// Renames `cert`/`key` in `ca_dir` to `<stem>-<fp>.pem/.key` (refusing to overwrite).
fn archive_pair(
    ca_dir: &Path,
    cert_name: &str,
    key_name: &str,
    stem: &str,
    fp: &str,
) -> Result<(), IssueError> {
    for (from, ext) in [(key_name, "key"), (cert_name, "pem")] {
        let src = ca_dir.join(from);
        if !src.exists() {
            continue;
        }
        let dst = ca_dir.join(format!("{stem}-{fp}.{ext}"));
        if dst.exists() {
            return Err(IssueError::AlreadyExists { path: dst });
        }
        fs::rename(&src, &dst).map_err(io_err(&src))?;
    }
    Ok(())
}

pub(crate) fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), IssueError> {
    let mut json = serde_json::to_vec_pretty(value).map_err(|e| IssueError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    json.push(b'\n');
    write_atomic(path, &json, PUBLIC_MODE).map_err(io_err(path))
}
