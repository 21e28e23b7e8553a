//! The mutual-TLS JSON-RPC 2.0 channel between the core and the executor (docs/architecture.md):
//! `POST /rpc` over HTTPS, TLS 1.3 only, no session resumption, client certificate
//! required, and each side's identity (a DNS name in the certificate, issued by the
//! internal CA) checked, not just its chain. `POST /egress` upgrades a connection to a
//! raw byte stream of one call ([`stream`]), or upgrades it before the call ([`ahead`]).
#![forbid(unsafe_code)]

pub mod ahead;
pub mod client;
pub mod server;
pub mod stream;
pub mod tls;

/// Identity (certificate DNS name) of the core.
pub const CORE_IDENTITY: &str = "skillbox-core";
/// Identity (certificate DNS name) of an executor.
pub const EXECUTOR_IDENTITY: &str = "skillbox-executor";
/// The one HTTP path of the channel.
pub const RPC_PATH: &str = "/rpc";

/// Where a side's TLS material lives: its certificate and key, and the internal CA.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The internal CA certificate (PEM).
    pub ca: std::path::PathBuf,
    /// This side's certificate chain (PEM).
    pub cert: std::path::PathBuf,
    /// This side's private key (PEM, PKCS#8).
    pub key: std::path::PathBuf,
}

impl TlsFiles {
    /// The conventional files of `identity` in a PKI folder: `ca.pem`,
    /// `<identity>.pem`, `<identity>.key`.
    pub fn in_dir(dir: &std::path::Path, identity: &str) -> Self {
        Self {
            ca: dir.join("ca.pem"),
            cert: dir.join(format!("{identity}.pem")),
            key: dir.join(format!("{identity}.key")),
        }
    }
}
