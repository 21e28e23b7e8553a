//! The stamp: a call of an installed skill edited after verification is refused at
//! admission, and the stamp names what changed.

use serde_json::json;
use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::skill::{discover, DiscoveryOptions, LockedSkill, Trust};

use super::*;
use crate::state::Workspace;

/// A workspace with the installed skill `echo` (in the lock) and the local skill
/// `draft`; the catalogue and its stamps.
fn installed(ws: &Path) -> (Catalog, InstalledStamps) {
    installed_with(ws, InstalledStamps::read)
}

/// The workspace of [`installed`], its catalogue, and what `stamp` makes of them.
pub(crate) fn installed_with<T>(
    ws: &Path,
    stamp: impl FnOnce(&Catalog, &TrustPolicy) -> T,
) -> (Catalog, T) {
    let skills = ws.join("skills");
    for name in ["echo", "draft"] {
        let d = skills.join(name);
        std::fs::create_dir_all(d.join("scripts")).unwrap();
        std::fs::write(
            d.join("skill.yaml"),
            format!("name: {name}\ndescription: d\ntools:\n  - name: run\n    description: r\n    command: [\"sh\", \"scripts/run.sh\"]\n"),
        )
        .unwrap();
        std::fs::write(d.join("scripts/run.sh"), "echo '{}'\n").unwrap();
    }
    let mut lock = InstallLock::default();
    lock.skills.insert(
        "echo".into(),
        LockedSkill {
            version: None,
            digest: format!("sha256:{}", "0".repeat(64)),
            trust: Trust::Local,
            publisher: None,
            leaf_fingerprint: None,
            publisher_key: None,
            root_fingerprint: None,
            installed_at: "2026-01-01T00:00:00Z".into(),
            origin: None,
        },
    );
    std::fs::write(
        InstallLock::path(&skills),
        serde_json::to_vec(&lock).unwrap(),
    )
    .unwrap();
    let catalog = discover(std::slice::from_ref(&skills), DiscoveryOptions::default());
    let policy = TrustPolicy::for_workspace(&Workspace::new(ws), false);
    let stamps = stamp(&catalog, &policy);
    (catalog, stamps)
}

#[tokio::test]
async fn call_of_an_installed_skill_edited_after_verification_is_refused_at_admission() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, stamps) = installed(dir.path());
    let dispatcher = crate::calls::test_dispatcher(dir.path(), Catalog::default());
    dispatcher.load().swap(catalog, None, stamps);
    // Unchanged: admitted (it then finds no executor here).
    let r = dispatcher.call_named("echo:run", json!({})).await;
    assert!(
        !r.error
            .clone()
            .unwrap_or_default()
            .contains("files changed"),
        "{r:?}"
    );
    // Edited in place, as an attacker with write access to the skills folder would.
    let script = dir.path().join("skills/echo/scripts/run.sh");
    std::fs::write(&script, "cat /etc/passwd\n").unwrap();
    let r = dispatcher.call_named("echo:run", json!({})).await;
    assert!(!r.success);
    assert_eq!(r.error_kind, Some(ErrorKind::PermissionDenied), "{r:?}");
    let error = r.error.unwrap();
    assert!(error.contains("files changed since install"), "{error}");
    assert!(error.contains("\"scripts/run.sh\" changed"), "{error}");
    assert!(error.contains("reinstall it"), "{error}");
    // A file added is seen too.
    std::fs::write(dir.path().join("skills/echo/extra.sh"), "x").unwrap();
    let e = dispatcher
        .call_named("echo:run", json!({}))
        .await
        .error
        .unwrap();
    assert!(e.contains("files changed since install"), "{e}");
    // A folder that cannot be read any more is refused too, saying so.
    std::fs::rename(
        dir.path().join("skills/echo"),
        dir.path().join("echo-moved"),
    )
    .unwrap();
    let e = dispatcher
        .call_named("echo:run", json!({}))
        .await
        .error
        .unwrap();
    assert!(e.contains("its files cannot be read now"), "{e}");
    // A local skill (not in the lock) may be edited while it runs.
    std::fs::write(dir.path().join("skills/draft/scripts/run.sh"), "echo 1\n").unwrap();
    let r = dispatcher.call_named("draft:run", json!({})).await;
    assert!(
        !r.error
            .clone()
            .unwrap_or_default()
            .contains("files changed"),
        "{r:?}"
    );
}

#[test]
fn stamp_names_what_changed_a_file_removed_or_added() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), "1").unwrap();
    std::fs::write(dir.path().join("b"), "1").unwrap();
    let then = FolderStamp::read(dir.path()).unwrap();
    assert_eq!(
        then.first_change(&FolderStamp::read(dir.path()).unwrap()),
        None
    );
    std::fs::remove_file(dir.path().join("a")).unwrap();
    let now = FolderStamp::read(dir.path()).unwrap();
    let what = then.first_change(&now).unwrap();
    // Removing a file changes the folder first (its times), then names the file.
    assert!(
        what.contains("changed") || what.contains("removed"),
        "{what}"
    );
    let mut only_files = then.clone();
    only_files.0.retain(|e| !e.path.as_os_str().is_empty());
    let mut now_files = now.clone();
    now_files.0.retain(|e| !e.path.as_os_str().is_empty());
    assert_eq!(
        only_files.first_change(&now_files).unwrap(),
        "\"a\" was removed"
    );
    assert_eq!(
        now_files.first_change(&only_files).unwrap(),
        "\"a\" was added"
    );
}
