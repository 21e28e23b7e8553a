//! The internal PKI of the core ↔ executor channel, separate from code-signing trust: a
//! CA and one certificate for each side (`skillbox-core`, `skillbox-executor`), made with
//! rcgen on first start in `<state>/pki/`. Keys are 0600; certificates 0644.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use skillbox_channel::{TlsFiles, CORE_IDENTITY, EXECUTOR_IDENTITY};

/// Validity of the internal certificates.
pub const VALIDITY_DAYS: i64 = 825;

/// Why the PKI could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// Certificate generation failed.
    #[error("generating the internal certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// A file could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// The PKI folder of a state dir.
pub fn pki_dir(state: &Path) -> PathBuf {
    state.join(crate::state::workspace::PKI_DIR)
}

/// The core's TLS files.
pub fn core_files(state: &Path) -> TlsFiles {
    TlsFiles::in_dir(&pki_dir(state), CORE_IDENTITY)
}

/// Creates the CA and both certificates unless they all exist. Returns whether it made
/// new ones.
pub fn ensure(state: &Path) -> Result<bool, PkiError> {
    let dir = pki_dir(state);
    let core = TlsFiles::in_dir(&dir, CORE_IDENTITY);
    let exec = TlsFiles::in_dir(&dir, EXECUTOR_IDENTITY);
    let all = [&core.ca, &core.cert, &core.key, &exec.cert, &exec.key];
    if all.iter().all(|p| p.exists()) {
        return Ok(false);
    }
    std::fs::create_dir_all(&dir).map_err(|source| PkiError::Write {
        path: dir.clone(),
        source,
    })?;
    let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params.distinguished_name = name("skillbox internal channel CA");
    set_validity(&mut ca_params);
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);
    for (identity, files) in [(CORE_IDENTITY, &core), (EXECUTOR_IDENTITY, &exec)] {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![identity.to_string()])?;
        params.distinguished_name = name(identity);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        set_validity(&mut params);
        let cert = params.signed_by(&key, &issuer)?;
        write_atomic(&files.key, key.serialize_pem().as_bytes(), 0o600)?;
        write_atomic(&files.cert, cert.pem().as_bytes(), 0o644)?;
    }
    write_atomic(&core.ca, ca_cert.pem().as_bytes(), 0o644)?;
    tracing::info!(dir = %dir.display(), "internal channel PKI created");
    Ok(true)
}

/// Copies what an executor in another container needs (the CA certificate, its own
/// certificate and key) into `dir`, a volume that executor mounts read-only: it gets
/// neither the core's key nor anything else of the state. Files that are already equal
/// are left alone; the CA certificate is written last, so an executor waiting for all
/// three never reads a half-made set.
pub fn export_executor(state: &Path, dir: &Path) -> Result<(), PkiError> {
    let from = TlsFiles::in_dir(&pki_dir(state), EXECUTOR_IDENTITY);
    let to = TlsFiles::in_dir(dir, EXECUTOR_IDENTITY);
    for (src, dst, mode) in [
        (&from.key, &to.key, 0o600),
        (&from.cert, &to.cert, 0o644),
        (&from.ca, &to.ca, 0o644),
    ] {
        let bytes = std::fs::read(src).map_err(|source| PkiError::Write {
            path: src.clone(),
            source,
        })?;
        if std::fs::read(dst).ok().as_deref() != Some(bytes.as_slice()) {
            write_atomic(dst, &bytes, mode)?;
        }
    }
    Ok(())
}

fn name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

fn set_validity(params: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(VALIDITY_DAYS);
}

/// Writes `bytes` to `path` through a synced temporary file and a rename, with `mode`
/// ([`skillbox_certs::write_atomic`]).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), PkiError> {
    skillbox_certs::write_atomic(path, bytes, mode).map_err(|source| PkiError::Write {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn export_executor_copies_only_the_executor_side() {
        let state = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        ensure(state.path()).unwrap();
        export_executor(state.path(), out.path()).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(out.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["ca.pem", "skillbox-executor.key", "skillbox-executor.pem"]
        );
        let exec = TlsFiles::in_dir(out.path(), EXECUTOR_IDENTITY);
        assert_eq!(std::fs::metadata(&exec.key).unwrap().mode() & 0o777, 0o600);
        // A second export of the same files changes nothing.
        let before = std::fs::metadata(&exec.key).unwrap().modified().unwrap();
        export_executor(state.path(), out.path()).unwrap();
        assert_eq!(
            std::fs::metadata(&exec.key).unwrap().modified().unwrap(),
            before
        );
    }

    #[test]
    fn ensure_creates_keys_0600_once() {
        let dir = tempfile::tempdir().unwrap();
        assert!(ensure(dir.path()).unwrap());
        let core = core_files(dir.path());
        assert_eq!(std::fs::metadata(&core.key).unwrap().mode() & 0o777, 0o600);
        let before = std::fs::read(&core.cert).unwrap();
        assert!(!ensure(dir.path()).unwrap());
        assert_eq!(std::fs::read(&core.cert).unwrap(), before);
        let names = skillbox_channel::tls::dns_names(
            &skillbox_channel::tls::load_certs(&core.cert).unwrap()[0],
        );
        assert_eq!(names, vec![CORE_IDENTITY.to_string()]);
    }
}
