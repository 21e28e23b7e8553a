//! The certificates the core trusts for servers it reaches for skills (the fetch
//! capability and the egress proxy): the webpki (Mozilla) roots, plus `[egress]
//! extra_roots` for test servers and private APIs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

/// Why `[egress] extra_roots` could not be read.
#[derive(Debug, thiserror::Error)]
#[error("[egress] extra_roots: {path}: {reason}; give PEM files of CA certificates")]
pub struct RootsError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

/// Extra roots: the certificates, and the PEM text they came from (for the sandbox's
/// bundle).
#[derive(Debug, Clone, Default)]
pub struct ExtraRoots {
    /// Parsed certificates.
    pub certs: Vec<CertificateDer<'static>>,
    /// Their PEM, concatenated.
    pub pem: String,
}

impl ExtraRoots {
    /// Reads each PEM file (each must hold at least one certificate).
    pub fn read(paths: &[PathBuf]) -> Result<Self, RootsError> {
        let mut out = Self::default();
        for path in paths {
            let fail = |reason: String| RootsError {
                path: path.clone(),
                reason,
            };
            let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
            let certs = CertificateDer::pem_slice_iter(text.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| fail(format!("not PEM: {e}")))?;
            if certs.is_empty() {
                return Err(fail("no CERTIFICATE block".into()));
            }
            out.certs.extend(certs);
            out.pem.push_str(text.trim_end());
            out.pem.push('\n');
        }
        Ok(out)
    }

    /// The rustls client configuration trusting the webpki roots and these.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, String> {
        let mut roots =
            rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for cert in &self.certs {
            roots.add(cert.clone()).map_err(|e| e.to_string())?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Ok(rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth())
    }
}

/// `path` relative to `base` unless absolute.
pub fn resolve_path(base: &Path, path: &Path) -> PathBuf {
    match path.is_absolute() {
        true => path.to_path_buf(),
        false => base.join(path),
    }
}
