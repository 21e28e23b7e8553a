//! A context's files by role: raw bytes past the JSON body limit for the bot that uses
//! the context, 404 on every file route for another bot, and MCP's `resources/read` of a
//! file within its size cap.

use http::{Method, StatusCode};
use serde_json::{json, Value};

use super::fixture;

#[tokio::test]
async fn a_contexts_files_go_in_and_out_raw_past_the_json_limit_and_only_for_their_bot() {
    let f = fixture(false);
    let a = f.bot("bot-a", None);
    let b = f.bot("bot-b", None);
    // Twice the gateway's JSON body limit of this fixture (64 KiB), as raw bytes.
    let bytes: Vec<u8> = (0..=255u8).cycle().take(128 * 1024).collect();
    let path = "/v1/contexts/job-1/files/in/data.bin";
    let (status, _, answer) = f.send_raw(&a, Method::PUT, path, bytes.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{answer:?}");
    let put: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(put["size"], 128 * 1024);
    let (status, headers, got) = f.send_raw(&a, Method::GET, path, Vec::new()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got.as_ref(), bytes.as_slice());
    assert_eq!(
        headers[http::header::ETAG],
        format!("\"{}\"", put["sha256"].as_str().unwrap())
    );
    let (status, _, again) = f.send_raw(&a, Method::PUT, path, b"v2".to_vec()).await;
    assert_eq!(status, StatusCode::OK, "replaced: {again:?}");
    let (_, listed) = f
        .send(&a, Method::GET, "/v1/contexts/job-1/files", None)
        .await;
    assert_eq!(listed["files"][0]["path"], "in/data.bin", "{listed}");
    assert_eq!(listed["files"][0]["written_by"], "upload", "{listed}");
    // Bot B: 404 on every file route of bot A's context, and nothing changed.
    for (method, p) in [
        (Method::GET, path),
        (Method::PUT, path),
        (Method::DELETE, path),
        (Method::GET, "/v1/contexts/job-1/files"),
        (Method::DELETE, "/v1/contexts/job-1"),
    ] {
        let (status, _, body) = f.send_raw(&b, method.clone(), p, b"x".to_vec()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {p}: {body:?}");
    }
    let (_, _, still) = f.send_raw(&a, Method::GET, path, Vec::new()).await;
    assert_eq!(still.as_ref(), b"v2");
    // A path that leaves the folder is refused with the rule.
    let (status, _, body) = f
        .send_raw(
            &a,
            Method::PUT,
            "/v1/contexts/job-1/files/a/../../x",
            b"x".to_vec(),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}");
    assert!(String::from_utf8_lossy(&body).contains("`..`"), "{body:?}");
    // So is a name with a bidi override, which would show operators another name.
    let (status, _, body) = f
        .send_raw(
            &a,
            Method::PUT,
            "/v1/contexts/job-1/files/invoice\u{202E}fdp.exe",
            b"x".to_vec(),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}");
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["error_kind"], "invalid_args", "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("Unicode format character"),
        "{answer}"
    );
    // The owner deletes one file, then the context whole.
    let (status, _, _) = f.send_raw(&a, Method::DELETE, path, Vec::new()).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _, _) = f.send_raw(&a, Method::GET, path, Vec::new()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    f.send_raw(&a, Method::PUT, path, b"v3".to_vec()).await;
    let (status, _, _) = f
        .send_raw(&a, Method::DELETE, "/v1/contexts/job-1", Vec::new())
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, listed) = f
        .send(&a, Method::GET, "/v1/contexts/job-1/files", None)
        .await;
    assert_eq!(listed["files"], json!([]), "{listed}");
}

#[tokio::test]
async fn mcp_reads_a_contexts_file_as_a_resource_for_its_bot_only() {
    let f = fixture(false);
    let a = f.bot("bot-a", None);
    let b = f.bot("bot-b", None);
    let path = "/v1/contexts/job-2/files/out/result.csv";
    let (status, _, _) = f
        .send_raw(&a, Method::PUT, path, b"n,total\n1,42\n".to_vec())
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let read = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
        "params": {"uri": "skillbox://contexts/job-2/files/out/result.csv"}});
    let (_, r) = f.send(&a, Method::POST, "/mcp", Some(read.clone())).await;
    let content = &r["result"]["contents"][0];
    assert_eq!(content["text"], "n,total\n1,42\n", "{r}");
    assert_eq!(content["mimeType"], "text/csv; charset=utf-8", "{r}");
    let (_, r) = f.send(&b, Method::POST, "/mcp", Some(read)).await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown resource"),
        "bot B read bot A's file: {r}"
    );
}

/// A name a uri escapes (a space, `#`, `%`, a Chinese character) put over REST as
/// `%`-escapes is read back over MCP under the escaped uri (as `resource_link`s carry it)
/// and under the raw one older clients wrote; the name itself never holds the escapes.
#[tokio::test]
async fn mcp_reads_a_percent_escaped_file_name_put_over_rest() {
    let f = fixture(false);
    let a = f.bot("bot-a", None);
    let name = "out/my file#1 100%报告.txt";
    let escaped = crate::gateway::web::pct::encode_path(name);
    assert_ne!(escaped, name);
    let path = format!("/v1/contexts/job-4/files/{escaped}");
    let (status, _, _) = f
        .send_raw(&a, Method::PUT, &path, b"escaped".to_vec())
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, listed) = f
        .send(&a, Method::GET, "/v1/contexts/job-4/files", None)
        .await;
    assert_eq!(listed["files"][0]["path"], name, "{listed}");
    let uri = format!("skillbox://contexts/job-4/files/{escaped}");
    for asked in [uri, format!("skillbox://contexts/job-4/files/{name}")] {
        let read = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
            "params": {"uri": asked}});
        let (_, r) = f.send(&a, Method::POST, "/mcp", Some(read)).await;
        assert_eq!(
            r["result"]["contents"][0]["text"], "escaped",
            "{asked}: {r}"
        );
    }
    let literal = "skillbox://contexts/job-4/files/out/my%2520file.txt";
    let read = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
        "params": {"uri": literal}});
    let (_, r) = f.send(&a, Method::POST, "/mcp", Some(read)).await;
    assert!(r["error"].is_object(), "a double escape read a file: {r}");
}

#[tokio::test]
async fn mcp_refuses_a_context_file_over_its_size_cap_naming_the_rest_route() {
    let f = fixture(false);
    let a = f.bot("bot-a", None);
    let big = vec![b'x'; f.gw.calls.load.config().mcp.max_resource_bytes + 1];
    let (status, _, _) = f
        .send_raw(&a, Method::PUT, "/v1/contexts/job-3/files/big.txt", big)
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let read = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
        "params": {"uri": "skillbox://contexts/job-3/files/big.txt"}});
    let (_, r) = f.send(&a, Method::POST, "/mcp", Some(read)).await;
    let said = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("over the") && said.contains("/v1/contexts/"),
        "{r}"
    );
}

/// A `GET` racing a `PUT` of the same file answers one version: that version's bytes
/// with that version's `ETag`, never one's bytes under the other's tag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_racing_a_put_never_answers_one_versions_bytes_with_anothers_etag() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let f = fixture(false);
    let a = f.bot("bot-a", None);
    let path = "/v1/contexts/job-1/files/race.bin";
    let versions = [vec![b'a'; 64 * 1024], vec![b'b'; 96 * 1024]];
    let (status, _, _) = f.send_raw(&a, Method::PUT, path, versions[0].clone()).await;
    assert_eq!(status, StatusCode::CREATED);
    let done = AtomicBool::new(false);
    let puts = async {
        for i in 0..300 {
            let (status, _, body) = f
                .send_raw(&a, Method::PUT, path, versions[i % 2].clone())
                .await;
            assert_eq!(status, StatusCode::OK, "{body:?}");
        }
        done.store(true, Ordering::SeqCst);
    };
    let gets = async {
        let mut seen = 0;
        while !done.load(Ordering::SeqCst) {
            let (status, headers, body) = f.send_raw(&a, Method::GET, path, Vec::new()).await;
            assert_eq!(status, StatusCode::OK, "{body:?}");
            let digest = ring::digest::digest(&ring::digest::SHA256, &body);
            let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(
                headers[http::header::ETAG],
                format!("\"{hex}\""),
                "GET {seen}: {} bytes of {:?} under another version's tag",
                body.len(),
                body.first().map(|b| *b as char)
            );
            seen += 1;
        }
        seen
    };
    let ((), seen) = tokio::join!(puts, gets);
    assert!(seen > 10, "only {seen} GETs raced the PUTs");
}
