//! The TLS trust of the egress proxy (docs/sandbox.md):
//!
//! - the workspace's **egress CA**, made with rcgen on first start in `<state>/egress-ca/`
//!   (key 0600, never sent to an executor). For a skill that binds secrets the proxy ends
//!   its programs' TLS with a certificate for the CONNECT host signed by this CA, which
//!   the sandbox trusts, so it can see and rewrite their requests;
//! - what the proxy trusts for the real servers: the webpki roots plus `[egress]
//!   extra_roots` ([`ExtraRoots`]);
//! - the PEM a call's sandbox trusts beyond the system roots: the CA for a call with bound
//!   secrets, and the extra roots for every network call ([`EgressTrust::sandbox_pem`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::proxy::roots::ExtraRoots;
use crate::state::pki::{write_atomic, PkiError};

/// The CA's folder in the state folder.
pub const CA_DIR: &str = "egress-ca";

/// Certificates minted for hosts kept at once (a new one past this clears the cache).
const MAX_MINTED: usize = 1024;

/// Validity of the CA and of the certificates it mints.
const CA_DAYS: i64 = 3650;
const LEAF_DAYS: i64 = 30;

/// Why the egress trust could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The CA could not be made, read or used.
    #[error("the egress CA in {dir}: {reason}")]
    Ca {
        /// Its folder.
        dir: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// `[egress] extra_roots`.
    #[error(transparent)]
    Roots(#[from] crate::proxy::roots::RootsError),
    /// The proxy's TLS client could not be built.
    #[error("the egress proxy's TLS client: {0}")]
    Client(String),
}

/// The egress proxy's certificates (see the module docs).
pub struct EgressTrust {
    issuer: Issuer<'static, KeyPair>,
    ca_der: CertificateDer<'static>,
    ca_pem: String,
    /// One key for every minted certificate (made at start, never written).
    leaf_key: KeyPair,
    minted: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
    extra: ExtraRoots,
    upstream: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for EgressTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressTrust")
            .field("extra_roots", &self.extra.certs.len())
            .finish_non_exhaustive()
    }
}

impl EgressTrust {
    /// Opens the CA of `state` (making it on first start) and trusts `extra` for servers.
    pub fn open(state: &Path, extra: ExtraRoots) -> Result<Self, TrustError> {
        let dir = state.join(CA_DIR);
        let ca_err = |reason: String| TrustError::Ca {
            dir: dir.clone(),
            reason,
        };
        let (key_path, cert_path) = (dir.join("ca.key"), dir.join("ca.pem"));
        if !key_path.exists() || !cert_path.exists() {
            make_ca(&dir, &key_path, &cert_path).map_err(|e| ca_err(e.to_string()))?;
        }
        let key_pem = std::fs::read_to_string(&key_path).map_err(|e| ca_err(e.to_string()))?;
        let ca_pem = std::fs::read_to_string(&cert_path).map_err(|e| ca_err(e.to_string()))?;
        let key = KeyPair::from_pem(&key_pem).map_err(|e| ca_err(e.to_string()))?;
        let ca_der = CertificateDer::from_pem_slice(ca_pem.as_bytes())
            .map_err(|e| ca_err(format!("ca.pem is not a PEM certificate: {e}")))?;
        // The issuer is rebuilt from the same name and key: what a minted certificate
        // names as its issuer (subject and key identifier) is the stored CA's.
        let issuer = Issuer::new(ca_params(), key);
        let leaf_key = KeyPair::generate().map_err(|e| ca_err(e.to_string()))?;
        let upstream = extra.client_config().map_err(TrustError::Client)?;
        Ok(Self {
            issuer,
            ca_der,
            ca_pem,
            leaf_key,
            minted: Mutex::new(HashMap::new()),
            extra,
            upstream: Arc::new(upstream),
        })
    }

    /// The CA's certificate (PEM).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The PEM a call's sandbox trusts beside the system roots (`None`: nothing more):
    /// the CA when the call's skill binds secrets, and `[egress] extra_roots`.
    pub fn sandbox_pem(&self, binds_secrets: bool) -> Option<String> {
        let mut pem = String::new();
        if binds_secrets {
            pem.push_str(self.ca_pem.trim_end());
            pem.push('\n');
        }
        pem.push_str(&self.extra.pem);
        (!pem.is_empty()).then_some(pem)
    }

    /// The proxy's TLS client for the real servers.
    pub fn upstream(&self) -> Arc<rustls::ClientConfig> {
        Arc::clone(&self.upstream)
    }

    /// The TLS server configuration that answers a program as `host`: a certificate for
    /// it signed by the CA (minted once, then kept), HTTP/1.1 only.
    pub fn server_for(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, String> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let mut minted = self.minted.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(config) = minted.get(&host) {
            return Ok(Arc::clone(config));
        }
        if minted.len() >= MAX_MINTED {
            minted.clear();
        }
        let config = Arc::new(self.mint(&host)?);
        minted.insert(host, Arc::clone(&config));
        Ok(config)
    }

    fn mint(&self, host: &str) -> Result<rustls::ServerConfig, String> {
        let mut params =
            CertificateParams::new(vec![host.to_string()]).map_err(|e| e.to_string())?;
        params.distinguished_name = name(host);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + time::Duration::days(LEAF_DAYS);
        let cert = params
            .signed_by(&self.leaf_key, &self.issuer)
            .map_err(|e| e.to_string())?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone(), self.ca_der.clone()], key)
            .map_err(|e| e.to_string())?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// The CA's parameters (its name and uses); the same on every start.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.distinguished_name = name("skillbox egress CA");
    params
}

/// Makes the CA's key and self-signed certificate in `dir`.
fn make_ca(dir: &Path, key_path: &Path, cert_path: &Path) -> Result<(), PkiError> {
    std::fs::create_dir_all(dir).map_err(|source| PkiError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let key = KeyPair::generate()?;
    let mut params = ca_params();
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::days(CA_DAYS);
    let cert = params.self_signed(&key)?;
    // The key first: a certificate without its key is remade on the next start.
    write_atomic(key_path, key.serialize_pem().as_bytes(), 0o600)?;
    write_atomic(cert_path, cert.pem().as_bytes(), 0o644)?;
    tracing::info!(dir = %dir.display(), "egress CA created");
    Ok(())
}

fn name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn the_ca_is_made_once_and_its_key_is_private() {
        let state = tempfile::tempdir().unwrap();
        let first = EgressTrust::open(state.path(), ExtraRoots::default()).unwrap();
        let key = state.path().join(CA_DIR).join("ca.key");
        assert_eq!(std::fs::metadata(&key).unwrap().mode() & 0o777, 0o600);
        let again = EgressTrust::open(state.path(), ExtraRoots::default()).unwrap();
        assert_eq!(first.ca_pem(), again.ca_pem(), "kept across starts");
    }

    #[test]
    fn a_minted_certificate_verifies_against_the_ca_after_a_restart() {
        let state = tempfile::tempdir().unwrap();
        let ca_pem = EgressTrust::open(state.path(), ExtraRoots::default())
            .unwrap()
            .ca_pem()
            .to_string();
        // A new start mints with the stored CA.
        let trust = EgressTrust::open(state.path(), ExtraRoots::default()).unwrap();
        let config = trust.server_for("API.test.").unwrap();
        assert!(Arc::ptr_eq(&config, &trust.server_for("api.test").unwrap()));
        let cert = trust.mint("api.test").unwrap();
        drop(cert);
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
            .unwrap();
        let leaf = {
            let mut p = CertificateParams::new(vec!["api.test".to_string()]).unwrap();
            p.distinguished_name = name("api.test");
            p.signed_by(&trust.leaf_key, &trust.issuer).unwrap()
        };
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        use rustls::client::danger::ServerCertVerifier;
        let name = rustls::pki_types::ServerName::try_from("api.test").unwrap();
        verifier
            .verify_server_cert(
                leaf.der(),
                &[],
                &name,
                &[],
                rustls::pki_types::UnixTime::now(),
            )
            .expect("the minted certificate chains to the stored CA");
    }

    #[test]
    fn the_sandbox_trusts_the_ca_only_for_calls_with_bound_secrets() {
        let state = tempfile::tempdir().unwrap();
        let trust = EgressTrust::open(state.path(), ExtraRoots::default()).unwrap();
        assert_eq!(trust.sandbox_pem(false), None);
        let pem = trust.sandbox_pem(true).unwrap();
        assert!(pem.contains("BEGIN CERTIFICATE"));
        assert!(!pem.contains("PRIVATE KEY"), "never the key");
    }
}
