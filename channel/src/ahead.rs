//! Streams upgraded ahead of the call they will carry.
//!
//! A stream opened for a call ([`crate::stream`]) waits one round trip for the server's
//! `101` before the first byte of the program can follow, and the server must not read
//! such bytes as a request if it refused the upgrade. So the client upgrades connections
//! before any call needs them, with no call named:
//!
//! ```text
//! POST /stream HTTP/1.1
//! Host: skillbox-core
//! Connection: Upgrade
//! Upgrade: skillbox-stream
//!
//! HTTP/1.1 101 Switching Protocols
//! ```
//!
//! and, when a call takes one, writes its *preamble* as the stream's first bytes, followed
//! at once by the call's own bytes:
//!
//! ```text
//! <length: u16, big-endian> <kind> "\n" <call id> "\n" <token>
//! ```
//!
//! with kind `egress` or `file`. The server reads exactly that many bytes, then hands the
//! rest of the stream to the same [`StreamHandler`] method a per-call upgrade reaches,
//! which judges the call and token as it does there (a refusal is told on the stream).
//! Every byte after the preamble belongs to the stream: none is ever read as an HTTP
//! request on the executor's authenticated connection. A preamble that is too long, not
//! text, of an unknown kind or with an empty field closes the stream unread.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::stream::{BoxedStream, StreamHandler, StreamKind};

/// The path of a stream upgraded ahead.
pub const AHEAD_PATH: &str = "/stream";
/// The `Upgrade` protocol token of a stream upgraded ahead.
pub const AHEAD_PROTOCOL: &str = "skillbox-stream";

/// Longest preamble, in bytes after its length.
pub const MAX_PREAMBLE_BYTES: usize = 1024;

/// Longest wait for the rest of a preamble once its length came (the stream itself may
/// wait for its call as long as the client keeps it).
const PREAMBLE_REST_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a preamble cannot be written or was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PreambleError {
    /// Longer than [`MAX_PREAMBLE_BYTES`].
    #[error("the stream's preamble is over {MAX_PREAMBLE_BYTES} bytes")]
    TooLong,
    /// A field is empty or holds a line break, or the kind is unknown.
    #[error("the stream's preamble is malformed: {0}")]
    Malformed(&'static str),
}

/// The preamble naming `kind`, the call `call_id` and its `token`.
pub fn preamble(kind: StreamKind, call_id: &str, token: &str) -> Result<Vec<u8>, PreambleError> {
    for field in [call_id, token] {
        if field.is_empty() || field.contains('\n') {
            return Err(PreambleError::Malformed(
                "an empty field or a line break in one",
            ));
        }
    }
    let text = format!("{}\n{call_id}\n{token}", kind_name(kind));
    if text.len() > MAX_PREAMBLE_BYTES {
        return Err(PreambleError::TooLong);
    }
    let len = u16::try_from(text.len()).map_err(|_| PreambleError::TooLong)?;
    let mut bytes = len.to_be_bytes().to_vec();
    bytes.extend_from_slice(text.as_bytes());
    Ok(bytes)
}

fn kind_name(kind: StreamKind) -> &'static str {
    match kind {
        StreamKind::Egress => "egress",
        StreamKind::File => "file",
    }
}

/// Reads a preamble from `io`, exactly its bytes and no more: the kind, call id and token.
pub async fn read_preamble<R: AsyncRead + Unpin>(
    io: &mut R,
) -> Result<(StreamKind, String, String), String> {
    let mut len = [0u8; 2];
    io.read_exact(&mut len).await.map_err(|e| e.to_string())?;
    let len = usize::from(u16::from_be_bytes(len));
    if len > MAX_PREAMBLE_BYTES {
        return Err(PreambleError::TooLong.to_string());
    }
    let mut text = vec![0u8; len];
    tokio::time::timeout(PREAMBLE_REST_TIMEOUT, io.read_exact(&mut text))
        .await
        .map_err(|_| "the preamble stopped half way".to_string())?
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8(text).map_err(|_| "the preamble is not UTF-8".to_string())?;
    let mut fields = text.split('\n');
    let (Some(kind), Some(call_id), Some(token), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err("the preamble does not hold three lines".into());
    };
    let kind = match kind {
        "egress" => StreamKind::Egress,
        "file" => StreamKind::File,
        _ => return Err(format!("unknown stream kind {kind:?}")),
    };
    if call_id.is_empty() || token.is_empty() {
        return Err("an empty call id or token".into());
    }
    Ok((kind, call_id.to_string(), token.to_string()))
}

/// Answers `POST /stream`: `101`, and the stream handed to `handler` once its preamble
/// came, on a task of its own.
pub(crate) fn upgrade(
    mut req: Request<Incoming>,
    handler: Arc<dyn StreamHandler>,
) -> Response<Full<Bytes>> {
    if req.method() != Method::POST {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("use POST {AHEAD_PATH}"),
        );
    }
    if !crate::stream::names_upgrade(req.headers(), AHEAD_PROTOCOL) {
        return plain(
            StatusCode::BAD_REQUEST,
            format!("{AHEAD_PATH} needs Connection: Upgrade and Upgrade: {AHEAD_PROTOCOL}"),
        );
    }
    let upgraded = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let mut io = match upgraded.await {
            Ok(io) => TokioIo::new(io),
            Err(e) => {
                tracing::debug!(error = %e, "stream upgrade failed");
                return;
            }
        };
        let (kind, call_id, token) = match read_preamble(&mut io).await {
            Ok(named) => named,
            Err(why) => {
                // The client closing a stream it kept is the usual end here, not an attack.
                tracing::debug!(%why, "a stream upgraded ahead closed without its call");
                return;
            }
        };
        let io: BoxedStream = Box::new(io);
        match kind {
            StreamKind::Egress => handler.serve(call_id, token, io).await,
            StreamKind::File => handler.serve_file(call_id, token, io).await,
        }
    });
    crate::stream::switching(AHEAD_PROTOCOL)
}

fn plain(status: StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(text)));
    *r.status_mut() = status;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8]) -> Result<(StreamKind, String, String), String> {
        let mut io = bytes;
        read_preamble(&mut io).await
    }

    #[tokio::test]
    async fn a_preamble_reads_back_and_leaves_the_streams_own_bytes_unread() {
        let mut bytes = preamble(StreamKind::Egress, "call-1", "tok").unwrap();
        bytes.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let mut io = &bytes[..];
        let named = read_preamble(&mut io).await.unwrap();
        assert_eq!(named, (StreamKind::Egress, "call-1".into(), "tok".into()));
        assert_eq!(io, b"GET / HTTP/1.1\r\n");
        let file = preamble(StreamKind::File, "c", "t").unwrap();
        assert_eq!(read(&file).await.unwrap().0, StreamKind::File);
    }

    #[tokio::test]
    async fn a_bad_preamble_is_refused_saying_why() {
        assert_eq!(
            preamble(StreamKind::Egress, "call\nx", "t"),
            Err(PreambleError::Malformed(
                "an empty field or a line break in one"
            ))
        );
        assert!(preamble(StreamKind::Egress, "", "t").is_err());
        let long = "t".repeat(MAX_PREAMBLE_BYTES);
        assert_eq!(
            preamble(StreamKind::Egress, "c", &long),
            Err(PreambleError::TooLong)
        );
        let framed = |text: &[u8]| {
            let mut b = u16::try_from(text.len()).unwrap().to_be_bytes().to_vec();
            b.extend_from_slice(text);
            b
        };
        let cases: &[(&[u8], &str)] = &[
            (b"shell\nc\nt", "unknown stream kind"),
            (b"egress\nc", "three lines"),
            (b"egress\nc\nt\nextra", "three lines"),
            (b"egress\n\nt", "empty call id"),
            (b"egress\nc\n\xff", "not UTF-8"),
        ];
        for (text, why) in cases {
            let e = read(&framed(text)).await.unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
        let over = u16::try_from(MAX_PREAMBLE_BYTES + 1).unwrap().to_be_bytes();
        assert!(read(&over).await.unwrap_err().contains("over"));
        // Cut short: an error, never a preamble made of what came.
        let cut = &preamble(StreamKind::Egress, "c", "t").unwrap()[..5];
        assert!(read(cut).await.is_err());
    }
}
