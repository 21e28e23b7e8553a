//! A local HTTP server on 127.0.0.1 that fetch calls target. It records every request
//! path it receives (so a test can prove a refused fetch never connected) and serves:
//!
//! - `/hello`: 200 `hello from the test server`
//! - `/big`: 200 with a body of [`BIG_BYTES`] and its `Content-Length`
//! - `/big-stream`: 200 with a body of [`BIG_BYTES`], no length, ended by closing
//! - `/redirect?to=URL`: 302 to `URL`
//! - anything else: 404

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The body of `/hello`.
pub const HELLO: &str = "hello from the test server";
/// The size of the `/big` bodies: larger than the configured fetch limit.
pub const BIG_BYTES: usize = 64 * 1024;

/// A running test server; its thread lives as long as the test process.
#[derive(Debug, Clone)]
pub struct TestServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    hits: Arc<Mutex<Vec<String>>>,
}

impl TestServer {
    /// Binds 127.0.0.1:0 and serves in a background thread.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the test server");
        let port = listener.local_addr().expect("local_addr").port();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&hits);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let recorded = Arc::clone(&recorded);
                std::thread::spawn(move || handle(stream, &recorded));
            }
        });
        Self { port, hits }
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The paths requested so far.
    pub fn hits(&self) -> Vec<String> {
        self.hits.lock().map(|h| h.clone()).unwrap_or_default()
    }
}

fn handle(mut stream: TcpStream, hits: &Mutex<Vec<String>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let path = text
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("/")
        .to_string();
    if let Ok(mut h) = hits.lock() {
        h.push(path.clone());
    }
    let big = vec![b'x'; BIG_BYTES];
    let _ = match path.as_str() {
        "/hello" => respond(&mut stream, "200 OK", &[], HELLO.as_bytes(), true),
        "/big" => respond(&mut stream, "200 OK", &[], &big, true),
        "/big-stream" => respond(&mut stream, "200 OK", &[], &big, false),
        p if p.starts_with("/redirect?to=") => {
            let to = p.trim_start_matches("/redirect?to=");
            respond(&mut stream, "302 Found", &[("Location", to)], b"", true)
        }
        _ => respond(&mut stream, "404 Not Found", &[], b"not found", true),
    };
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

fn respond(
    stream: &mut TcpStream,
    status: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    with_length: bool,
) -> std::io::Result<()> {
    let mut head =
        format!("HTTP/1.1 {status}\r\nConnection: close\r\nContent-Type: text/plain\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if with_length {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)
}
