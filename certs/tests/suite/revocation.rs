//! Revocation names what the issuer signed (issuer and serial, public key), not only the
//! bytes presented: a re-encoded copy of a revoked certificate is refused too; old
//! fingerprint-only lists still work.

use std::fs;
use std::path::Path;

use rcgen::{KeyPair, SerialNumber};
use skillbox_certs::{issue_intermediate, revoke, TrustStore, VerifyError};
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

use super::common::{assert_refused, developer_params, leaf_signed_by, sign, verify, Pki};
use super::reencode::{pem_to_ders, reencode_negated_s, reencode_signature_chain, sha256_hex};

/// Whether `der`'s signature verifies with `issuer_der`'s public key (ECDSA P-256).
fn signed_by(der: &[u8], issuer_der: &[u8]) -> bool {
    let (_, cert) = X509Certificate::from_der(der).unwrap();
    let (_, issuer) = X509Certificate::from_der(issuer_der).unwrap();
    let key = &issuer.public_key().subject_public_key.data;
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_ASN1, key)
        .verify(cert.tbs_certificate.as_ref(), &cert.signature_value.data)
        .is_ok()
}

fn root_der(pki: &Pki) -> Vec<u8> {
    pem_to_ders(&fs::read_to_string(pki.ca.join("root.pem")).unwrap()).remove(0)
}

#[test]
fn reencoded_certificate_is_the_same_validly_signed_certificate_in_other_bytes() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("twin");
    let leaf = pem_to_ders(&chain).remove(0);
    let copy = reencode_negated_s(&leaf);
    assert_ne!(sha256_hex(&copy), sha256_hex(&leaf), "same fingerprint");
    let root = root_der(&pki);
    assert!(signed_by(&leaf, &root));
    assert!(
        signed_by(&copy, &root),
        "the re-encoded signature does not verify"
    );
    let (_, a) = X509Certificate::from_der(&leaf).unwrap();
    let (_, b) = X509Certificate::from_der(&copy).unwrap();
    assert_eq!(a.tbs_certificate.as_ref(), b.tbs_certificate.as_ref());

    // A package carrying the copy verifies (full path building) while nothing is revoked.
    let pkg = pki.package("twin");
    sign(&pkg, &chain, &key);
    reencode_signature_chain(&pkg.join("SIGNATURE"), 0);
    let v = verify(&pki.store(), &pkg).unwrap();
    assert_eq!(v.leaf_fingerprint, sha256_hex(&copy));
}

#[test]
fn install_rejects_reencoded_copy_of_revoked_developer_certificate() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("leaky");
    let pkg = pki.package("reencoded-leaf");
    sign(&pkg, &chain, &key);
    let copy = reencode_signature_chain(&pkg.join("SIGNATURE"), 0);

    let entry = revoke(&pki.trust, &chain, "key leaked", &[]).unwrap();
    assert!(entry.names_content(), "{entry:?}");
    assert_eq!(entry.issuer.as_deref(), Some("CN=Test Root"));
    assert!(entry.serial.is_some() && entry.spki_sha256.is_some());
    assert_ne!(entry.fingerprint, sha256_hex(&copy));

    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert_refused(&err, "revocation", "key leaked");
    assert!(
        matches!(&err, VerifyError::Revoked { fingerprint, revoked, by, .. }
            if *fingerprint == sha256_hex(&copy) && *revoked == entry.fingerprint
                && *by == "issuer and serial number"),
        "{err:?}"
    );
}

#[test]
fn install_rejects_reencoded_copy_of_revoked_intermediate() {
    let pki = Pki::new();
    let inter = issue_intermediate(&pki.ca, 60).unwrap();
    let (chain, key) = pki.developer("viaint");
    let pkg = pki.package("reencoded-intermediate");
    sign(&pkg, &chain, &key);
    let copy = reencode_signature_chain(&pkg.join("SIGNATURE"), 1);
    let v = verify(&pki.store(), &pkg).unwrap();
    assert_eq!(v.chain_fingerprints[1], sha256_hex(&copy));

    let inter_pem = fs::read_to_string(&inter.cert_path).unwrap();
    revoke(&pki.trust, &inter_pem, "intermediate compromised", &[]).unwrap();
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert_refused(&err, "revocation", "intermediate compromised");
    assert!(
        matches!(&err, VerifyError::Revoked { fingerprint, revoked, .. }
            if *fingerprint == sha256_hex(&copy) && *revoked == inter.fingerprint),
        "{err:?}"
    );
}

#[test]
fn install_rejects_another_certificate_for_a_revoked_key() {
    let pki = Pki::new();
    let (chain, key_pem) = pki.developer("rekeyed");
    revoke(&pki.trust, &chain, "key leaked", &[]).unwrap();
    // The same key certified again by the root, under a new serial number.
    let key = KeyPair::from_pem(&key_pem).unwrap();
    let mut params = developer_params("rekeyed");
    params.serial_number = Some(SerialNumber::from_slice(&[0x42; 16]));
    let again = params.signed_by(&key, &pki.root_issuer()).unwrap();
    let pkg = pki.package("same-key");
    sign(&pkg, &again.pem(), &key_pem);
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert_refused(&err, "revocation", "by public key");
    // Control: a new key under the same name verifies.
    let (fresh, fresh_key) = leaf_signed_by(&developer_params("rekeyed"), &pki.root_issuer());
    let ok = pki.package("new-key");
    sign(&ok, &fresh, &fresh_key);
    verify(&pki.store(), &ok).unwrap();
}

#[test]
fn fingerprint_only_entry_of_an_old_list_still_refuses_and_revoking_again_completes_it() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("legacy");
    let leaf = pem_to_ders(&chain).remove(0);
    let fp = sha256_hex(&leaf);
    fs::write(
        pki.trust.join("revoked.json"),
        format!(
            r#"{{"revoked": [{{"fingerprint": "{fp}", "reason": "old entry", "revoked_at": 1}}]}}"#
        ),
    )
    .unwrap();
    let pkg = pki.package("legacy");
    sign(&pkg, &chain, &key);
    let err = verify(&pki.store(), &pkg).unwrap_err();
    assert_refused(&err, "revocation", "old entry");
    assert!(matches!(&err, VerifyError::Revoked { by, .. } if *by == "fingerprint"));

    // Revoked again by PEM: the entry keeps its reason and gains issuer, serial and key,
    // so the re-encoded copy is refused as well.
    let entry = revoke(&pki.trust, &chain, "new reason", &[]).unwrap();
    assert_eq!(entry.reason, "old entry");
    assert!(entry.names_content());
    assert_eq!(pki.store().revoked().len(), 1);
    let twin = pki.package("legacy-twin");
    sign(&twin, &chain, &key);
    reencode_signature_chain(&twin.join("SIGNATURE"), 0);
    assert_refused(
        &verify(&pki.store(), &twin).unwrap_err(),
        "revocation",
        "old entry",
    );
}

#[test]
fn revoke_by_fingerprint_finds_the_certificate_and_records_what_names_it() {
    let pki = Pki::new();
    let (chain, key) = pki.developer("found");
    let fp = sha256_hex(&pem_to_ders(&chain).remove(0));
    let entry = revoke(
        &pki.trust,
        &fp,
        "found by fingerprint",
        &[pki.out.as_path()],
    )
    .unwrap();
    assert!(entry.names_content(), "{entry:?}");
    let pkg = pki.package("found-twin");
    sign(&pkg, &chain, &key);
    reencode_signature_chain(&pkg.join("SIGNATURE"), 0);
    assert_refused(
        &verify(&pki.store(), &pkg).unwrap_err(),
        "revocation",
        "found by fingerprint",
    );
    // Not found anywhere: recorded by fingerprint only, and said so.
    let other = "ab".repeat(32);
    let entry = revoke(&pki.trust, &other, "", &[Path::new("/nonexistent")]).unwrap();
    assert!(!entry.names_content());
}

#[test]
fn revocation_list_with_issuer_but_no_serial_does_not_load() {
    let pki = Pki::new();
    fs::write(
        pki.trust.join("revoked.json"),
        format!(
            r#"{{"revoked": [{{"fingerprint": "{}", "issuer": "CN=x", "reason": "r", "revoked_at": 1}}]}}"#,
            "cd".repeat(32)
        ),
    )
    .unwrap();
    let err = TrustStore::load(&pki.trust).unwrap_err();
    assert!(err.to_string().contains("issuer and serial"), "{err}");
}
