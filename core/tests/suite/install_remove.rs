//! Removing installed skills (`DELETE /v1/skills/{name}`): the folder and its lock entry go
//! together, other skills stay, and unknown, invalid or unmanaged names are refused with
//! nothing changed.

use skillbox_core::skills::install::remove::{remove, RemoveError};
use skillbox_protocol::result::ErrorKind;

use super::harness::{write_skill, Workspace};

#[test]
fn remove_drops_folder_and_lock_entry_and_keeps_the_others() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("alpha", "1.0.0", "")).unwrap();
    ws.install(&ws.signed_skill("beta", "2.0.0", "")).unwrap();
    let alpha_entry = ws.lock().get("alpha").cloned().unwrap();

    let removed = remove(&ws.policy, "alpha").unwrap();
    assert_eq!(removed.name, "alpha");
    assert_eq!(removed.entry, alpha_entry);
    assert!(!removed.folder_was_missing);
    assert_eq!(ws.root_names(), [".skillbox-lock.json", "beta"]);
    let lock = ws.lock();
    assert!(lock.get("alpha").is_none());
    assert!(lock.get("beta").is_some());

    // Installable again afterwards, even at a lower version (nothing to roll back from).
    ws.install(&ws.signed_skill("alpha", "0.9.0", "again"))
        .unwrap();
    assert_eq!(
        ws.lock().get("alpha").unwrap().version.as_deref(),
        Some("0.9.0")
    );
}

#[test]
fn remove_of_a_locked_skill_whose_folder_is_gone_drops_the_entry() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("ghost", "1.0.0", "")).unwrap();
    std::fs::remove_dir_all(ws.root().join("ghost")).unwrap();
    let removed = remove(&ws.policy, "ghost").unwrap();
    assert!(removed.folder_was_missing);
    assert!(ws.lock().get("ghost").is_none());
    assert_eq!(ws.root_names(), [".skillbox-lock.json"]);
}

fn refused(ws: &Workspace, name: &str, check: &str, kind: ErrorKind) -> RemoveError {
    let lock = ws.lock_bytes();
    let names = ws.root_names();
    let err = remove(&ws.policy, name).expect_err("the removal should be refused");
    assert_eq!(err.check(), check, "refused for another reason: {err}");
    assert_eq!(err.error_kind(), kind, "{err}");
    ws.assert_untouched(&lock, &names);
    err
}

#[test]
fn remove_refuses_unknown_name_with_not_found() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("alpha", "1.0.0", "")).unwrap();
    let err = refused(&ws, "nobody", "not_installed", ErrorKind::NotFound);
    assert!(
        err.to_string().contains("no skill named \"nobody\""),
        "{err}"
    );
}

#[test]
fn remove_refuses_path_traversal_names() {
    let ws = Workspace::new(true);
    ws.install(&ws.signed_skill("alpha", "1.0.0", "")).unwrap();
    for name in [
        "..",
        ".",
        "",
        "../skills",
        ".skillbox-lock.json",
        "a/b",
        "Alpha",
    ] {
        let err = refused(&ws, name, "not_installed", ErrorKind::NotFound);
        assert!(
            err.to_string().contains("not a skill name"),
            "{name}: {err}"
        );
    }
    assert!(ws.path().join("skills").is_dir());
}

#[test]
fn remove_refuses_a_folder_skillbox_did_not_install() {
    let ws = Workspace::new(false);
    ws.install(&ws.signed_skill("alpha", "1.0.0", "")).unwrap();
    write_skill(&ws.root().join("handmade"), "handmade", "1.0.0", "");
    let err = refused(&ws, "handmade", "unmanaged", ErrorKind::PermissionDenied);
    assert!(
        err.to_string().contains("remove the folder yourself"),
        "{err}"
    );
    assert!(ws.root().join("handmade/skill.yaml").is_file());
}

#[test]
fn remove_with_no_skills_root_is_not_found() {
    let ws = Workspace::new(true);
    std::fs::remove_dir_all(ws.root()).unwrap();
    let err = remove(&ws.policy, "alpha").unwrap_err();
    assert_eq!(err.check(), "not_installed");
    assert!(!ws.root().exists(), "the skills root was not created");
}
