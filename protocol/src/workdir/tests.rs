//! The work dir's wire form: the list encoded once, named by its digest, withheld.

use super::*;
use serde_json::json;

/// The list encoded once is what the `Vec` encodes to, every time it is written, in a
/// request line or a JSON tree.
#[test]
fn a_file_list_is_encoded_once_as_its_vec_is() {
    let file = |i: u32| WorkFile {
        path: format!("d/f{i}"),
        size: u64::from(i),
        sha256: format!("{i:064x}"),
        executable: i % 2 == 0,
    };
    let files: Vec<WorkFile> = (0..3).map(file).collect();
    let list = FileList::new(files.clone());
    let want = serde_json::to_string(&files).unwrap();
    assert_eq!(serde_json::to_string(&list).unwrap(), want);
    assert_eq!(
        serde_json::to_string(&list).unwrap(),
        want,
        "from its kept text"
    );
    assert_eq!(
        serde_json::to_value(&list).unwrap(),
        serde_json::to_value(&files).unwrap()
    );
    let back: FileList = serde_json::from_str(&want).unwrap();
    assert_eq!(back, list);
    assert_eq!(*back, files);
}

#[test]
fn a_work_dir_travels_as_json_and_refuses_unknown_fields() {
    let w = WorkDir {
        files: Arc::new(FileList::new(vec![WorkFile {
            path: "in/a.pdf".into(),
            size: 3,
            sha256: "ab".into(),
            executable: false,
        }])),
        max_file_bytes: 10,
        max_total_bytes: 20,
        max_files: 2,
        context_id: Some("c1".into()),
        list_sha256: None,
        list_withheld: false,
    };
    let v = serde_json::to_value(&w).unwrap();
    let back = serde_json::from_value::<WorkDir>(v.clone()).unwrap();
    assert_eq!(back.list_sha256.as_deref(), Some(w.files.sha256().unwrap()));
    assert_eq!(
        WorkDir {
            list_sha256: None,
            ..back
        },
        w
    );
    let bad = json!({"path": "a", "size": 1, "sha256": "x", "mode": 7});
    assert!(serde_json::from_value::<WorkFile>(bad).is_err());
    // The exec bit travels only when set.
    assert!(!v.to_string().contains("executable"));
    let script = json!({"path": "run.sh", "size": 1, "sha256": "x", "executable": true});
    assert!(
        serde_json::from_value::<WorkFile>(script)
            .unwrap()
            .executable
    );
}

fn work_dir(context_id: Option<&str>, files: usize) -> WorkDir {
    let file = |i: usize| WorkFile {
        path: format!("f{i}"),
        size: 1,
        sha256: "ab".repeat(32),
        executable: false,
    };
    WorkDir {
        files: Arc::new((0..files).map(file).collect()),
        max_file_bytes: 1,
        max_total_bytes: 2,
        max_files: 3,
        context_id: context_id.map(str::to_string),
        ..WorkDir::default()
    }
}

/// A list is named by the SHA-256 of its JSON text.
#[test]
fn a_file_list_is_named_by_the_sha256_of_its_text() {
    let empty = FileList::default();
    assert_eq!(empty.json().unwrap().get(), "[]");
    assert_eq!(
        empty.sha256().unwrap(),
        "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
    );
    let (one, two) = (work_dir(None, 1).files, work_dir(None, 2).files);
    assert_ne!(one.sha256().unwrap(), two.sha256().unwrap());
    assert_eq!(
        one.sha256().unwrap(),
        work_dir(None, 1).files.sha256().unwrap()
    );
}

/// The first call carries the list whole; once one did, a call in a context carries its
/// digest alone, read back as a list still to be found; the core can send it whole again.
#[test]
fn a_list_sent_once_travels_as_its_digest_alone() {
    let mut first = work_dir(Some("c1"), 2);
    assert!(!first.withhold_list_if_sent(), "never sent: whole");
    let text = serde_json::to_string(&first).unwrap();
    assert!(text.contains("\"files\":[") && text.contains("list_sha256"));
    let mut later = WorkDir {
        files: Arc::clone(&first.files),
        ..first.clone()
    };
    assert!(later.withhold_list_if_sent());
    let v = serde_json::to_value(&later).unwrap();
    assert!(v.get("files").is_none(), "{v}");
    let read: WorkDir = serde_json::from_value(v).unwrap();
    assert!(read.list_withheld && read.files.is_empty());
    assert_eq!(
        read.list_sha256.as_deref(),
        Some(first.files.sha256().unwrap())
    );
    later.send_list_whole();
    let whole: WorkDir = serde_json::from_str(&serde_json::to_string(&later).unwrap()).unwrap();
    assert!(!whole.list_withheld);
    assert_eq!(whole.files.len(), 2);
}

/// Outside a context the list always travels whole and unnamed (nothing keeps it).
#[test]
fn outside_a_context_the_list_is_never_withheld() {
    let mut w = work_dir(None, 1);
    w.files.mark_sent();
    assert!(!w.withhold_list_if_sent());
    let v = serde_json::to_value(&w).unwrap();
    assert!(
        v.get("list_sha256").is_none() && v.get("files").is_some(),
        "{v}"
    );
}

/// A work dir read without its list needs the digest and the context to find it by.
#[test]
fn a_work_dir_without_files_needs_a_digest_and_a_context() {
    let limits = json!({"max_file_bytes": 1, "max_total_bytes": 1, "max_files": 1});
    let mut no_list = limits.clone();
    no_list["context_id"] = json!("c1");
    assert!(serde_json::from_value::<WorkDir>(no_list).is_err());
    let mut no_context = limits.clone();
    no_context["list_sha256"] = json!("ab");
    assert!(serde_json::from_value::<WorkDir>(no_context).is_err());
    let mut named = limits;
    named["list_sha256"] = json!("ab");
    named["context_id"] = json!("c1");
    assert!(
        serde_json::from_value::<WorkDir>(named)
            .unwrap()
            .list_withheld
    );
}
