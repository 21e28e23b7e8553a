//! A minimal egress proxy in place of the core's (core/src/proxy/egress), serving the
//! streams a network call's relay opens: it reads one request head, records the call id,
//! token and request line it came with, and for `api.test` connects to the test server on
//! this host's loopback at the port asked for (`CONNECT api.test:PORT` answered `200`,
//! then a tunnel; an absolute-form request forwarded as it is). Any other host is refused
//! as the core refuses: `403` with `X-Skillbox-Refused`. And [`TestServer`], the server
//! behind it.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Mutex;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The one host the fake proxy lets through.
pub const DECLARED_HOST: &str = "api.test";

/// One stream the fake proxy served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proxied {
    /// The call id the stream named.
    pub call_id: String,
    /// The token it presented.
    pub token: String,
    /// The request line the program sent.
    pub request_line: String,
}

/// The fake proxy: what it served.
#[derive(Debug, Default)]
pub struct FakeProxy {
    log: Mutex<Vec<Proxied>>,
}

impl FakeProxy {
    /// The streams served so far.
    pub fn served(&self) -> Vec<Proxied> {
        self.log.lock().unwrap().clone()
    }

    /// Serves one stream of `call_id` (which presented `token`) until it ends.
    pub async fn serve<S>(&self, call_id: String, token: String, mut io: S)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
            if head.len() > 64 * 1024 {
                return;
            }
        }
        let text = String::from_utf8_lossy(&head).into_owned();
        let line = text.lines().next().unwrap_or_default().to_string();
        self.log.lock().unwrap().push(Proxied {
            call_id,
            token,
            request_line: line.clone(),
        });
        let mut words = line.split_whitespace();
        let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let authority = match method {
            "CONNECT" => target,
            _ => target
                .strip_prefix("http://")
                .and_then(|rest| rest.split('/').next())
                .unwrap_or(""),
        };
        let (host, port) = authority.rsplit_once(':').unwrap_or((authority, "80"));
        if host != DECLARED_HOST {
            let refusal = format!(
                "HTTP/1.1 403 Forbidden\r\nX-Skillbox-Refused: host {host} is not declared\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let _ = io.write_all(refusal.as_bytes()).await;
            return;
        }
        let Ok(mut upstream) =
            tokio::net::TcpStream::connect(("127.0.0.1", port.parse().unwrap_or(80))).await
        else {
            let _ = io
                .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                .await;
            return;
        };
        if method == "CONNECT" {
            let end = head.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let _ = io
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await;
            let _ = upstream.write_all(&head[end..]).await;
        } else {
            let _ = upstream.write_all(&head).await;
        }
        let _ = tokio::io::copy_bidirectional(&mut io, &mut upstream).await;
    }
}

/// A plain HTTP server on this host's loopback that answers every request with
/// [`TestServer::BODY`] and the request line it got, on a thread of its own.
#[derive(Debug)]
pub struct TestServer {
    /// Its port.
    pub port: u16,
}

impl TestServer {
    /// What every answer's body starts with.
    pub const BODY: &'static str = "hello from the test server";

    /// Starts it.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                std::thread::spawn(move || {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&head).into_owned();
                    let line = text.lines().next().unwrap_or_default();
                    let body = format!("{} ({line})", Self::BODY);
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = conn.write_all(answer.as_bytes());
                });
            }
        });
        Self { port }
    }
}
