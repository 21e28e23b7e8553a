//! A context's large file over raw HTTP under `skillbox up` (issue 42): 20 MiB of random
//! bytes go up streamed and come down streamed byte for byte with the `ETag` of their
//! SHA-256, and an upload cut off mid-body leaves the file it would have replaced as it
//! was, no new file, and no temporary file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use crate::harness::{poll, Options, Skillbox};

/// The context of these tests.
const CONTEXT: &str = "transfer-1";
/// The size of the file sent: past any buffer of the gateway, under the 64 MiB default
/// `[files] max_file_bytes`.
const SIZE: usize = 20 << 20;

/// The request head of `method` on the context's file `name`.
fn head(sb: &Skillbox, method: &str, name: &str, length: Option<usize>) -> String {
    let length = length.map_or(String::new(), |n| format!("Content-Length: {n}\r\n"));
    format!(
        "{method} /v1/contexts/{CONTEXT}/files/{name} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n{length}Connection: close\r\n\r\n",
        sb.addr, sb.token
    )
}

/// `PUT` of `bytes` as `name`; the status line and body of the answer.
fn put(sb: &Skillbox, name: &str, bytes: &[u8]) -> (String, String) {
    let mut s = TcpStream::connect(&sb.addr).unwrap();
    s.write_all(head(sb, "PUT", name, Some(bytes.len())).as_bytes())
        .unwrap();
    s.write_all(bytes).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// `GET` of `name`: the status line, the headers (names in lowercase) and the body.
fn get(sb: &Skillbox, name: &str) -> (String, Vec<(String, String)>, Vec<u8>) {
    let mut s = TcpStream::connect(&sb.addr).unwrap();
    s.write_all(head(sb, "GET", name, None).as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let mut status = String::new();
    r.read_line(&mut status).unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let Some((name, value)) = line.trim_end().split_once(':') else {
            break;
        };
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    let mut body = Vec::new();
    r.read_to_end(&mut body).unwrap();
    (status.trim_end().to_string(), headers, body)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    (headers.iter())
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

fn sha256_hex(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The context's folder on the core: `<state>/contexts/<sha256 of the id>/`.
fn folder(sb: &Skillbox) -> PathBuf {
    sb.state()
        .join("contexts")
        .join(sha256_hex(CONTEXT.as_bytes()))
}

/// The names in the context's folder.
fn names(sb: &Skillbox) -> Vec<String> {
    std::fs::read_dir(folder(sb))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(n);
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .take(n as u64)
        .read_to_end(&mut bytes)
        .unwrap();
    bytes
}

#[test]
fn large_file_round_trips_byte_for_byte_and_a_cut_off_upload_leaves_nothing() {
    let sb = Skillbox::start(Options::default());
    let bytes = random_bytes(SIZE);
    let sha = sha256_hex(&bytes);
    let (status, answer) = put(&sb, "big.bin", &bytes);
    assert_eq!(status, "HTTP/1.1 201 Created", "{answer}");
    let put: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        (put["size"].as_u64(), put["sha256"].as_str()),
        (Some(SIZE as u64), Some(sha.as_str()))
    );

    let (status, headers, body) = get(&sb, "big.bin");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        header(&headers, "content-length"),
        Some(SIZE.to_string().as_str())
    );
    assert_eq!(
        header(&headers, "etag"),
        Some(format!("\"{sha}\"").as_str())
    );
    assert_eq!(
        header(&headers, "content-type"),
        Some("application/octet-stream")
    );
    assert!(
        body == bytes,
        "the download differs from the upload ({} bytes)",
        body.len()
    );

    // A new version of it cut off after 5 MiB of 20, then a new file cut off likewise:
    // each connection closed once its upload is being written.
    for name in ["big.bin", "cut.bin"] {
        let mut s = TcpStream::connect(&sb.addr).unwrap();
        s.write_all(head(&sb, "PUT", name, Some(SIZE)).as_bytes())
            .unwrap();
        s.write_all(&random_bytes(5 << 20)).unwrap();
        poll(
            "the upload's temporary file",
            Duration::from_secs(20),
            || {
                names(&sb)
                    .iter()
                    .any(|n| n.starts_with(".upload-"))
                    .then_some(())
            },
        );
        drop(s);
        poll(
            "the cut-off upload's temporary file to go",
            Duration::from_secs(20),
            || (!names(&sb).iter().any(|n| n.starts_with(".upload-"))).then_some(()),
        );
    }
    let left = names(&sb);
    assert_eq!(left, ["big.bin"], "only the whole file is there");
    let (status, headers, body) = get(&sb, "big.bin");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        header(&headers, "etag"),
        Some(format!("\"{sha}\"").as_str())
    );
    assert!(body == bytes, "the file changed by a cut-off upload");
    let (status, _, body) = get(&sb, "cut.bin");
    assert_eq!(
        status,
        "HTTP/1.1 404 Not Found",
        "{}",
        String::from_utf8_lossy(&body)
    );
    let listed = sb
        .request("GET", &format!("/v1/contexts/{CONTEXT}/files"), None)
        .json();
    assert_eq!(
        listed["files"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    assert_eq!(listed["files"][0]["sha256"], sha.as_str(), "{listed}");
}
