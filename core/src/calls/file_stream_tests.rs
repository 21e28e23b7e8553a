//! The file stream's judging and bytes, over an in-memory pipe: the file the call was
//! sent comes whole after its size; a wrong token, a path or digest the call was not
//! sent, a call outside a context and a request that is not one line of JSON are each
//! refused on the stream with the reason, and no byte of a file follows.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use skillbox_protocol::skill::{discover, DiscoveryOptions, Skill};
use skillbox_protocol::workdir::{FileStreamHead, FileStreamRequest};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use super::serve;
use crate::calls::workfiles::CallFiles;
use crate::calls::InFlight;
use crate::contexts::files::ContextFiles;
use crate::state::config::files::FilesSection;
use crate::state::store::Store;

const TOKEN: &str = "tok-1";

fn skill(root: &std::path::Path) -> Arc<Skill> {
    let dir = root.join("skills/filey");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("skill.yaml"),
        "name: filey\nversion: 0.1.0\ndescription: Reads files\ntools:\n  - name: go\n    \
         description: Goes\n    command: [\"true\"]\n    security: read\n",
    )
    .unwrap();
    let mut catalog = discover(&[root.join("skills")], DiscoveryOptions::default());
    Arc::new(catalog.skills.remove(0))
}

/// A context `c1` holding `big.bin` (`bytes`), and call `call-1` in it sent that file.
async fn rig(bytes: &[u8]) -> (tempfile::TempDir, InFlight, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Store::db_path(dir.path())).unwrap();
    let files = ContextFiles::new(dir.path(), store, FilesSection::default());
    let body = http_body_util::Full::new(Bytes::copy_from_slice(bytes));
    let (file, _) = files
        .put("c1", "big.bin", body, Duration::from_secs(5))
        .await
        .unwrap();
    let work = files.work_dir("c1").unwrap();
    let call = Arc::new(CallFiles::new(files, "c1", "call-1", &work));
    let in_flight = InFlight::default();
    in_flight.insert_with_files_for_test("call-1", skill(dir.path()), TOKEN, call);
    (dir, in_flight, file.sha256)
}

/// Sends `line` on a stream served for `call_id` presenting `token`; the head and the
/// bytes after it.
async fn ask(
    in_flight: &InFlight,
    call_id: &str,
    token: &str,
    line: &[u8],
) -> (FileStreamHead, Vec<u8>) {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (reading, mut writing) = tokio::io::split(ours);
    let served = serve(in_flight, call_id, token.to_string(), theirs);
    // Written beside the serving: a line longer than the pipe waits for the server.
    let write = async {
        let _ = writing.write_all(line).await;
    };
    let read = async {
        let mut reading = BufReader::new(reading);
        let mut head = Vec::new();
        reading.read_until(b'\n', &mut head).await.unwrap();
        let mut rest = Vec::new();
        reading.read_to_end(&mut rest).await.unwrap();
        (serde_json::from_slice(&head).unwrap(), rest)
    };
    let ((), (), answer) = tokio::join!(served, write, read);
    answer
}

fn request(path: &str, sha256: &str) -> Vec<u8> {
    let mut line = serde_json::to_vec(&FileStreamRequest {
        path: path.into(),
        sha256: sha256.into(),
    })
    .unwrap();
    line.push(b'\n');
    line
}

fn refused(head: &FileStreamHead) -> String {
    match head {
        FileStreamHead::Error(e) => e.message.clone(),
        other => panic!("not refused: {other:?}"),
    }
}

#[tokio::test]
async fn the_file_the_call_was_sent_comes_whole_after_its_size() {
    let bytes: Vec<u8> = (0..3 << 20).map(|i: u32| (i * 7 % 251) as u8).collect();
    let (_dir, in_flight, sha) = rig(&bytes).await;
    let (head, rest) = ask(&in_flight, "call-1", TOKEN, &request("big.bin", &sha)).await;
    assert_eq!(head, FileStreamHead::Bytes { size: 3 << 20 });
    assert!(rest == bytes, "the bytes differ");
}

#[tokio::test]
async fn a_wrong_token_or_an_unknown_call_is_refused_with_no_bytes() {
    let (_dir, in_flight, sha) = rig(b"secret bytes").await;
    for (call, token) in [("call-1", "not-the-token"), ("call-9", TOKEN)] {
        let (head, rest) = ask(&in_flight, call, token, &request("big.bin", &sha)).await;
        let why = refused(&head);
        assert!(!why.is_empty(), "{head:?}");
        assert!(rest.is_empty(), "{call}/{token}: bytes after a refusal");
    }
}

#[tokio::test]
async fn a_path_or_digest_the_call_was_not_sent_is_refused() {
    let (_dir, in_flight, sha) = rig(b"secret bytes").await;
    let other = "0".repeat(64);
    for (path, digest) in [
        ("big.bin", other.as_str()),
        ("../big.bin", sha.as_str()),
        ("other.bin", sha.as_str()),
    ] {
        let (head, rest) = ask(&in_flight, "call-1", TOKEN, &request(path, digest)).await;
        let why = refused(&head);
        assert!(why.contains("was not sent with this call"), "{path}: {why}");
        assert!(rest.is_empty());
    }
}

#[tokio::test]
async fn a_request_that_is_not_one_line_of_json_is_refused() {
    let (_dir, in_flight, _) = rig(b"secret bytes").await;
    let (head, _) = ask(&in_flight, "call-1", TOKEN, b"GET /big.bin\n").await;
    assert!(refused(&head).contains("request line"), "{head:?}");
    let long = vec![b'x'; 70 * 1024];
    let (head, _) = ask(&in_flight, "call-1", TOKEN, &long).await;
    assert!(refused(&head).contains("one line of at most"), "{head:?}");
}
