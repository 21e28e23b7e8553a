//! Byte streams over the channel: `POST /egress` (and `POST /file`) upgraded to a raw,
//! two-way stream.
//!
//! The executor opens one stream per connection a program in its sandbox makes to its
//! HTTP proxy, and copies that connection's bytes into it; the core's egress proxy reads
//! them as if it were the program's proxy. The request carries the call the connection
//! belongs to:
//!
//! ```text
//! POST /egress HTTP/1.1
//! Host: skillbox-core
//! Connection: Upgrade
//! Upgrade: skillbox-egress
//! x-skillbox-call-id: <call id>
//! x-skillbox-token: <the call's capability token>
//!
//! HTTP/1.1 101 Switching Protocols
//! Connection: Upgrade
//! Upgrade: skillbox-egress
//! ```
//!
//! After the `101` the connection carries the program's bytes both ways until either side
//! closes. The server side is a [`StreamHandler`] registered with
//! [`crate::server::serve_with_streams`] (same mutual TLS and peer identity check as
//! `/rpc`); without one, `/egress` is `404`. The client side is
//! [`crate::client::StreamClient::open_egress`]. The call id and token are checked by the
//! handler, not here: a wrong one is refused on the stream itself, as a proxy refuses.
//!
//! `POST /file` (`Upgrade: skillbox-file`) is the same upgrade for a call's context file
//! coming to the executor as raw bytes rather than base64 chunks inside JSON-RPC
//! ([`StreamHandler::serve_file`]; what travels on it is `skillbox_protocol::workdir`'s).
//!
//! Either can also travel on a stream upgraded before its call ([`crate::ahead`]), the call
//! named in the stream's first bytes instead of headers: that spares the round trip.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

/// The path of an egress stream.
pub const EGRESS_PATH: &str = "/egress";
/// The `Upgrade` protocol token of an egress stream.
pub const EGRESS_PROTOCOL: &str = "skillbox-egress";
/// The path of a context file's stream.
pub const FILE_PATH: &str = "/file";
/// The `Upgrade` protocol token of a context file's stream.
pub const FILE_PROTOCOL: &str = "skillbox-file";
/// The header naming the call a stream belongs to.
pub const CALL_ID_HEADER: &str = "x-skillbox-call-id";
/// The header carrying that call's capability token.
pub const TOKEN_HEADER: &str = "x-skillbox-token";

/// What a stream is: bytes both ways.
pub trait StreamIo: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> StreamIo for T {}

/// An upgraded stream as a handler receives it.
pub type BoxedStream = Box<dyn StreamIo>;

/// A boxed future of a handler's work on one stream.
pub type StreamFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Serves the upgraded streams of a channel server (the core's egress proxy and its
/// context files).
pub trait StreamHandler: Send + Sync + 'static {
    /// Serves one egress stream of call `call_id`, which presented `token`, until it ends.
    /// The handler judges the call and token; the channel only checked the peer's identity.
    fn serve(&self, call_id: String, token: String, io: BoxedStream) -> StreamFuture<'_>;

    /// Serves one context file stream of call `call_id` (see the module docs). Without
    /// an override the stream is closed at once, and the client falls back to chunks.
    fn serve_file(&self, call_id: String, token: String, io: BoxedStream) -> StreamFuture<'_> {
        let _ = (call_id, token, io);
        Box::pin(async {})
    }
}

/// What an upgraded stream is for: its path and `Upgrade` protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// A connection of a call's programs ([`EGRESS_PATH`]).
    Egress,
    /// A call's context file coming to the executor ([`FILE_PATH`]).
    File,
}

impl StreamKind {
    /// The kind served at `path`, if any.
    pub fn at(path: &str) -> Option<Self> {
        match path {
            EGRESS_PATH => Some(Self::Egress),
            FILE_PATH => Some(Self::File),
            _ => None,
        }
    }

    /// Its path.
    pub fn path(self) -> &'static str {
        match self {
            Self::Egress => EGRESS_PATH,
            Self::File => FILE_PATH,
        }
    }

    /// Its `Upgrade` protocol token.
    pub fn protocol(self) -> &'static str {
        match self {
            Self::Egress => EGRESS_PROTOCOL,
            Self::File => FILE_PROTOCOL,
        }
    }
}

/// Answers an upgrade request of `kind`: `101` and the upgraded connection handed to
/// `handler` on its own task, or `405`/`400` saying what is wrong with the request.
pub(crate) fn upgrade(
    mut req: Request<Incoming>,
    handler: Arc<dyn StreamHandler>,
    kind: StreamKind,
) -> Response<Full<Bytes>> {
    let (path, protocol) = (kind.path(), kind.protocol());
    if req.method() != Method::POST {
        return plain(StatusCode::METHOD_NOT_ALLOWED, format!("use POST {path}"));
    }
    let headers = req.headers();
    if !names_upgrade(headers, protocol) {
        return plain(
            StatusCode::BAD_REQUEST,
            format!("{path} needs Connection: Upgrade and Upgrade: {protocol}"),
        );
    }
    let (Some(call_id), Some(token)) = (text(headers, CALL_ID_HEADER), text(headers, TOKEN_HEADER))
    else {
        return plain(
            StatusCode::BAD_REQUEST,
            format!("{path} needs the headers {CALL_ID_HEADER} and {TOKEN_HEADER}"),
        );
    };
    let upgraded = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match upgraded.await {
            Ok(io) => {
                let io: BoxedStream = Box::new(TokioIo::new(io));
                match kind {
                    StreamKind::Egress => handler.serve(call_id, token, io).await,
                    StreamKind::File => handler.serve_file(call_id, token, io).await,
                }
            }
            Err(e) => tracing::debug!(error = %e, %path, "stream upgrade failed"),
        }
    });
    switching(protocol)
}

/// The `101` answer of an upgrade to `protocol`.
pub(crate) fn switching(protocol: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    r.headers_mut()
        .insert(header::UPGRADE, HeaderValue::from_static(protocol));
    r
}

/// Whether the request asks for an upgrade to `protocol`.
pub(crate) fn names_upgrade(headers: &HeaderMap, protocol: &str) -> bool {
    let connection = headers.get_all(header::CONNECTION).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
        })
    });
    let upgrade = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(protocol));
    connection && upgrade
}

/// A header's value when it is present, non-empty and printable ASCII.
fn text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

fn plain(status: StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(text)));
    *r.status_mut() = status;
    r
}
