//! rustls configurations of the channel: TLS 1.3 only, no session resumption, client
//! certificates required and verified against the internal CA, peer identity checked.

use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

use rustls::client::Resumption;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{NoServerSessionStorage, WebPkiClientVerifier};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use super::TlsFiles;

/// Why TLS material could not be loaded or used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A PEM file held no certificate or key.
    #[error("{path} holds no {what} (expected PEM)")]
    Empty {
        /// The file.
        path: std::path::PathBuf,
        /// Certificate or key.
        what: &'static str,
    },
    /// rustls refused the material.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client verifier could not be built.
    #[error("client certificate verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Certificates of a PEM file.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path)?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut BufReader::new(bytes.as_slice()))
        .collect::<Result<_, _>>()
        .map_err(|source| TlsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::Empty {
            path: path.to_path_buf(),
            what: "certificate",
        });
    }
    Ok(certs)
}

/// The private key of a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(path)?;
    rustls_pemfile::private_key(&mut BufReader::new(bytes.as_slice()))
        .map_err(|source| TlsError::Read {
            path: path.to_path_buf(),
            source,
        })?
        .ok_or(TlsError::Empty {
            path: path.to_path_buf(),
            what: "private key",
        })
}

fn roots(ca: &Path) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    for cert in load_certs(ca)? {
        store.add(cert)?;
    }
    Ok(store)
}

/// Server side: requires a client certificate chaining to the internal CA. The peer's
/// identity is checked after the handshake ([`super::server`]).
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots(&files.ca)?), provider())
            .build()?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(verifier)
        .with_single_cert(load_certs(&files.cert)?, load_key(&files.key)?)?;
    config.session_storage = Arc::new(NoServerSessionStorage {});
    config.send_tls13_tickets = 0;
    Ok(Arc::new(config))
}

/// Client side: presents this side's certificate, trusts only the internal CA, no
/// resumption. The server's identity is checked as its certificate name.
pub fn client_config(files: &TlsFiles) -> Result<ClientConfig, TlsError> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots(&files.ca)?)
        .with_client_auth_cert(load_certs(&files.cert)?, load_key(&files.key)?)?;
    config.resumption = Resumption::disabled();
    Ok(config)
}

/// DNS names of a DER certificate's subjectAltName.
pub fn dns_names(cert: &CertificateDer<'_>) -> Vec<String> {
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert.as_ref()) else {
        return Vec::new();
    };
    let Ok(Some(san)) = parsed.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
            _ => None,
        })
        .collect()
}
