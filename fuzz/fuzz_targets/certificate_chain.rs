//! A package's `SIGNATURE` and the certificate chain in it, as install and admission
//! verify them (`TrustStore::verify_package`: size cap, JSON shape, PEM blocks, X.509 DER
//! of every chain entry, then the digest and the leaf's signature). Never panics, and a
//! trust store with no root never accepts a package, whatever the bytes.
//!
//! The first byte picks the layer to reach: even, the rest is the `SIGNATURE` file itself;
//! odd, the rest is DER certificates separated by `~~next~~`, put as PEM into the chain of
//! an otherwise well-formed `SIGNATURE` whose digest matches the package, so the fuzzer's
//! bytes reach the X.509 parser and the leaf's public key.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::SystemTime;

use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use skillbox_certs::signature::{parse_signature, ALGORITHM};
use skillbox_certs::{package_digest, PackageSignature, TrustStore, SIGNATURE_FILE};

const SEPARATOR: &[u8] = b"~~next~~";

/// The package folder for the whole run and its digest (`SIGNATURE` is not part of it).
static PACKAGE: OnceLock<(tempfile::TempDir, PathBuf, String)> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (_, dir, digest) = PACKAGE.get_or_init(|| {
        let tmp = tempfile::tempdir().expect("a temporary folder for the package");
        let dir = tmp.path().join("fuzzed");
        std::fs::create_dir(&dir).expect("the package folder");
        std::fs::write(dir.join("skill.yaml"), "name: fuzzed\nversion: 1.0.0\n")
            .expect("the package's manifest");
        let digest = package_digest(&dir)
            .expect("the package's digest")
            .prefixed();
        (tmp, dir, digest)
    });
    let signature = if mode & 1 == 0 {
        if let Ok(sig) = parse_signature(rest) {
            assert!(sig.digest.starts_with("sha256:"), "{sig:?}");
            assert!((1..=8).contains(&sig.chain.len()), "{sig:?}");
        }
        rest.to_vec()
    } else {
        let sig = PackageSignature {
            name: "fuzzed".into(),
            version: "1.0.0".into(),
            digest: digest.clone(),
            signed_at: 0,
            algorithm: ALGORITHM.into(),
            // A DER SEQUENCE of nothing: valid base64, never a valid signature.
            signature: base64::engine::general_purpose::STANDARD.encode([0x30, 0x00]),
            chain: split(rest).map(pem).collect(),
        };
        match serde_json::to_vec(&sig) {
            Ok(bytes) => bytes,
            Err(_) => return,
        }
    };
    if std::fs::write(dir.join(SIGNATURE_FILE), &signature).is_err() {
        return;
    }
    let verdict = TrustStore::empty().verify_package(dir, "fuzzed", "1.0.0", SystemTime::now());
    assert!(
        verdict.is_err(),
        "a store with no root accepted {verdict:?}"
    );
});

/// The pieces of `bytes` between separators.
fn split(mut bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        if bytes.is_empty() {
            return None;
        }
        match bytes.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
            Some(at) => {
                let piece = &bytes[..at];
                bytes = &bytes[at + SEPARATOR.len()..];
                Some(piece)
            }
            None => Some(std::mem::take(&mut bytes)),
        }
    })
}

/// `der` as a PEM `CERTIFICATE` block, 64 base64 characters a line.
fn pem(der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}
