//! Root rotation without downtime: overlap, retirement, forged statements.

use std::fs;

use base64::Engine as _;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use skillbox_certs::rotation::rotation_signed_bytes;
use skillbox_certs::signature::ALGORITHM;
use skillbox_certs::trust::{RETIRED_FILE, ROOTS_DIR, ROTATIONS_DIR};
use skillbox_certs::{
    retire_root, rotate_root, IssueError, RootSource, RotationRefusal, RotationStatement,
    VerifyError,
};

use super::common::{
    assert_refused, developer_params, dn, leaf_signed_by, sign, verify, Pki, ROOT_CN,
};

/// Package A under the old root, rotate, package B under the new root.
fn rotated() -> (
    Pki,
    std::path::PathBuf,
    std::path::PathBuf,
    RotationStatement,
) {
    let pki = Pki::new();
    let (chain_a, key_a) = pki.developer("alice");
    let a = pki.package("a");
    sign(&a, &chain_a, &key_a);
    let statement = rotate_root(&pki.ca, &pki.trust, 365).unwrap();
    let (chain_b, key_b) = pki.developer("bob");
    let b = pki.package("b");
    sign(&b, &chain_b, &key_b);
    (pki, a, b, statement)
}

#[test]
fn rotation_keeps_both_roots_verifying_during_overlap() {
    let (pki, a, b, statement) = rotated();
    let old = pki.root.fingerprint.clone();
    let new = statement.new_root_fingerprint.clone();
    assert_eq!(statement.old_root_fingerprint, old);
    assert_ne!(old, new);
    assert!(pki
        .trust
        .join(ROTATIONS_DIR)
        .join(format!("{new}.json"))
        .is_file());
    assert!(pki.ca.join(format!("root-{old}.pem")).is_file());
    assert!(pki.ca.join(format!("root-{old}.key")).is_file());

    let store = pki.store();
    assert!(store.warnings().is_empty(), "{:?}", store.warnings());
    let va = verify(&store, &a).unwrap();
    let vb = verify(&store, &b).unwrap();
    assert_eq!(va.root_fingerprint, old);
    assert_eq!(vb.root_fingerprint, new);
    assert!(va.root_retiring, "A hangs on a root going away");
    assert!(!vb.root_retiring);

    let roots = store.roots();
    let old_info = roots.iter().find(|r| r.fingerprint == old).unwrap();
    let new_info = roots.iter().find(|r| r.fingerprint == new).unwrap();
    assert_eq!(old_info.source, RootSource::Configured);
    assert!(old_info.retiring && !old_info.retired);
    assert_eq!(new_info.source, RootSource::Rotated { from: old.clone() });
    assert!(!new_info.retiring && !new_info.retired);
    assert_eq!(new_info.subject, format!("CN={ROOT_CN}"));
}

#[test]
fn retired_root_no_longer_verifies_and_new_root_still_does() {
    let (pki, a, b, statement) = rotated();
    let old = pki.root.fingerprint.clone();
    let new = statement.new_root_fingerprint;
    retire_root(&pki.trust, &old).unwrap();

    let store = pki.store();
    assert!(store.warnings().is_empty(), "{:?}", store.warnings());
    let err = verify(&store, &a).unwrap_err();
    assert!(
        matches!(&err, VerifyError::RetiredRoot { fingerprint } if *fingerprint == old),
        "{err}"
    );
    assert_refused(&err, "retired_root", &old);
    assert_eq!(verify(&store, &b).unwrap().root_fingerprint, new);

    // The new root was promoted to a configured root; the old one is flagged retired.
    assert!(pki
        .trust
        .join(ROOTS_DIR)
        .join(format!("{new}.pem"))
        .is_file());
    let roots = store.roots();
    let old_info = roots.iter().find(|r| r.fingerprint == old).unwrap();
    assert!(old_info.retired && !old_info.retiring);
    let new_info = roots.iter().find(|r| r.fingerprint == new).unwrap();
    assert_eq!(new_info.source, RootSource::Configured);

    // Retiring twice is a no-op; retiring the last current root is refused.
    retire_root(&pki.trust, &old).unwrap();
    let err = retire_root(&pki.trust, &new).unwrap_err();
    assert!(matches!(err, IssueError::LastRoot { .. }), "{err}");
}

#[test]
fn statement_signed_by_retired_root_is_refused() {
    let (pki, a, b, statement) = rotated();
    // Retire the old root by hand, without promoting its successor: the statement it
    // signed no longer counts, so B's root is unknown.
    let list =
        serde_json::json!({"retired": [{"fingerprint": pki.root.fingerprint, "retired_at": 1}]});
    fs::write(pki.trust.join(RETIRED_FILE), list.to_string()).unwrap();
    let store = pki.store();
    let w = store.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        matches!(&w[0].refusal, RotationRefusal::SignerRetired { fingerprint } if *fingerprint == pki.root.fingerprint)
    );
    assert!(!store
        .roots()
        .iter()
        .any(|r| r.fingerprint == statement.new_root_fingerprint));
    assert!(matches!(
        verify(&store, &a).unwrap_err(),
        VerifyError::RetiredRoot { .. }
    ));
    assert!(matches!(
        verify(&store, &b).unwrap_err(),
        VerifyError::UnknownRoot
    ));
}

/// A root the attacker controls, and a package signed under it.
fn attacker_root(pki: &Pki) -> (String, String, KeyPair, std::path::PathBuf) {
    let mut params = CertificateParams::default();
    params.distinguished_name = dn(ROOT_CN);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let fp: String = ring::digest::digest(&ring::digest::SHA256, cert.der())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let signer_key = KeyPair::from_pem(&key.serialize_pem()).unwrap();
    let issuer = Issuer::new(params, signer_key);
    let (leaf, leaf_key) = leaf_signed_by(&developer_params("mallory"), &issuer);
    let pkg = pki.package("evil");
    sign(&pkg, &leaf, &leaf_key);
    (fp, cert.pem(), key, pkg)
}

fn forge_statement(pki: &Pki, old_fp: &str, new_fp: &str, new_pem: &str, key: &KeyPair) {
    let rng = ring::rand::SystemRandom::new();
    let signer = ring::signature::EcdsaKeyPair::from_pkcs8(
        &ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING,
        &key.serialize_der(),
        &rng,
    )
    .unwrap();
    let sig = signer
        .sign(&rng, &rotation_signed_bytes(old_fp, new_fp, 1_700_000_000))
        .unwrap();
    let statement = RotationStatement {
        old_root_fingerprint: old_fp.to_string(),
        new_root_fingerprint: new_fp.to_string(),
        new_root_pem: new_pem.to_string(),
        issued_at: 1_700_000_000,
        algorithm: ALGORITHM.to_string(),
        signature: base64::engine::general_purpose::STANDARD.encode(sig.as_ref()),
    };
    let dir = pki.trust.join(ROTATIONS_DIR);
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join(format!("{new_fp}.json")),
        serde_json::to_vec_pretty(&statement).unwrap(),
    )
    .unwrap();
}

#[test]
fn rotation_rejects_statement_signed_by_new_key_only() {
    let pki = Pki::new();
    let (fp, pem, key, pkg) = attacker_root(&pki);
    // Claims the trusted root vouches for the attacker's root, but is signed by the
    // attacker's key.
    forge_statement(&pki, &pki.root.fingerprint, &fp, &pem, &key);
    let store = pki.store();
    let w = store.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        matches!(&w[0].refusal, RotationRefusal::BadSignature { fingerprint } if *fingerprint == pki.root.fingerprint),
        "{}",
        w[0]
    );
    assert!(w[0].to_string().contains("forged"));
    assert!(!store.roots().iter().any(|r| r.fingerprint == fp));
    assert!(matches!(
        verify(&store, &pkg).unwrap_err(),
        VerifyError::UnknownRoot
    ));
}

#[test]
fn rotation_rejects_self_vouching_statement() {
    let pki = Pki::new();
    let (fp, pem, key, pkg) = attacker_root(&pki);
    forge_statement(&pki, &fp, &fp, &pem, &key);
    let store = pki.store();
    let w = store.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        matches!(&w[0].refusal, RotationRefusal::UnknownSigner { fingerprint } if *fingerprint == fp)
    );
    assert!(matches!(
        verify(&store, &pkg).unwrap_err(),
        VerifyError::UnknownRoot
    ));
}

#[test]
fn rotation_rejects_statement_with_swapped_root() {
    let pki = Pki::new();
    let statement = rotate_root(&pki.ca, &pki.trust, 365).unwrap();
    let (_, evil_pem, _, pkg) = attacker_root(&pki);
    let path = pki
        .trust
        .join(ROTATIONS_DIR)
        .join(format!("{}.json", statement.new_root_fingerprint));
    let mut json: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    json["new_root_pem"] = evil_pem.into();
    fs::write(&path, json.to_string()).unwrap();
    let store = pki.store();
    assert!(matches!(
        store.warnings()[0].refusal,
        RotationRefusal::FingerprintMismatch
    ));
    assert!(matches!(
        verify(&store, &pkg).unwrap_err(),
        VerifyError::UnknownRoot
    ));
}

#[test]
fn rotation_chain_resolves_and_survives_retiring_the_first_root() {
    let pki = Pki::new();
    let first = pki.root.fingerprint.clone();
    let second = rotate_root(&pki.ca, &pki.trust, 365).unwrap();
    let third = rotate_root(&pki.ca, &pki.trust, 365).unwrap();
    assert_eq!(third.old_root_fingerprint, second.new_root_fingerprint);
    let (chain, key) = pki.developer("carol");
    let pkg = pki.package("c");
    sign(&pkg, &chain, &key);
    let store = pki.store();
    assert!(store.warnings().is_empty(), "{:?}", store.warnings());
    assert_eq!(store.roots().len(), 3);
    assert_eq!(
        verify(&store, &pkg).unwrap().root_fingerprint,
        third.new_root_fingerprint
    );

    retire_root(&pki.trust, &first).unwrap();
    let store = pki.store();
    assert!(store.warnings().is_empty(), "{:?}", store.warnings());
    assert_eq!(
        verify(&store, &pkg).unwrap().root_fingerprint,
        third.new_root_fingerprint
    );
}

#[test]
fn rotation_moves_the_old_intermediate_aside() {
    let pki = Pki::new();
    let inter = skillbox_certs::issue_intermediate(&pki.ca, 60).unwrap();
    let statement = rotate_root(&pki.ca, &pki.trust, 365).unwrap();
    assert!(!pki.ca.join("intermediate.pem").exists());
    assert!(pki
        .ca
        .join(format!("intermediate-{}.pem", inter.fingerprint))
        .is_file());
    let (chain, key) = pki.developer("dave");
    assert_eq!(chain.matches("BEGIN CERTIFICATE").count(), 1);
    let pkg = pki.package("d");
    sign(&pkg, &chain, &key);
    assert_eq!(
        verify(&pki.store(), &pkg).unwrap().root_fingerprint,
        statement.new_root_fingerprint
    );
}
