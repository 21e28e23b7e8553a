//! The server's bounds, attacked over real TCP: a declared body over the limit answered
//! at once, a body that stops arriving, a trickled head, an idle kept-alive connection,
//! and the connection cap with `GET /healthz` still answered (connection floods:
//! [`super::flood_tests`]). No test asserts how fast: each waits for the answer or the
//! close under a generous guard that only catches a hang.

use std::time::Duration;

use skillbox_protocol::skill::Catalog;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{serve, ServerLimits};
use crate::gateway::{test_gateway, Gateway};

const TOKEN: &str = "server-test-token-51c0";
/// Longest a test waits for an answer or a close before calling it a hang.
pub(super) const HANG: Duration = Duration::from_secs(30);

/// A gateway with `limits` served on a loopback port; its address.
pub(super) async fn start(ws: &std::path::Path, limits: ServerLimits) -> std::net::SocketAddr {
    let gw = test_gateway(
        ws,
        Catalog::default(),
        ws.join("skills"),
        TOKEN,
        1024,
        crate::gateway::console::Console::new(&Default::default()),
    );
    let gw = Gateway {
        server_limits: limits,
        ..gw
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, std::sync::Arc::new(gw)));
    addr
}

pub(super) fn limits() -> ServerLimits {
    ServerLimits {
        header_timeout: Duration::from_secs(60),
        header_timeout_under_load: Duration::from_secs(60),
        body_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(60),
        max_connections: 64,
        max_connections_per_peer: 64,
        high_water: 64,
        healthz_reserve: 2,
    }
}

/// Reads until the peer closes (or resets): everything it sent.
pub(super) async fn read_to_close(tcp: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(HANG, tcp.read(&mut buf)).await {
            Err(_) => panic!(
                "no close within the guard; got {:?}",
                String::from_utf8_lossy(&out)
            ),
            Ok(Ok(0) | Err(_)) => return String::from_utf8_lossy(&out).into_owned(),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads one answer whose body ends the bytes read so far (`Content-Length` long).
pub(super) async fn read_answer(tcp: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&out).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_string)
                })
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= len {
                return text;
            }
        }
        match tokio::time::timeout(HANG, tcp.read(&mut buf)).await {
            Err(_) => panic!("no answer within the guard; got {text:?}"),
            Ok(Ok(0) | Err(_)) => return text,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
}

pub(super) fn head(method: &str, path: &str, extra: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {TOKEN}\r\n{extra}\r\n"
    )
}

#[tokio::test]
async fn declared_body_over_the_limit_is_refused_before_reading() {
    let ws = tempfile::tempdir().unwrap();
    let addr = start(ws.path(), limits()).await;
    let four_gib = "content-length: 4294967296\r\ncontent-type: application/json\r\n";
    for path in ["/v1/tools/call", "/mcp", "/v1/route"] {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(format!("{}{{\"to", head("POST", path, four_gib)).as_bytes())
            .await
            .unwrap();
        let answer = read_to_close(&mut tcp).await;
        assert!(answer.starts_with("HTTP/1.1 413"), "{path}: {answer}");
        assert!(
            answer.contains("over the 1024-byte limit (gateway.max_request_bytes)"),
            "{path}: {answer}"
        );
        assert!(answer.contains("connection: close"), "{path}: {answer}");
    }
    // The console's sign-in answers its own page, 413 too.
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let extra = format!(
        "origin: http://127.0.0.1\r\ncontent-type: application/x-www-form-urlencoded\r\n{}",
        "content-length: 4294967296\r\n"
    );
    tcp.write_all(format!("{}token=", head("POST", "/console/signin", &extra)).as_bytes())
        .await
        .unwrap();
    let answer = read_to_close(&mut tcp).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("text/html"), "{answer}");
    assert!(answer.contains("1024-byte limit"), "{answer}");
}

#[tokio::test]
async fn body_that_stops_arriving_is_refused_with_408_and_closed() {
    let ws = tempfile::tempdir().unwrap();
    let addr = start(
        ws.path(),
        ServerLimits {
            body_timeout: Duration::from_millis(300),
            ..limits()
        },
    )
    .await;
    for path in ["/v1/tools/call", "/mcp"] {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        let extra = "content-length: 100\r\ncontent-type: application/json\r\n";
        tcp.write_all(format!("{}{{\"tool\"", head("POST", path, extra)).as_bytes())
            .await
            .unwrap();
        let answer = read_to_close(&mut tcp).await;
        assert!(answer.starts_with("HTTP/1.1 408"), "{path}: {answer}");
        assert!(
            answer.contains("did not arrive within 300 ms (gateway.body_timeout_ms)"),
            "{path}: {answer}"
        );
    }
    // The console's sign-in answers its own page, 408 too.
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let extra = "origin: http://127.0.0.1\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: 100\r\n";
    tcp.write_all(format!("{}token=", head("POST", "/console/signin", extra)).as_bytes())
        .await
        .unwrap();
    let answer = read_to_close(&mut tcp).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("text/html"), "{answer}");
    assert!(answer.contains("gateway.body_timeout_ms"), "{answer}");
}

#[tokio::test]
async fn trickled_request_head_is_closed_after_the_header_timeout() {
    let ws = tempfile::tempdir().unwrap();
    let addr = start(
        ws.path(),
        ServerLimits {
            header_timeout: Duration::from_millis(300),
            ..limits()
        },
    )
    .await;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut reader, mut writer) = tcp.into_split();
    // One byte of an endless header every 50 ms.
    let trickle = tokio::spawn(async move {
        let _ = writer.write_all(b"GET /healthz HTTP/1.1\r\nx-slow: ").await;
        for _ in 0..600 {
            if writer.write_all(b"a").await.is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    });
    let mut buf = [0u8; 1024];
    let closed = tokio::time::timeout(HANG, async {
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the trickled head was never cut");
    trickle.abort();
}

#[tokio::test]
async fn idle_kept_alive_connection_is_closed_after_the_idle_timeout() {
    let ws = tempfile::tempdir().unwrap();
    let addr = start(
        ws.path(),
        ServerLimits {
            idle_timeout: Duration::from_millis(300),
            ..limits()
        },
    )
    .await;
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(head("GET", "/healthz", "").as_bytes())
        .await
        .unwrap();
    let answer = read_answer(&mut tcp).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // Kept alive, then nothing: the server closes it.
    let rest = read_to_close(&mut tcp).await;
    assert_eq!(rest, "", "nothing more than the close");
}

#[tokio::test]
async fn healthz_answers_while_the_connection_cap_is_reached() {
    let ws = tempfile::tempdir().unwrap();
    let addr = start(
        ws.path(),
        ServerLimits {
            max_connections: 2,
            healthz_reserve: 1,
            ..limits()
        },
    )
    .await;
    // Two kept-alive connections hold the cap (each answered once, so each was accepted).
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(head("GET", "/healthz", "").as_bytes())
            .await
            .unwrap();
        assert!(read_answer(&mut tcp).await.starts_with("HTTP/1.1 200"));
        held.push(tcp);
    }
    // Past the cap: /healthz still answers (one request, then closed)...
    let mut probe = TcpStream::connect(addr).await.unwrap();
    probe
        .write_all(head("GET", "/healthz", "").as_bytes())
        .await
        .unwrap();
    let answer = read_to_close(&mut probe).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"status\":\"ok\""), "{answer}");
    // ...and any other route is refused with the reason.
    let mut other = TcpStream::connect(addr).await.unwrap();
    other
        .write_all(head("GET", "/v1/tools", "").as_bytes())
        .await
        .unwrap();
    let answer = read_to_close(&mut other).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("serving its 2 connections (gateway.max_connections)"),
        "{answer}"
    );
    // With the reserve held by a silent connection, a probe evicts it and is answered.
    let mut reserve_holder = TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut probe = TcpStream::connect(addr).await.unwrap();
    probe
        .write_all(head("GET", "/healthz", "").as_bytes())
        .await
        .unwrap();
    let answer = read_to_close(&mut probe).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(read_to_close(&mut reserve_holder).await, "", "evicted");
    // A held connection still works.
    held[0]
        .write_all(head("GET", "/healthz", "").as_bytes())
        .await
        .unwrap();
    assert!(read_answer(&mut held[0]).await.starts_with("HTTP/1.1 200"));
}
