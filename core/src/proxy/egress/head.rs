//! The first request head a program sends its proxy: read with a size bound and a
//! deadline, then sorted into what the proxy serves (`CONNECT host:port`, an absolute
//! `http://` URL) or a refusal saying why not. Also the proxy's own answers.

use std::net::IpAddr;
use std::time::Duration;

use skillbox_protocol::skill::network::Scheme;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::proxy::target::Target;
use crate::proxy::ProxyError;

/// Largest request head read.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;
/// Longest wait for a whole request head (and, after `CONNECT`, for the ClientHello).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Most header lines in a head.
const MAX_HEADERS: usize = 96;

/// Why no request head could be read.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    /// The program closed the connection before a whole head.
    #[error("the connection closed before a whole request head")]
    Closed,
    /// No whole head within [`HEAD_TIMEOUT`].
    #[error("no whole request head within {} ms", HEAD_TIMEOUT.as_millis())]
    Timeout,
    /// The head is larger than [`MAX_HEAD_BYTES`].
    #[error("the request head is larger than {MAX_HEAD_BYTES} bytes")]
    TooLarge,
    /// The bytes are not an HTTP/1 request head.
    #[error("not an HTTP/1 request: {0}")]
    Malformed(String),
    /// Reading failed.
    #[error("reading the request failed: {0}")]
    Read(#[source] std::io::Error),
}

/// A request head: its parts, and how many bytes of the buffer it took.
#[derive(Debug)]
pub struct Head {
    /// The method.
    pub method: String,
    /// The request target as sent.
    pub target: String,
    /// `1` for HTTP/1.1, `0` for HTTP/1.0.
    pub minor: u8,
    /// The header lines, in order.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The head's length in bytes; what follows in the buffer is the body or the tunnel.
    pub len: usize,
}

/// Reads into `buf` until it holds a whole request head, and parses it.
pub async fn read_head<S: AsyncRead + Unpin>(
    io: &mut S,
    buf: &mut Vec<u8>,
) -> Result<Head, HeadError> {
    tokio::time::timeout(HEAD_TIMEOUT, async {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(head) = parse(buf)? {
                return Ok(head);
            }
            if buf.len() >= MAX_HEAD_BYTES {
                return Err(HeadError::TooLarge);
            }
            let n = io.read(&mut chunk).await.map_err(HeadError::Read)?;
            if n == 0 {
                return Err(HeadError::Closed);
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    })
    .await
    .map_err(|_| HeadError::Timeout)?
}

/// Parses a whole head from `buf`; `None` while it is incomplete.
pub fn parse(buf: &[u8]) -> Result<Option<Head>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(buf) {
        Ok(httparse::Status::Partial) => Ok(None),
        Ok(httparse::Status::Complete(len)) if len > MAX_HEAD_BYTES => Err(HeadError::TooLarge),
        Ok(httparse::Status::Complete(len)) => Ok(Some(Head {
            method: req.method.unwrap_or_default().to_string(),
            target: req.path.unwrap_or_default().to_string(),
            minor: req.version.unwrap_or(1),
            headers: req
                .headers
                .iter()
                .map(|h| (h.name.to_string(), h.value.to_vec()))
                .collect(),
            len,
        })),
        Err(e) => Err(HeadError::Malformed(e.to_string())),
    }
}

/// What a head asks the proxy for.
#[derive(Debug)]
pub enum Asked {
    /// `CONNECT host:port`: a tunnel, TLS inside.
    Connect {
        /// Lower-case host as written.
        host: String,
        /// The port.
        port: u16,
    },
    /// A plain HTTP request in absolute form.
    Forward(Target),
    /// Something the proxy does not serve (answered `400` with this reason).
    Bad(String),
}

impl Head {
    /// What this head asks for.
    pub fn asked(&self) -> Asked {
        if self.method.eq_ignore_ascii_case("CONNECT") {
            return match split_host_port(&self.target) {
                Some((host, port)) => Asked::Connect { host, port },
                None => Asked::Bad(format!(
                    "CONNECT {:?}: expected CONNECT host:port",
                    self.target
                )),
            };
        }
        if self.target.starts_with('/') || self.target == "*" {
            return Asked::Bad(format!(
                "{} {}: this is an HTTP proxy; send absolute-form requests (GET http://host/path) \
                 or CONNECT host:port for https",
                self.method, self.target
            ));
        }
        match Target::parse(&self.target) {
            Ok(t) if t.scheme == Scheme::Http => Asked::Forward(t),
            Ok(_) => Asked::Bad(
                "an https:// url in absolute form: use CONNECT host:443 and TLS inside the tunnel"
                    .into(),
            ),
            Err(ProxyError::InvalidParams { reason, .. }) => Asked::Bad(reason),
            Err(e) => Asked::Bad(e.to_string()),
        }
    }
}

/// `host:port` of a CONNECT (the port required, a v6 host bracketed), host lower-case.
fn split_host_port(authority: &str) -> Option<(String, u16)> {
    let (host, port) = authority.rsplit_once(':')?;
    let port = port.parse::<u16>().ok().filter(|p| *p != 0)?;
    let valid = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '[' | ']' | ':'));
    valid.then(|| (host.to_ascii_lowercase(), port))
}

/// Whether `host` is an IP address literal (a v6 one bracketed or not).
pub fn is_ip_literal(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse::<IpAddr>().is_ok()
}

/// How an answer of the proxy is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A refusal: `X-Skillbox-Refused: <reason>`.
    Refused,
    /// A failure past the policy (the server unreachable): `X-Skillbox-Error: <reason>`.
    Failed,
}

/// Writes the proxy's answer `status` with `reason` in a header and as the text body, and
/// closes the writing side. Errors are ignored: the program may be gone.
pub async fn answer<S: AsyncWrite + Unpin>(io: &mut S, status: u16, mark: Mark, reason: &str) {
    let phrase = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        502 => "Bad Gateway",
        _ => "Error",
    };
    let header = match mark {
        Mark::Refused => "X-Skillbox-Refused",
        Mark::Failed => "X-Skillbox-Error",
    };
    let body = format!("{reason}\n");
    let text = format!(
        "HTTP/1.1 {status} {phrase}\r\n{header}: {}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        header_safe(reason),
        body.len()
    );
    let _ = io.write_all(text.as_bytes()).await;
    let _ = io.shutdown().await;
}

/// `reason` as a header value: printable ASCII, anything else a `?`.
fn header_safe(reason: &str) -> String {
    reason
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn head_of(bytes: &[u8]) -> Result<Head, HeadError> {
        let mut io = bytes;
        read_head(&mut io, &mut Vec::new()).await
    }

    #[tokio::test]
    async fn connect_and_absolute_form_are_sorted() {
        let h = head_of(b"CONNECT API.test:8443 HTTP/1.1\r\nHost: api.test:8443\r\n\r\n")
            .await
            .unwrap();
        assert!(matches!(h.asked(), Asked::Connect { host, port: 8443 } if host == "api.test"));
        let h = head_of(b"GET http://api.test/a?b HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        assert!(
            matches!(h.asked(), Asked::Forward(t) if t.port == 80 && t.path_and_query == "/a?b")
        );
        for (req, why) in [
            (&b"GET /a HTTP/1.1\r\n\r\n"[..], "absolute-form"),
            (b"GET https://api.test/ HTTP/1.1\r\n\r\n", "use CONNECT"),
            (b"GET ftp://api.test/ HTTP/1.1\r\n\r\n", "only http://"),
            (b"CONNECT api.test HTTP/1.1\r\n\r\n", "host:port"),
        ] {
            let h = head_of(req).await.unwrap();
            assert!(
                matches!(h.asked(), Asked::Bad(r) if r.contains(why)),
                "{why}"
            );
        }
    }

    #[tokio::test]
    async fn heads_that_cannot_be_read_say_why() {
        assert!(matches!(
            head_of(b"GET http://a/ HTTP/1.1\r\n").await,
            Err(HeadError::Closed)
        ));
        assert!(matches!(
            head_of(b"\x16\x03\x01\x02\x00").await,
            Err(HeadError::Malformed(_))
        ));
        let big = [
            b"GET http://a/ HTTP/1.1\r\nx: ".as_slice(),
            &[b'a'; MAX_HEAD_BYTES],
        ]
        .concat();
        assert!(matches!(head_of(&big).await, Err(HeadError::TooLarge)));
    }

    #[test]
    fn ip_literals_are_recognised() {
        for ip in ["127.0.0.1", "[::1]", "::1", "10.0.0.1"] {
            assert!(is_ip_literal(ip), "{ip}");
        }
        assert!(!is_ip_literal("api.test"));
    }
}
