//! The chain to a trusted root: unknown roots, self-signed and forged certificates,
//! validity, revocation and intermediates.

use std::fs;
use std::time::{Duration, SystemTime};

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use skillbox_certs::{issue_intermediate, revoke, TrustStore, VerifyError};

use super::common::{
    assert_refused, developer_params, dn, leaf_signed_by, sign, verify, Pki, NAME, ROOT_CN, VERSION,
};

#[test]
fn install_rejects_unknown_root() {
    let ours = Pki::new();
    let theirs = Pki::new();
    let (chain, key) = theirs.developer("stranger");
    let pkg = ours.package("unknown-root");
    sign(&pkg, &chain, &key);
    let err = verify(&ours.store(), &pkg).unwrap_err();
    assert!(matches!(err, VerifyError::UnknownRoot), "{err}");
    assert_refused(&err, "chain", "does not lead to a root in the trust store");
    // The same package verifies where its root is trusted.
    verify(&theirs.store(), &pkg).unwrap();
}

#[test]
fn install_rejects_self_signed_developer_certificate() {
    let pki = Pki::new();
    let key = KeyPair::generate().unwrap();
    let cert = developer_params("selfie").self_signed(&key).unwrap();
    let pkg = pki.package("self-signed");
    sign(&pkg, &cert.pem(), &key.serialize_pem());
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert!(matches!(err, VerifyError::UnknownRoot), "{err}");
    assert_refused(&err, "chain", "trust store");
}

#[test]
fn install_rejects_certificate_naming_trusted_root_but_signed_by_another_key() {
    let pki = Pki::new();
    let mut params = CertificateParams::default();
    params.distinguished_name = dn(ROOT_CN);
    let forger = Issuer::new(params, KeyPair::generate().unwrap());
    let (leaf, key) = leaf_signed_by(&developer_params("forger"), &forger);
    let pkg = pki.package("forged-issuer");
    sign(&pkg, &leaf, &key);
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert_eq!(err.check(), "chain", "{err}");
}

#[test]
fn install_rejects_expired_certificate() {
    let pki = Pki::new();
    let mut params = developer_params("old");
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(60);
    params.not_after = now - time::Duration::days(1);
    let (leaf, key) = leaf_signed_by(&params, &pki.root_issuer());
    let pkg = pki.package("expired");
    sign(&pkg, &leaf, &key);
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert!(matches!(&err, VerifyError::Expired { subject, .. } if subject.contains("CN=old")));
    assert_refused(&err, "validity", "expired at");
}

#[test]
fn install_rejects_not_yet_valid_certificate() {
    let pki = Pki::new();
    let mut params = developer_params("future");
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now + time::Duration::days(2);
    params.not_after = now + time::Duration::days(30);
    let (leaf, key) = leaf_signed_by(&params, &pki.root_issuer());
    let pkg = pki.package("future");
    sign(&pkg, &leaf, &key);
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert!(matches!(err, VerifyError::NotYetValid { .. }), "{err}");
    assert_refused(&err, "validity", "is not valid before");
}

#[test]
fn validity_is_checked_at_verification_time_not_signing_time() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("acme"); // 30 days
    let pkg = pki.package("later");
    sign(&pkg, &chain, &key);
    let store = pki.store();
    verify(&store, &pkg).unwrap();
    let later = SystemTime::now() + Duration::from_secs(40 * 86_400);
    let err = store
        .verify_package(&pkg, NAME, VERSION, later)
        .unwrap_err();
    assert!(matches!(err, VerifyError::Expired { .. }), "{err}");
}

#[test]
fn install_rejects_revoked_leaf() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("leaky");
    let pkg = pki.package("revoked");
    sign(&pkg, &chain, &key);
    let leaf_fp = verify(&pki.store(), &pkg).unwrap().leaf_fingerprint;
    let fp = revoke(&pki.trust, &chain, "key leaked", &[])
        .unwrap()
        .fingerprint;
    assert_eq!(fp, leaf_fp);
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert!(
        matches!(&err, VerifyError::Revoked { fingerprint, reason, by, .. } if *fingerprint == leaf_fp && reason == "key leaked" && *by == "fingerprint"),
        "{err}"
    );
    assert_refused(&err, "revocation", "key leaked");
    let list = pki.store().revoked();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].subject.as_deref(), Some("CN=leaky, O=leaky"));
}

#[test]
fn install_rejects_leaf_revoked_by_fingerprint() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("byfp");
    let pkg = pki.package("revoked-fp");
    sign(&pkg, &chain, &key);
    let leaf_fp = verify(&pki.store(), &pkg).unwrap().leaf_fingerprint;
    let typed = format!("sha256:{}", leaf_fp.to_uppercase());
    assert_eq!(
        revoke(&pki.trust, &typed, "", &[]).unwrap().fingerprint,
        leaf_fp
    );
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert_refused(&err, "revocation", "unspecified");
}

#[test]
fn intermediate_chain_verifies_and_revoked_intermediate_is_refused() {
    let pki = Pki::new();
    let inter = issue_intermediate(&pki.ca, 60).unwrap();
    let (chain, key) = pki.developer("viaint");
    assert_eq!(chain.matches("BEGIN CERTIFICATE").count(), 2);
    let pkg = pki.package("intermediate");
    sign(&pkg, &chain, &key);
    let v = verify(&pki.store(), &pkg).unwrap();
    assert_eq!(v.chain_fingerprints.len(), 3);
    assert_eq!(v.chain_fingerprints[1], inter.fingerprint);
    assert_eq!(v.root_fingerprint, pki.root.fingerprint);

    let inter_pem = fs::read_to_string(&inter.cert_path).unwrap();
    assert_eq!(
        revoke(&pki.trust, &inter_pem, "intermediate compromised", &[])
            .unwrap()
            .fingerprint,
        inter.fingerprint
    );
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert!(
        matches!(&err, VerifyError::Revoked { fingerprint, .. } if *fingerprint == inter.fingerprint),
        "{err}"
    );
}

#[test]
fn install_rejects_intermediate_without_ca() {
    let pki = Pki::new();
    let root = pki.root_issuer();
    let mut inter_params = CertificateParams::default();
    inter_params.distinguished_name = dn("Not A CA");
    inter_params.is_ca = IsCa::ExplicitNoCa;
    inter_params.use_authority_key_identifier_extension = true;
    let inter_key = KeyPair::generate().unwrap();
    let inter_cert = inter_params.signed_by(&inter_key, &root).unwrap();
    let mut issuer_params = CertificateParams::default();
    issuer_params.distinguished_name = dn("Not A CA");
    let inter = Issuer::new(issuer_params, inter_key);
    let (leaf, key) = leaf_signed_by(&developer_params("under-leaf"), &inter);
    let pkg = pki.package("inter-not-ca");
    sign(&pkg, &format!("{leaf}{}", inter_cert.pem()), &key);
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert!(matches!(err, VerifyError::IntermediateNotCa), "{err}");
    assert_refused(&err, "basic_constraints", "not a CA");
}

#[test]
fn install_rejects_intermediate_without_key_cert_sign() {
    let pki = Pki::new();
    let root = pki.root_issuer();
    let mut inter_params = CertificateParams::default();
    inter_params.distinguished_name = dn("No keyCertSign");
    inter_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    inter_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let inter_key = KeyPair::generate().unwrap();
    let inter_cert = inter_params.signed_by(&inter_key, &root).unwrap();
    let inter = Issuer::new(inter_params, inter_key);
    let (leaf, key) = leaf_signed_by(&developer_params("under-ku"), &inter);
    let pkg = pki.package("inter-no-kcs");
    sign(&pkg, &format!("{leaf}{}", inter_cert.pem()), &key);
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert!(matches!(err, VerifyError::IntermediateNotCa), "{err}");
}

#[test]
fn empty_trust_store_verifies_nothing() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("acme");
    let pkg = pki.package("empty-store");
    sign(&pkg, &chain, &key);
    let err = verify(&TrustStore::empty(), &pkg).unwrap_err();
    assert!(matches!(err, VerifyError::UnknownRoot), "{err}");
}
