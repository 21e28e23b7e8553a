//! The SIGNATURE file: missing, empty, malformed, and what signing writes.

use std::fs;
use std::time::SystemTime;

use skillbox_certs::signature::{parse_signature, signed_bytes, ALGORITHM};
use skillbox_certs::{read_signature, sign_package, SignError, VerifyError, SIGNATURE_FILE};

use super::common::{assert_refused, mode_of, sign, verify, Pki, NAME, VERSION};

#[test]
fn signed_package_verifies() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("acme");
    let pkg = pki.package("ok");
    sign(&pkg, &chain, &key);
    let v = verify(&pki.store(), &pkg).unwrap();
    assert_eq!(v.publisher, "acme");
    assert_eq!(v.root_fingerprint, pki.root.fingerprint);
    assert_eq!(v.chain_fingerprints.len(), 2);
    assert_eq!(v.chain_fingerprints[0], v.leaf_fingerprint);
    assert_eq!(v.chain_fingerprints[1], pki.root.fingerprint);
    assert!(!v.root_retiring);
    let sig = read_signature(&pkg).unwrap();
    assert_eq!(v.digest, sig.digest);
    assert_eq!(v.signed_at, sig.signed_at);
}

#[test]
fn sign_writes_signature_json_0644_with_documented_fields() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("acme");
    let pkg = pki.package("fields");
    let written = sign_package(&pkg, NAME, VERSION, &chain, &key).unwrap();
    let path = pkg.join(SIGNATURE_FILE);
    assert_eq!(mode_of(&path), 0o644);
    let text = fs::read_to_string(&path).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for k in [
        "name",
        "version",
        "digest",
        "signed_at",
        "algorithm",
        "signature",
        "chain",
    ] {
        assert!(keys.contains(&k), "missing {k} in {text}");
    }
    assert_eq!(written.algorithm, ALGORITHM);
    assert!(written.digest.starts_with("sha256:"));
    assert_eq!(written.chain.len(), 1);
    let now = i64::try_from(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    )
    .unwrap();
    assert!((now - written.signed_at).abs() < 60);
    assert_eq!(
        written.signed_bytes(),
        signed_bytes(NAME, VERSION, &written.digest, written.signed_at)
    );
    assert_eq!(read_signature(&pkg).unwrap(), written);
    assert!(!text.contains("PRIVATE KEY"));
}

#[test]
fn install_rejects_missing_signature() {
    let pki = Pki::new();
    let pkg = pki.package("missing");
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert!(matches!(err, VerifyError::MissingSignature), "{err}");
    assert_refused(&err, "signature_file", "skillbox certs sign");
}

#[test]
fn install_rejects_empty_signature() {
    let pki = Pki::new();
    let pkg = pki.package("empty");
    fs::write(pkg.join(SIGNATURE_FILE), "").unwrap();
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert!(matches!(&err, VerifyError::MalformedSignature { reason } if reason.contains("empty")));
    assert_refused(&err, "signature_file", "SIGNATURE is empty");
}

#[test]
fn install_rejects_malformed_signature() {
    let pki = Pki::new();
    let pkg = pki.package("malformed");
    fs::write(pkg.join(SIGNATURE_FILE), "not json at all").unwrap();
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert!(
        matches!(err, VerifyError::MalformedSignature { .. }),
        "{err}"
    );
    assert_refused(&err, "signature_file", "not valid JSON");
}

#[test]
fn install_rejects_signature_with_unknown_field() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("acme");
    let pkg = pki.package("unknown-field");
    sign(&pkg, &chain, &key);
    let path = pkg.join(SIGNATURE_FILE);
    let mut json: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    json["trusted"] = serde_json::Value::Bool(true);
    fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert_refused(&err, "signature_file", "unknown field");
}

#[test]
fn install_rejects_signature_symlink() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("acme");
    let signed = pki.package("real");
    sign(&signed, &chain, &key);
    let pkg = pki.package("link");
    std::os::unix::fs::symlink(signed.join(SIGNATURE_FILE), pkg.join(SIGNATURE_FILE)).unwrap();
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert_refused(&err, "signature_file", "not a regular file");
}

#[test]
fn install_rejects_unsupported_algorithm() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("acme");
    let pkg = pki.package("alg");
    sign(&pkg, &chain, &key);
    edit_signature(&pkg, |j| j["algorithm"] = "rsa-pkcs1-sha1".into());
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert!(
        matches!(err, VerifyError::UnsupportedAlgorithm { .. }),
        "{err}"
    );
    assert_refused(&err, "algorithm", "rsa-pkcs1-sha1");
}

#[test]
fn install_rejects_garbage_in_chain() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("acme");
    let pkg = pki.package("garbage-chain");
    sign(&pkg, &chain, &key);
    edit_signature(&pkg, |j| j["chain"][0] = "hello".into());
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert_refused(&err, "signature_file", "chain[0]");
}

#[test]
fn parse_signature_rejects_bad_digest_and_empty_chain() {
    let good = serde_json::json!({
        "name": "a", "version": "1", "digest": format!("sha256:{}", "0".repeat(64)),
        "signed_at": 1, "algorithm": ALGORITHM, "signature": "AAAA", "chain": ["x"],
    });
    assert!(parse_signature(good.to_string().as_bytes()).is_ok());
    let mut bad = good.clone();
    bad["digest"] = "md5:00".into();
    let err = parse_signature(bad.to_string().as_bytes()).unwrap_err();
    assert_refused(&err, "signature_file", "digest");
    let mut bad = good.clone();
    bad["chain"] = serde_json::json!([]);
    let err = parse_signature(bad.to_string().as_bytes()).unwrap_err();
    assert_refused(&err, "signature_file", "chain is empty");
    let mut bad = good;
    bad["name"] = "a\nversion=2".into();
    let err = parse_signature(bad.to_string().as_bytes()).unwrap_err();
    assert_refused(&err, "signature_file", "control character");
}

#[test]
fn sign_rejects_key_of_another_certificate() {
    let pki = Pki::new();
    let (chain, _) = pki.developer("acme");
    let (_, other_key) = pki.developer("other");
    let pkg = pki.package("mismatch");
    let err = sign_package(&pkg, NAME, VERSION, &chain, &other_key).unwrap_err();
    assert!(matches!(err, SignError::KeyMismatch), "{err}");
    assert!(!pkg.join(SIGNATURE_FILE).exists());
}

#[test]
fn sign_rejects_name_with_newline() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("acme");
    let pkg = pki.package("newline");
    let err = sign_package(&pkg, "a\nb", VERSION, &chain, &key).unwrap_err();
    assert!(
        matches!(err, SignError::InvalidField { field: "name", .. }),
        "{err}"
    );
}

/// Rewrites `SIGNATURE` through a JSON edit.
pub fn edit_signature(pkg: &std::path::Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = pkg.join(SIGNATURE_FILE);
    let mut json: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    edit(&mut json);
    fs::write(&path, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
}
