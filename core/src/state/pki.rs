//! The internal PKI of the core ↔ executor channel, separate from code-signing trust: a
//! CA and one certificate for each side (`skillbox-core`, `skillbox-executor`), made with
//! rcgen on first start in `<state>/pki/`. Keys are 0600; certificates 0644.
//!
//! On an orchestrator whose services run on several nodes (Swarm, Kubernetes) no folder is
//! shared: the operator makes the set once with `skillbox certs channel --out DIR`
//! ([`write_channel_set`]), stores the files as secrets, and points the core at them with
//! `[executor] pki_dir` ([`configured_core_files`]); the core then never writes a PKI.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use skillbox_channel::{TlsFiles, CORE_IDENTITY, EXECUTOR_IDENTITY};

/// The channel PKI folder (in the state folder).
pub const PKI_DIR: &str = "pki";

/// Validity of the internal certificates.
pub const VALIDITY_DAYS: i64 = 825;

/// Why the PKI could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// Certificate generation failed.
    #[error("generating the internal certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// `certs channel --out DIR` would overwrite a channel PKI file.
    #[error(
        "{path} exists; `skillbox certs channel` never overwrites a channel PKI (the running \
         core and executors trust it): choose an empty folder, or remove the five files first"
    )]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// `[executor] pki_dir` lacks one of the core's files.
    #[error(
        "{path} is missing: [executor] pki_dir must hold ca.pem, skillbox-core.pem and \
         skillbox-core.key (make them with `skillbox certs channel --out DIR`)"
    )]
    Missing {
        /// The file.
        path: PathBuf,
    },
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
    state.join(PKI_DIR)
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
    generate(&dir)?;
    Ok(true)
}

/// The five files of a channel PKI in `dir`: `ca.pem`, then certificate and key of each
/// side.
pub fn channel_set(dir: &Path) -> [PathBuf; 5] {
    let core = TlsFiles::in_dir(dir, CORE_IDENTITY);
    let exec = TlsFiles::in_dir(dir, EXECUTOR_IDENTITY);
    [core.ca, core.cert, core.key, exec.cert, exec.key]
}

/// `skillbox certs channel --out DIR`: a fresh CA and both certificates in `dir` (made
/// 0700 when new), for an orchestrator's secrets. Refuses when any of the five files
/// exists: replacing a live PKI cuts every executor off. Returns the files written.
pub fn write_channel_set(dir: &Path) -> Result<[PathBuf; 5], PkiError> {
    let files = channel_set(dir);
    if let Some(path) = files.iter().find(|p| p.exists()) {
        return Err(PkiError::Exists { path: path.clone() });
    }
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(|source| PkiError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
    generate(dir)?;
    Ok(files)
}

/// The core's TLS files from `[executor] pki_dir` when it is set (each must exist), else
/// from `<state>/pki`, made there when missing ([`ensure`]).
pub fn configured_core_files(state: &Path, pki_dir_key: &str) -> Result<TlsFiles, PkiError> {
    if pki_dir_key.is_empty() {
        ensure(state)?;
        return Ok(core_files(state));
    }
    let files = TlsFiles::in_dir(Path::new(pki_dir_key), CORE_IDENTITY);
    for path in [&files.ca, &files.cert, &files.key] {
        if !path.exists() {
            return Err(PkiError::Missing { path: path.clone() });
        }
    }
    Ok(files)
}

/// Makes the CA and both certificates in `dir` (which exists).
fn generate(dir: &Path) -> Result<(), PkiError> {
    let core = TlsFiles::in_dir(dir, CORE_IDENTITY);
    let exec = TlsFiles::in_dir(dir, EXECUTOR_IDENTITY);
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
    Ok(())
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
    fn certs_channel_writes_the_five_files_a_core_and_an_executor_need() {
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("channel");
        let files = write_channel_set(&dir).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "ca.pem",
                "skillbox-core.key",
                "skillbox-core.pem",
                "skillbox-executor.key",
                "skillbox-executor.pem"
            ]
        );
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        assert_eq!(std::fs::metadata(&files[2]).unwrap().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(&files[4]).unwrap().mode() & 0o777, 0o600);
        // The core reads them from there, and both sides' TLS configurations load.
        let core = configured_core_files(out.path(), dir.to_str().unwrap()).unwrap();
        skillbox_channel::tls::client_config(&core).unwrap();
        let exec = TlsFiles::in_dir(&dir, EXECUTOR_IDENTITY);
        skillbox_channel::tls::client_config(&exec).unwrap();
        // ...and the state folder got no PKI of its own.
        assert!(!pki_dir(out.path()).exists());
    }

    #[test]
    fn certs_channel_refuses_to_overwrite_a_live_pki() {
        let out = tempfile::tempdir().unwrap();
        write_channel_set(out.path()).unwrap();
        let before = std::fs::read(out.path().join("ca.pem")).unwrap();
        let err = write_channel_set(out.path()).unwrap_err();
        assert!(matches!(err, PkiError::Exists { .. }), "{err}");
        assert!(err.to_string().contains("never overwrites"), "{err}");
        assert_eq!(std::fs::read(out.path().join("ca.pem")).unwrap(), before);
        // One file of a set is enough to refuse.
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("skillbox-executor.key"), "old").unwrap();
        assert!(matches!(
            write_channel_set(other.path()),
            Err(PkiError::Exists { .. })
        ));
        assert!(!other.path().join("ca.pem").exists());
    }

    #[test]
    fn pki_dir_missing_the_core_key_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        write_channel_set(dir.path()).unwrap();
        std::fs::remove_file(dir.path().join("skillbox-core.key")).unwrap();
        let state = tempfile::tempdir().unwrap();
        let err = configured_core_files(state.path(), dir.path().to_str().unwrap()).unwrap_err();
        assert!(matches!(err, PkiError::Missing { .. }), "{err}");
        assert!(
            err.to_string().contains("skillbox certs channel --out DIR"),
            "{err}"
        );
        assert!(
            !pki_dir(state.path()).exists(),
            "nothing made in the state instead"
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
