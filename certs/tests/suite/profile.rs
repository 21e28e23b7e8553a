//! The developer certificate's profile: not a CA, digitalSignature, codeSigning only.

use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyUsagePurpose};
use skillbox_certs::VerifyError;

use super::common::{assert_refused, developer_params, leaf_signed_by, sign, verify, Pki};

fn verify_with(edit: impl FnOnce(&mut CertificateParams)) -> VerifyError {
    let pki = Pki::new();
    let mut params = developer_params("profile");
    edit(&mut params);
    let (leaf, key) = leaf_signed_by(&params, &pki.root_issuer());
    let pkg = pki.package("profile");
    sign(&pkg, &leaf, &key);
    verify(&pki.store(), &pkg).unwrap_err()
}

#[test]
fn well_formed_custom_leaf_verifies() {
    let pki = Pki::new();
    let (leaf, key) = leaf_signed_by(&developer_params("fine"), &pki.root_issuer());
    let pkg = pki.package("fine");
    sign(&pkg, &leaf, &key);
    assert_eq!(verify(&pki.store(), &pkg).unwrap().publisher, "fine");
}

#[test]
fn install_rejects_leaf_without_code_signing() {
    let err =
        verify_with(|p| p.extended_key_usages = vec![ExtendedKeyUsagePurpose::EmailProtection]);
    assert!(matches!(err, VerifyError::NotCodeSigning), "{err}");
    assert_refused(&err, "eku", "codeSigning");
}

#[test]
fn install_rejects_leaf_without_eku_extension() {
    let err = verify_with(|p| p.extended_key_usages = vec![]);
    assert!(matches!(err, VerifyError::NotCodeSigning), "{err}");
}

#[test]
fn install_rejects_leaf_with_server_auth() {
    let err = verify_with(|p| {
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::CodeSigning,
            ExtendedKeyUsagePurpose::ServerAuth,
        ]
    });
    assert!(
        matches!(&err, VerifyError::ExtraKeyPurpose { purpose } if purpose == "serverAuth"),
        "{err}"
    );
    assert_refused(&err, "eku", "serverAuth");
}

#[test]
fn install_rejects_leaf_with_any_extended_key_usage() {
    let err = verify_with(|p| {
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::CodeSigning,
            ExtendedKeyUsagePurpose::Any,
        ]
    });
    assert!(matches!(err, VerifyError::ExtraKeyPurpose { .. }), "{err}");
}

#[test]
fn install_rejects_leaf_that_is_a_ca() {
    let err = verify_with(|p| p.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained));
    assert!(matches!(err, VerifyError::LeafIsCa), "{err}");
    assert_refused(&err, "basic_constraints", "CA certificate");
}

#[test]
fn install_rejects_leaf_without_digital_signature() {
    let err = verify_with(|p| p.key_usages = vec![KeyUsagePurpose::KeyEncipherment]);
    assert!(matches!(err, VerifyError::NoDigitalSignature), "{err}");
    assert_refused(&err, "key_usage", "digitalSignature");
}

#[test]
fn install_rejects_leaf_without_key_usage_extension() {
    let err = verify_with(|p| p.key_usages = vec![]);
    assert!(matches!(err, VerifyError::NoDigitalSignature), "{err}");
}
