//! A connection a program made without the proxy (Node's `fetch`, Go, Java, a raw socket):
//! it reached the namespace's listener of the port it dialled, at the address its lookup
//! gave ([`super::resolver`]), so the executor knows the host by that address and the port
//! by the listener. It is carried to the core's egress proxy as a proxied one would be:
//!
//! - TLS (the first byte is a handshake record, 0x16): `CONNECT host:port` is sent first,
//!   and once the proxy answers `200` the program's bytes follow, the ClientHello first;
//!   any other answer (a refusal, recorded by the core with its reason) closes the
//!   program's connection, as a server that will not talk would;
//! - anything else is read as plain HTTP: its request head (at most [`MAX_HEAD_BYTES`])
//!   is sent in absolute form (`GET http://host:port/path`), so the proxy judges, records
//!   and forwards it as any proxied request, and its answer, a refusal included, goes back
//!   as it comes.
//!
//! The host is the name the call's lookup gave that address; an address the program did
//! not look up goes as the IP literal, which the proxy refuses (hosts are declared by
//! name).

use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::resolver::Names;
use crate::broker::{CallInfo, CapabilityBroker};

/// Longest wait for a program's first bytes, and for the proxy's answer to `CONNECT`.
const FIRST_BYTES_WAIT: Duration = Duration::from_secs(30);
/// Largest request head (or proxy answer head) read.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

/// Carries one connection taken without the proxy (see the module docs).
pub async fn carry<B: CapabilityBroker>(
    mut conn: TcpStream,
    names: &Mutex<Names>,
    broker: &B,
    call: &CallInfo,
) {
    let _ = conn.set_nodelay(true);
    let Ok(dialled) = conn.local_addr() else {
        return;
    };
    let host = host_of(dialled, names);
    let mut head = Vec::new();
    let read = tokio::time::timeout(FIRST_BYTES_WAIT, read_opening(&mut conn, &mut head)).await;
    if !matches!(read, Ok(Ok(()))) || head.is_empty() {
        return;
    }
    let Ok(mut stream) = broker.egress(call).await else {
        tracing::debug!(host = %host, "no stream to the core for a connection made without the proxy");
        return;
    };
    let opened = if head[0] == TLS_HANDSHAKE {
        let connect = format!(
            "CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n",
            port = dialled.port()
        );
        let asked = stream.write_all(connect.as_bytes()).await.is_ok();
        asked && tunnel_opened(&mut stream).await && stream.write_all(&head).await.is_ok()
    } else {
        let absolute = absolute_form(&head, &host, dialled.port());
        stream.write_all(&absolute).await.is_ok()
    };
    if opened {
        super::splice(&mut conn, &mut stream).await;
    }
}

/// The host a connection to `dialled` is for: the name its address was given, else the
/// address itself.
fn host_of(dialled: SocketAddr, names: &Mutex<Names>) -> String {
    match dialled.ip() {
        IpAddr::V4(ip) => names
            .lock()
            .ok()
            .and_then(|n| n.name_of(ip).map(str::to_string))
            .unwrap_or_else(|| ip.to_string()),
        IpAddr::V6(ip) => format!("[{ip}]"),
    }
}

/// Reads what the program sends first: the first bytes of TLS, or a whole HTTP request
/// head (up to its blank line, or [`MAX_HEAD_BYTES`]).
async fn read_opening(conn: &mut TcpStream, head: &mut Vec<u8>) -> std::io::Result<()> {
    let mut buf = [0u8; 4096];
    loop {
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        if head[0] == TLS_HANDSHAKE
            || head.windows(4).any(|w| w == b"\r\n\r\n")
            || head.len() >= MAX_HEAD_BYTES
        {
            return Ok(());
        }
    }
}

/// Whether the proxy answered `CONNECT` with `200` (its answer head read to the end).
async fn tunnel_opened<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> bool {
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    let read = async {
        while !answer.ends_with(b"\r\n\r\n") && answer.len() < MAX_HEAD_BYTES {
            if stream.read(&mut byte).await.ok()? == 0 {
                return None;
            }
            answer.push(byte[0]);
        }
        Some(())
    };
    if !matches!(
        tokio::time::timeout(FIRST_BYTES_WAIT, read).await,
        Ok(Some(()))
    ) {
        return false;
    }
    let status = answer.split(|b| *b == b' ').nth(1).unwrap_or_default();
    status == b"200"
}

/// `head` with its request target in absolute form: `GET /a HTTP/1.1` for `host` on port
/// 8080 becomes `GET http://host:8080/a HTTP/1.1`; a target that is not a path (already
/// absolute, `*`, or no request line at all) is left for the proxy to judge.
pub fn absolute_form(head: &[u8], host: &str, port: u16) -> Vec<u8> {
    let line_end = head.iter().position(|b| *b == b'\n').unwrap_or(head.len());
    let line = &head[..line_end];
    let mut parts = line.splitn(3, |b| *b == b' ');
    let (Some(method), Some(target), Some(rest)) = (parts.next(), parts.next(), parts.next())
    else {
        return head.to_vec();
    };
    if !target.starts_with(b"/") {
        return head.to_vec();
    }
    let authority = if port == 80 {
        host.to_string()
    } else {
        format!("{host}:{port}")
    };
    let mut out = Vec::with_capacity(head.len() + authority.len() + 8);
    out.extend_from_slice(method);
    out.extend_from_slice(b" http://");
    out.extend_from_slice(authority.as_bytes());
    out.extend_from_slice(target);
    out.push(b' ');
    out.extend_from_slice(rest);
    out.extend_from_slice(&head[line_end..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_form_request_goes_in_absolute_form_with_the_rest_untouched() {
        let head = b"GET /a?b=1 HTTP/1.1\r\nHost: api.test:8080\r\n\r\nbody";
        let out = absolute_form(head, "api.test", 8080);
        assert_eq!(
            out,
            b"GET http://api.test:8080/a?b=1 HTTP/1.1\r\nHost: api.test:8080\r\n\r\nbody"
        );
        let out = absolute_form(b"POST / HTTP/1.0\r\n\r\n", "api.test", 80);
        assert_eq!(out, b"POST http://api.test/ HTTP/1.0\r\n\r\n");
    }

    #[test]
    fn other_targets_are_left_for_the_proxy() {
        for head in [
            &b"GET http://elsewhere.test/ HTTP/1.1\r\n\r\n"[..],
            b"OPTIONS * HTTP/1.1\r\n\r\n",
            b"garbage",
        ] {
            assert_eq!(absolute_form(head, "api.test", 80), head);
        }
    }

    #[tokio::test]
    async fn only_a_200_opens_the_tunnel() {
        let mut ok: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";
        assert!(tunnel_opened(&mut ok).await);
        let mut refused: &[u8] =
            b"HTTP/1.1 403 Forbidden\r\nX-Skillbox-Refused: not declared\r\n\r\nnot declared\n";
        assert!(!tunnel_opened(&mut refused).await);
        let mut cut: &[u8] = b"HTTP/1.1 200 Conn";
        assert!(!tunnel_opened(&mut cut).await);
    }

    #[test]
    fn the_host_is_the_name_looked_up_else_the_address() {
        let names = Mutex::new(Names::default());
        let ip = names.lock().unwrap().address_of("api.test").unwrap();
        assert_eq!(host_of(SocketAddr::new(ip.into(), 443), &names), "api.test");
        let other: SocketAddr = "192.0.2.7:443".parse().unwrap();
        assert_eq!(host_of(other, &names), "192.0.2.7");
    }
}
