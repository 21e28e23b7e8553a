//! An HTTPS test server on 127.0.0.1 for a made-up name, its certificate issued by a CA of
//! the test's own (rcgen): what `[egress] extra_roots` trusts in the egress tests. It
//! answers `/hello`, and `/auth`, which says `authorized` only when the request carries
//! the real key in `Authorization: Bearer` and `?key=`, and `/echo`, the request's head
//! (`/echo?gzip`: gzip-coded whatever the request accepts, as a misbehaving server does);
//! it records what each request carried.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use super::server::HELLO;

/// One request as the server saw it: its target and its `Authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The request target (path and query).
    pub target: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

/// A running HTTPS server.
#[derive(Debug, Clone)]
pub struct TlsServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The PEM of the CA that issued its certificate.
    pub ca_pem: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl TlsServer {
    /// Serves as `name`, accepting `key` on `/auth`.
    pub fn start(name: &str, key: &str) -> Self {
        let (config, ca_pem) = server_config(name);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the TLS test server");
        let port = listener.local_addr().expect("local_addr").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&seen);
        let key = key.to_string();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (config, recorded, key) =
                    (Arc::clone(&config), Arc::clone(&recorded), key.clone());
                std::thread::spawn(move || handle(stream, config, &recorded, &key));
            }
        });
        Self { port, ca_pem, seen }
    }

    /// The requests so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// A certificate for `hosts` and its key, issued by a CA made for it.
pub struct Issued {
    /// The PEM of the CA that issued it.
    pub ca_pem: String,
    /// The certificate.
    pub cert: rcgen::Certificate,
    /// Its key.
    pub key: KeyPair,
}

/// Makes a CA of the test's own and a server certificate for `hosts` issued by it.
pub fn issue(hosts: &[&str]) -> Issued {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.distinguished_name = name("egress test CA");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("leaf key");
    let names: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
    let mut leaf = CertificateParams::new(names).expect("leaf params");
    leaf.distinguished_name = name(hosts.first().copied().unwrap_or("localhost"));
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = leaf.signed_by(&key, &issuer).expect("sign the leaf");
    Issued {
        ca_pem: ca_cert.pem(),
        cert,
        key,
    }
}

fn server_config(host: &str) -> (Arc<rustls::ServerConfig>, String) {
    let Issued { ca_pem, cert, key } = issue(&[host]);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .expect("server config");
    (Arc::new(config), ca_pem)
}

fn name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

fn handle(
    stream: TcpStream,
    config: Arc<rustls::ServerConfig>,
    seen: &Mutex<Vec<Seen>>,
    key: &str,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, stream);
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match tls.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let target = (text.lines().next())
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("/")
        .to_string();
    let authorization = text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("authorization")
            .then(|| v.trim().to_string())
    });
    if let Ok(mut s) = seen.lock() {
        s.push(Seen {
            target: target.clone(),
            authorization: authorization.clone(),
        });
    }
    let mut coding = "";
    let body = match target.split('?').next().unwrap_or_default() {
        "/hello" => HELLO.to_string(),
        "/echo" => {
            coding = if target.ends_with("?gzip") {
                "gzip"
            } else {
                "identity"
            };
            text.split("\r\n\r\n")
                .next()
                .unwrap_or_default()
                .to_string()
        }
        "/auth" => {
            let header_ok = authorization.as_deref() == Some(&format!("Bearer {key}"));
            let query_ok = target.ends_with(&format!("?key={key}"));
            match (header_ok, query_ok) {
                (true, true) => "authorized".to_string(),
                _ => "denied".to_string(),
            }
        }
        _ => "not found".to_string(),
    };
    let body = match coding {
        "gzip" => gzip(body.as_bytes()),
        _ => body.into_bytes(),
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/plain\r\n\
         Content-Encoding: {}\r\nContent-Length: {}\r\n\r\n",
        if coding.is_empty() {
            "identity"
        } else {
            coding
        },
        body.len()
    );
    let _ = tls.write_all(&[head.into_bytes(), body].concat());
    let _ = tls.flush();
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = e.write_all(bytes);
    e.finish().unwrap_or_default()
}
