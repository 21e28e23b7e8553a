//! A context's files: written streamed, read, listed, removed, within their quotas, and
//! never outside the context's folder, whatever the path or a link left in it.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{Full, StreamBody};

use super::*;
use crate::state::store::unix_ms_now;
use skillbox_protocol::result::ErrorKind;

fn files(limits: FilesSection) -> (tempfile::TempDir, ContextFiles) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Store::db_path(dir.path())).unwrap();
    let f = ContextFiles::new(dir.path(), store, limits);
    (dir, f)
}

fn body(bytes: &[u8]) -> Full<Bytes> {
    Full::new(Bytes::copy_from_slice(bytes))
}

const T: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_file_goes_in_and_comes_out_byte_for_byte_and_is_listed() {
    let (_dir, f) = files(FilesSection::default());
    let bytes: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    let (file, new) = f.put("c1", "in/report.bin", body(&bytes), T).await.unwrap();
    assert!(new);
    assert_eq!(file.size, 300_000);
    assert_eq!(file.written_by, "upload");
    let (record, back) = f.get("c1", "in/report.bin").unwrap();
    assert_eq!(back, bytes);
    assert_eq!(record.sha256, file.sha256);
    let (_, new) = f
        .put("c1", "in/report.bin", body(b"short"), T)
        .await
        .unwrap();
    assert!(!new, "a replaced file is not new");
    assert_eq!(f.get("c1", "in/report.bin").unwrap().1, b"short");
    assert_eq!(f.list("c1").unwrap().len(), 1);
    assert!(
        f.list("c2").unwrap().is_empty(),
        "another context sees nothing"
    );
    f.delete("c1", "in/report.bin").unwrap();
    assert!(matches!(
        f.get("c1", "in/report.bin"),
        Err(FileError::NotFound { .. })
    ));
}

#[tokio::test]
async fn paths_that_leave_or_bend_the_folder_are_refused_with_the_rule() {
    let (_dir, f) = files(FilesSection::default());
    for (bad, says) in [
        ("", "empty"),
        ("/etc/passwd", "absolute"),
        ("../x", "`..`"),
        ("a/../../x", "`..`"),
        ("a//b", "empty segment"),
        ("a/", "empty segment"),
        ("./a", "`.`"),
        ("a\nb", "control"),
    ] {
        let err = f.put("c1", bad, body(b"x"), T).await.unwrap_err();
        assert!(matches!(err, FileError::BadPath { .. }), "{bad:?}: {err}");
        assert!(err.to_string().contains(says), "{bad:?}: {err}");
        assert_eq!(err.error_kind(), ErrorKind::InvalidArgs);
    }
}

#[tokio::test]
async fn a_link_left_in_the_folder_is_never_followed_out_of_it() {
    let (dir, f) = files(FilesSection::default());
    f.put("c1", "a.txt", body(b"a"), T).await.unwrap();
    let folder = f.folder("c1");
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "core secret").unwrap();
    std::os::unix::fs::symlink(&secret, folder.join("leak.txt")).unwrap();
    std::os::unix::fs::symlink(dir.path(), folder.join("up")).unwrap();
    f.store
        .put_context_file(
            "c1",
            &ContextFile {
                path: "leak.txt".into(),
                size: 1,
                sha256: String::new(),
                modified: 1,
                written_by: "call".into(),
                executable: false,
            },
        )
        .unwrap();
    let err = f.get("c1", "leak.txt").unwrap_err();
    assert!(matches!(err, FileError::NotAFile { .. }), "{err}");
    let err = f
        .put("c1", "up/planted.txt", body(b"x"), T)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("a link"), "{err}");
    assert!(
        !dir.path().join("planted.txt").exists(),
        "written through the link"
    );
    // Writing a file over the link replaces the link, never its target.
    f.put("c1", "leak.txt", body(b"mine"), T).await.unwrap();
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "core secret");
}

#[tokio::test]
async fn quotas_refuse_a_large_file_too_many_files_and_a_full_context() {
    let limits = FilesSection {
        max_file_bytes: 1000,
        max_total_bytes: 1500,
        max_files: 3,
        idle_days: 7,
    };
    let (_dir, f) = files(limits);
    let err = f.put("c1", "big", body(&[0; 1001]), T).await.unwrap_err();
    assert!(
        matches!(err, FileError::FileTooLarge { limit: 1000 }),
        "{err}"
    );
    // A body without a declared length is cut while it streams.
    let chunks = futures_chunks(5, 300);
    let err = f.put("c1", "big", chunks, T).await.unwrap_err();
    assert!(matches!(err, FileError::FileTooLarge { .. }), "{err}");
    f.put("c1", "a", body(&[0; 800]), T).await.unwrap();
    let err = f.put("c1", "b", body(&[0; 800]), T).await.unwrap_err();
    assert!(matches!(err, FileError::OverQuota { .. }), "{err}");
    f.put("c1", "b", body(b"1"), T).await.unwrap();
    f.put("c1", "c", body(b"1"), T).await.unwrap();
    let err = f.put("c1", "d", body(b"1"), T).await.unwrap_err();
    assert!(
        matches!(err, FileError::TooManyFiles { limit: 3, .. }),
        "{err}"
    );
    // Replacing a file is within the count; nothing half-written is left behind.
    f.put("c1", "c", body(b"22"), T).await.unwrap();
    let names: Vec<String> = std::fs::read_dir(f.folder("c1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with(".upload-")),
        "{names:?}"
    );
}

/// A stream of body frames.
type Frames = futures_util::stream::Iter<
    std::vec::IntoIter<Result<hyper::body::Frame<Bytes>, std::convert::Infallible>>,
>;

/// A body of `n` chunks of `size` bytes with no declared length.
fn futures_chunks(n: usize, size: usize) -> StreamBody<Frames> {
    let frames: Vec<_> = (0..n)
        .map(|_| Ok(hyper::body::Frame::data(Bytes::from(vec![1u8; size]))))
        .collect();
    StreamBody::new(futures_util::stream::iter(frames))
}

#[tokio::test]
async fn a_deleted_context_and_an_idle_one_lose_their_files() {
    let (_dir, f) = files(FilesSection::default());
    f.put("c1", "a", body(b"1"), T).await.unwrap();
    f.put("c2", "a", body(b"1"), T).await.unwrap();
    f.delete_context("c1").unwrap();
    assert!(!f.folder("c1").exists());
    assert!(f.list("c1").unwrap().is_empty());
    let week = 8 * 86_400_000;
    assert_eq!(f.expire_idle(unix_ms_now() + week).unwrap(), ["c2"]);
    assert!(!f.folder("c2").exists());
}

/// A name that shows operators another name than the file's: a bidi override
/// (`invoice\u{202E}fdp.exe` reads "invoiceexe.pdf"), zero-width and other Unicode format
/// characters (general category Cf) are refused by the one check of a path, for every
/// route and a call's files alike; other non-ASCII names are kept.
#[tokio::test]
async fn file_name_with_a_bidi_override_or_another_format_character_is_refused() {
    let (_dir, f) = files(FilesSection::default());
    for c in [
        '\u{202E}',
        '\u{202A}',
        '\u{200B}',
        '\u{200C}',
        '\u{200D}',
        '\u{200E}',
        '\u{200F}',
        '\u{2066}',
        '\u{2069}',
        '\u{2060}',
        '\u{FEFF}',
        '\u{00AD}',
        '\u{061C}',
        '\u{E0001}',
    ] {
        let bad = format!("in/invoice{c}fdp.exe");
        let err = f.put("c1", &bad, body(b"x"), T).await.unwrap_err();
        assert!(matches!(err, FileError::BadPath { .. }), "{c:?}: {err}");
        assert!(
            err.to_string().contains("Unicode format character"),
            "{c:?}: {err}"
        );
        assert_eq!(err.error_kind(), ErrorKind::InvalidArgs);
        assert!(matches!(f.get("c1", &bad), Err(FileError::BadPath { .. })));
    }
    assert!(f.list("c1").unwrap().is_empty());
    f.put("c1", "отчёт/résumé 日本.txt", body(b"ok"), T)
        .await
        .unwrap();
}

/// An upload whose body breaks after some batches (the connection closed mid-body)
/// leaves the file it would have replaced as it was, and no temporary file.
#[tokio::test]
async fn an_upload_broken_mid_body_leaves_the_old_file_and_no_temporary_file() {
    let (_dir, f) = files(FilesSection::default());
    let (old, _) = f.put("c1", "a.bin", body(b"old"), T).await.unwrap();
    let mut frames: Vec<Result<hyper::body::Frame<Bytes>, String>> = (0..100)
        .map(|_| Ok(hyper::body::Frame::data(Bytes::from(vec![9u8; 32 * 1024]))))
        .collect();
    frames.push(Err("connection closed before message completed".to_string()));
    let broken = StreamBody::new(futures_util::stream::iter(frames));
    let err = f.put("c1", "a.bin", broken, T).await.unwrap_err();
    assert!(matches!(err, FileError::Broken(_)), "{err}");
    let (record, bytes) = f.get("c1", "a.bin").unwrap();
    assert_eq!((bytes.as_slice(), record.sha256), (&b"old"[..], old.sha256));
    let names: Vec<String> = std::fs::read_dir(f.folder("c1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["a.bin"]);
}

/// A download reads the version it opened, whole, with that version's record (its
/// `ETag`), even when a `PUT` of the same size replaces the file meanwhile.
#[tokio::test]
async fn a_file_opened_before_a_put_replaces_it_reads_as_the_version_opened() {
    let (_dir, f) = files(FilesSection::default());
    let v1 = vec![1u8; 3 << 20];
    f.put("c1", "a.bin", body(&v1), T).await.unwrap();
    let opened = f.open("c1", "a.bin").unwrap();
    let (v2, _) = f
        .put("c1", "a.bin", body(&[2u8; 3 << 20]), T)
        .await
        .unwrap();
    let mut back = Vec::new();
    std::io::Read::read_to_end(&mut &opened.file, &mut back).unwrap();
    assert!(back == v1, "the open file changed");
    assert_eq!(
        opened.record.sha256,
        hex(ring::digest::digest(&SHA256, &v1))
    );
    assert_ne!(opened.record.sha256, v2.sha256);
    assert_eq!(f.open("c1", "a.bin").unwrap().record.sha256, v2.sha256);
}

/// The list a call may take from reads alone is the one kept at the database's version:
/// none before the list was read, none once a file changed (the next read lists it).
#[tokio::test]
async fn the_list_held_for_the_gate_is_never_older_than_the_database() {
    let (_dir, f) = files(FilesSection::default());
    let held = |f: &ContextFiles| {
        let conn = f.store.if_free().expect("nobody holds the connection");
        f.held_work_dir(&conn, "c1").map(|w| w.files)
    };
    f.put("c1", "a.txt", body(b"a"), T).await.unwrap();
    assert!(held(&f).is_none(), "nothing was read yet");
    let read = f.work_dir("c1").unwrap().files;
    let kept = held(&f).expect("the list just read");
    assert!(Arc::ptr_eq(&kept, &read));
    f.put("c1", "b.txt", body(b"b"), T).await.unwrap();
    assert!(held(&f).is_none(), "a list from before b.txt was offered");
    assert_eq!(f.work_dir("c1").unwrap().files.len(), 2);
    assert_eq!(held(&f).expect("read again").len(), 2);
}
