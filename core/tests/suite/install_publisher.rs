//! An installed signed skill is bound to its publisher: another trusted publisher cannot
//! replace it, even with a higher version, unless the operator allows the change. And a
//! refused install leaves nothing behind, not even the skills folder it had to create.

use std::path::{Path, PathBuf};

use skillbox_core::skills::install::PublisherChange;
use skillbox_protocol::skill::Trust;

use super::harness::{write_skill, Workspace};

/// A developer certificate for `publisher` issued by the CA in `ca`; (chain, key).
fn developer(ws: &Workspace, ca: &Path, publisher: &str, out: &str) -> (PathBuf, PathBuf) {
    let issued = skillbox_certs::issue_developer(ca, publisher, 30, &ws.path().join(out)).unwrap();
    (issued.cert_path, issued.key_path)
}

/// `name` at `version` signed with `cert`/`key`.
fn signed_by(ws: &Workspace, name: &str, version: &str, cert: &Path, key: &Path) -> PathBuf {
    let dir = ws.scratch(&format!(
        "{name}-{version}-{}",
        cert.display().to_string().len()
    ));
    write_skill(&dir, name, version, version);
    ws.sign_with(&dir, name, version, cert, key);
    dir
}

#[test]
fn install_refuses_higher_version_from_another_trusted_publisher() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("wallet", "1.0.0", "")).unwrap();
    let (cert, key) = developer(&ws, &ws.ca, "mallory", "mallory");
    let hijack = signed_by(&ws, "wallet", "9.0.0", &cert, &key);
    let err = ws.refused(&hijack, "publisher");
    let msg = err.to_string();
    assert!(msg.starts_with("publisher: "), "{msg}");
    assert!(
        msg.contains("\"acme-skills\""),
        "installed publisher not named: {msg}"
    );
    assert!(
        msg.contains("\"mallory\""),
        "offered publisher not named: {msg}"
    );
    assert!(
        msg.contains("--allow-publisher-change"),
        "no way out named: {msg}"
    );
    assert_eq!(
        err.error_kind(),
        skillbox_protocol::result::ErrorKind::PermissionDenied
    );
    assert_eq!(
        ws.lock().get("wallet").unwrap().version.as_deref(),
        Some("1.0.0")
    );
}

#[test]
fn install_refuses_same_publisher_name_under_another_trusted_root() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("wallet", "1.0.0", "")).unwrap();
    // A second operator's root, also trusted, issues a certificate with the same name.
    let other_ca = ws.path().join("other-ca");
    skillbox_certs::init_root(&other_ca, &ws.policy.trust_dir, "other root", 30).unwrap();
    let (cert, key) = developer(&ws, &other_ca, "acme-skills", "lookalike");
    let err = ws.refused(&signed_by(&ws, "wallet", "2.0.0", &cert, &key), "publisher");
    assert!(err.to_string().contains("root"), "{err}");
}

#[test]
fn install_accepts_upgrades_from_the_same_publisher() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("wallet", "1.0.0", "")).unwrap();
    let entry = ws.lock().get("wallet").cloned().unwrap();
    assert!(entry.publisher_key.is_some(), "{entry:?}");
    // Same key.
    ws.install(&ws.signed_skill("wallet", "1.1.0", "")).unwrap();
    // A new certificate (new key) for the same publisher name under the same root.
    let (cert, key) = developer(&ws, &ws.ca, "acme-skills", "reissued");
    let done = ws
        .install(&signed_by(&ws, "wallet", "1.2.0", &cert, &key))
        .unwrap();
    assert_ne!(done.entry.publisher_key, entry.publisher_key);
    // And under the root it rotated to (the operator's rotation workflow).
    skillbox_certs::rotate_root(&ws.ca, &ws.policy.trust_dir, 30).unwrap();
    let (cert, key) = developer(&ws, &ws.ca, "acme-skills", "rotated");
    let done = ws
        .install(&signed_by(&ws, "wallet", "1.3.0", &cert, &key))
        .unwrap();
    assert_ne!(done.entry.root_fingerprint, entry.root_fingerprint);
    assert_eq!(done.replaced.as_deref(), Some("1.2.0"));
}

#[test]
fn allow_publisher_change_lets_another_publisher_replace_the_skill() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("wallet", "1.0.0", "")).unwrap();
    let (cert, key) = developer(&ws, &ws.ca, "new-owner", "new-owner");
    let pkg = signed_by(&ws, "wallet", "2.0.0", &cert, &key);
    let done = ws.install_allowing(&pkg, PublisherChange::Allow).unwrap();
    assert_eq!(done.entry.publisher.as_deref(), Some("new-owner"));
    assert_eq!(done.replaced.as_deref(), Some("1.0.0"));
    // From now on the skill is bound to the new publisher.
    ws.refused(&ws.signed_skill("wallet", "3.0.0", ""), "publisher");
}

#[test]
fn publisher_binding_does_not_apply_to_unsigned_installed_skills() {
    let ws = Workspace::new(false);
    let plain = ws.scratch("plain");
    write_skill(&plain, "plain", "1.0.0", "");
    assert_eq!(ws.install(&plain).unwrap().entry.trust, Trust::Local);
    ws.install(&ws.signed_skill("plain", "1.1.0", "")).unwrap();
}

#[test]
fn refused_install_leaves_no_skills_folder_behind() {
    let ws = Workspace::new(true);
    std::fs::remove_dir(ws.root()).unwrap();
    let plain = ws.scratch("plain");
    write_skill(&plain, "plain", "1.0.0", "");
    let err = ws.install(&plain).unwrap_err();
    assert_eq!(err.check(), "unsigned", "{err}");
    assert!(
        !ws.root().exists(),
        "the refused install left {} behind",
        ws.root().display()
    );
    // Refused at verification (tampered after signing): still nothing.
    let tampered = ws.signed_skill("tampered", "1.0.0", "");
    std::fs::write(tampered.join("scripts/run.sh"), "#!/bin/sh\necho evil\n").unwrap();
    assert_eq!(ws.install(&tampered).unwrap_err().check(), "digest");
    assert!(!ws.root().exists());
    // Control: an accepted install creates it.
    ws.install(&ws.signed_skill("fine", "1.0.0", "")).unwrap();
    assert!(ws.root().join("fine").is_dir());
}
