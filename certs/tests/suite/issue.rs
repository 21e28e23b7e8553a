//! Issuing: key modes, certificate profiles, refusals.

use std::fs;

use skillbox_certs::{
    init_root, issue_developer, issue_intermediate, revoke, rotate_root, IssueError,
};
use x509_parser::prelude::*;

use super::common::{mode_of, Pki};

#[test]
fn keys_are_written_0600_and_certificates_0644() {
    let pki = Pki::new();
    assert_eq!(mode_of(&pki.ca.join("root.key")), 0o600);
    assert_eq!(mode_of(&pki.ca.join("root.pem")), 0o644);
    assert_eq!(mode_of(&pki.ca), 0o700);
    let root_copy = pki
        .trust
        .join("roots")
        .join(format!("{}.pem", pki.root.fingerprint));
    assert_eq!(mode_of(&root_copy), 0o644);

    let inter = issue_intermediate(&pki.ca, 30).unwrap();
    assert_eq!(mode_of(&inter.key_path), 0o600);
    let dev = issue_developer(&pki.ca, "acme", 30, &pki.out).unwrap();
    assert_eq!(mode_of(&dev.key_path), 0o600);
    assert_eq!(mode_of(&dev.cert_path), 0o644);

    let old = pki.root.fingerprint.clone();
    rotate_root(&pki.ca, &pki.trust, 30).unwrap();
    assert_eq!(mode_of(&pki.ca.join("root.key")), 0o600);
    assert_eq!(mode_of(&pki.ca.join(format!("root-{old}.key"))), 0o600);
    assert_eq!(
        mode_of(
            &pki.ca
                .join(format!("intermediate-{}.key", inter.fingerprint))
        ),
        0o600
    );
}

#[test]
fn developer_certificate_has_the_code_signing_profile() {
    let pki = Pki::new();
    let dev = issue_developer(&pki.ca, "acme-corp", 10, &pki.out).unwrap();
    let pem = fs::read_to_string(&dev.cert_path).unwrap();
    let (_, block) = parse_x509_pem(pem.as_bytes()).unwrap();
    let cert = block.parse_x509().unwrap();
    assert_eq!(cert.subject().to_string(), "CN=acme-corp, O=acme-corp");
    assert_eq!(dev.subject, "CN=acme-corp, O=acme-corp");
    assert!(!cert.is_ca());
    let ku = cert.key_usage().unwrap().unwrap().value;
    assert!(ku.digital_signature() && !ku.key_cert_sign());
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.code_signing && !eku.server_auth && !eku.client_auth && !eku.any);
    assert!(eku.other.is_empty());
    let days =
        (cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp()) / 86_400;
    assert_eq!(days, 10);
    assert_eq!(dev.issuer_fingerprint, pki.root.fingerprint);
    let key = fs::read_to_string(&dev.key_path).unwrap();
    assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
}

#[test]
fn init_root_refuses_to_replace_a_root() {
    let pki = Pki::new();
    let before = fs::read(pki.ca.join("root.key")).unwrap();
    let err = init_root(&pki.ca, &pki.trust, "Again", 10).unwrap_err();
    assert!(matches!(err, IssueError::AlreadyExists { .. }), "{err}");
    assert_eq!(fs::read(pki.ca.join("root.key")).unwrap(), before);
}

#[test]
fn issue_developer_refuses_to_overwrite_a_key() {
    let pki = Pki::new();
    issue_developer(&pki.ca, "acme", 10, &pki.out).unwrap();
    let err = issue_developer(&pki.ca, "acme", 10, &pki.out).unwrap_err();
    assert!(matches!(err, IssueError::AlreadyExists { .. }), "{err}");
}

#[test]
fn issue_developer_rejects_unsafe_publisher_names() {
    let pki = Pki::new();
    for bad in [
        "../escape",
        "a/b",
        ".hidden",
        "-flag",
        "with space",
        "",
        "x\ny",
    ] {
        let err = issue_developer(&pki.ca, bad, 10, &pki.out).unwrap_err();
        assert!(
            matches!(err, IssueError::InvalidName { .. }),
            "{bad:?}: {err}"
        );
    }
    assert!(!pki.out.exists());
}

#[test]
fn issue_rejects_bad_days_and_missing_ca() {
    let pki = Pki::new();
    let err = issue_developer(&pki.ca, "acme", 0, &pki.out).unwrap_err();
    assert!(matches!(err, IssueError::InvalidDays { days: 0 }), "{err}");
    let empty = pki.tmp.path().join("no-ca");
    let err = issue_developer(&empty, "acme", 10, &pki.out).unwrap_err();
    assert!(matches!(err, IssueError::MissingCa { .. }), "{err}");
    assert!(err.to_string().contains("certs init-root"));
}

#[test]
fn errors_never_print_key_material() {
    let pki = Pki::new();
    fs::write(
        pki.ca.join("root.key"),
        "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let err = issue_developer(&pki.ca, "acme", 10, &pki.out).unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("c2VjcmV0"), "{shown}");
}

#[test]
fn revoke_accepts_a_pem_file_and_refuses_garbage() {
    let pki = Pki::new();
    let dev = issue_developer(&pki.ca, "acme", 10, &pki.out).unwrap();
    let fp = revoke(
        &pki.trust,
        dev.cert_path.to_str().unwrap(),
        "left the company",
        &[],
    )
    .unwrap()
    .fingerprint;
    assert_eq!(fp, dev.fingerprint);
    // Idempotent: the first reason stays.
    revoke(&pki.trust, &fp, "again", &[]).unwrap();
    let list = pki.store().revoked();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].reason, "left the company");
    let err = revoke(&pki.trust, "not-a-cert", "x", &[]).unwrap_err();
    assert!(
        matches!(err, IssueError::InvalidCertOrFingerprint { .. }),
        "{err}"
    );
}
