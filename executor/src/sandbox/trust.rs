//! The certificates a network call's programs trust: the system roots, plus what the core
//! sends with the call (the workspace's egress CA when the skill binds secrets, so that
//! the proxy can read its requests; `[egress] extra_roots`). Written as one bundle in the
//! call's scratch dir and named by the variables OpenSSL, curl, Python `requests` and
//! Node read (docs/sandbox.md).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The bundle's name in the scratch dir (outside a context's work folder, so it is never
/// taken for one of the context's files).
pub const BUNDLE_FILE: &str = ".skillbox-ca.pem";

/// Where distributions keep their bundle of trusted roots, first found wins.
const SYSTEM_BUNDLES: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// The host's bundle of trusted roots, read once: its path and bytes (`None`: no bundle).
fn system_bundle() -> Option<&'static (PathBuf, Vec<u8>)> {
    static SYSTEM: OnceLock<Option<(PathBuf, Vec<u8>)>> = OnceLock::new();
    SYSTEM
        .get_or_init(|| {
            SYSTEM_BUNDLES.iter().find_map(|p| {
                let bytes = std::fs::read(p).ok()?;
                Some((PathBuf::from(p), bytes))
            })
        })
        .as_ref()
}

/// The bundle a network call names: with `extra` certificates, a file written in
/// `scratch` (owned by `owner`) holding the system roots and them; without, the system's
/// own bundle. `None` when there is neither.
pub fn bundle_for(
    scratch: &Path,
    extra: Option<&str>,
    owner: Option<u32>,
) -> std::io::Result<Option<PathBuf>> {
    let system = system_bundle();
    let Some(extra) = extra.filter(|e| !e.trim().is_empty()) else {
        return Ok(system.map(|(path, _)| path.clone()));
    };
    let mut bytes = system.map(|(_, b)| b.clone()).unwrap_or_default();
    if !bytes.is_empty() && !bytes.ends_with(b"\n") {
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(extra.as_bytes());
    let path = scratch.join(BUNDLE_FILE);
    super::scratch::write_owned(&path, &bytes, owner)?;
    Ok(Some(path))
}

/// The variables that name `bundle` for the programs of a call.
pub fn env(bundle: &Path) -> Vec<(String, String)> {
    let path = bundle.to_string_lossy().into_owned();
    [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "CURL_CA_BUNDLE",
    ]
    .into_iter()
    .map(|name| (name.to_string(), path.clone()))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_certificates_follow_the_system_roots() {
        let dir = tempfile::tempdir().unwrap();
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let path = bundle_for(dir.path(), Some(pem), None).unwrap().unwrap();
        assert_eq!(path, dir.path().join(BUNDLE_FILE));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with(pem), "the extra certificate comes last");
        if let Some((_, system)) = system_bundle() {
            assert!(text.len() > system.len(), "the system roots are kept");
        }
    }

    #[test]
    fn without_extras_the_system_bundle_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let named = bundle_for(dir.path(), None, None).unwrap();
        assert_eq!(named, system_bundle().map(|(p, _)| p.clone()));
        assert!(!dir.path().join(BUNDLE_FILE).exists());
    }

    #[test]
    fn bundle_names_are_reserved_for_skills() {
        for (name, _) in env(Path::new("/x")) {
            assert!(skillbox_protocol::skill::validate::is_reserved_env(&name));
        }
    }
}
