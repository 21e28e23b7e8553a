//! The gateway's bounds against the real binary: a body declared over
//! `[gateway] max_request_bytes` answered at once on every route that reads one, and
//! `GET /healthz` still answered while `[gateway] max_connections` are held open.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::harness::{Options, Skillbox};

/// Longest wait for an answer or a close; only a hang reaches it.
const HANG: Duration = Duration::from_secs(30);

fn connect(sb: &Skillbox) -> TcpStream {
    let tcp = TcpStream::connect(&sb.addr).unwrap();
    tcp.set_read_timeout(Some(HANG)).unwrap();
    tcp
}

/// Everything the server sends until it closes (panics on a hang).
fn read_to_close(tcp: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "no answer and no close ({e}); got {:?}",
                String::from_utf8_lossy(&out)
            ),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn declared_body_of_4_gib_is_refused_at_once_on_every_route_that_reads_a_body() {
    let sb = Skillbox::start(Options::default());
    let host = sb.addr.clone();
    for (path, extra) in [
        (
            "/v1/tools/call",
            "content-type: application/json\r\n".to_string(),
        ),
        ("/mcp", "content-type: application/json\r\n".to_string()),
        (
            "/v1/route",
            "content-type: application/json\r\n".to_string(),
        ),
        (
            "/console/signin",
            format!("origin: http://{host}\r\ncontent-type: application/x-www-form-urlencoded\r\n"),
        ),
    ] {
        let mut tcp = connect(&sb);
        write!(
            tcp,
            "POST {path} HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {}\r\n{extra}content-length: 4294967296\r\n\r\n{{\"a",
            sb.token
        )
        .unwrap();
        let answer = read_to_close(&mut tcp);
        assert!(answer.starts_with("HTTP/1.1 413"), "{path}: {answer}");
        assert!(
            answer.contains("1048576-byte limit"),
            "{path} names the limit: {answer}"
        );
    }
}

#[test]
fn healthz_answers_while_the_connection_cap_is_held_and_other_routes_get_503() {
    let sb = Skillbox::start(Options {
        // One peer (loopback) over the cap: its per-peer cap above it, so that the reserve,
        // not eviction, is what a new connection meets.
        gateway_toml:
            "max_connections = 3\nmax_connections_per_peer = 10\nhealthz_reserve_connections = 1\n"
                .into(),
        ..Options::default()
    });
    // Hold every slot with connections that send nothing (each within the head timeout).
    let held: Vec<TcpStream> = (0..3).map(|_| connect(&sb)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut probe = connect(&sb);
    write!(probe, "GET /healthz HTTP/1.1\r\nhost: {}\r\n\r\n", sb.addr).unwrap();
    let answer = read_to_close(&mut probe);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"status\":\"ok\""), "{answer}");
    let mut other = connect(&sb);
    write!(
        other,
        "GET /v1/skills HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {}\r\n\r\n",
        sb.addr, sb.token
    )
    .unwrap();
    let answer = read_to_close(&mut other);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("serving its 3 connections (gateway.max_connections)"),
        "{answer}"
    );
    drop(held);
}
