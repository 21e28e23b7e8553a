//! A raw TLS 1.3 client of the channel listeners, with any client certificate or none,
//! and certificates from a CA of the test's own (rcgen).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use skillbox_channel::tls::{load_certs, load_key};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// A client certificate chain and its key.
#[derive(Debug)]
pub struct ClientCert {
    /// The chain, leaf first.
    pub certs: Vec<CertificateDer<'static>>,
    /// The key.
    pub key: PrivateKeyDer<'static>,
}

impl ClientCert {
    /// The certificate and key of PEM files (e.g. the real `<state>/pki/skillbox-core.*`).
    pub fn from_files(cert: &Path, key: &Path) -> Self {
        Self {
            certs: load_certs(cert).expect("load certificate"),
            key: load_key(key).expect("load key"),
        }
    }

    /// A certificate naming `identity`, issued by a fresh CA named `ca_name` that
    /// skillbox never saw (give it the real CA's name to try a name collision).
    pub fn from_foreign_ca(identity: &str, ca_name: &str) -> Self {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca.distinguished_name = name(ca_name);
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().expect("leaf key");
        let mut leaf = CertificateParams::new(vec![identity.to_string()]).expect("leaf params");
        leaf.distinguished_name = name(identity);
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        leaf.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = leaf.signed_by(&key, &issuer).expect("sign the leaf");
        Self {
            certs: vec![cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        }
    }
}

fn name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

/// Sends one JSON-RPC `body` as `POST /rpc` over TLS to `addr`, verifying the server as
/// `server_name` under the CA in `ca_pem`, presenting `client` (or no certificate).
/// `Ok` holds the raw HTTP answer; `Err` says where the exchange broke (handshake,
/// write, read, or a connection closed without any answer).
pub async fn rpc(
    addr: &str,
    server_name: &str,
    ca_pem: &Path,
    client: Option<ClientCert>,
    body: &str,
) -> Result<String, String> {
    let mut roots = RootCertStore::empty();
    for c in load_certs(ca_pem).expect("load the CA") {
        roots.add(c).expect("add the CA");
    }
    let builder =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3")
            .with_root_certificates(roots);
    let config = match client {
        Some(c) => builder
            .with_client_auth_cert(c.certs, c.key)
            .expect("client certificate"),
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::try_from(server_name.to_string()).expect("server name");
    let exchange = async {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let mut tls = TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        let request = format!(
            "POST /rpc HTTP/1.1\r\nHost: {server_name}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        tls.write_all(request.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut answer = Vec::new();
        tls.read_to_end(&mut answer)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if answer.is_empty() {
            return Err("the server closed the connection without answering".to_string());
        }
        Ok(String::from_utf8_lossy(&answer).into_owned())
    };
    tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .unwrap_or_else(|_| Err("no answer within 30 s".to_string()))
}
