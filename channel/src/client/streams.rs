//! [`StreamClient`]: the executor's side of the channel's byte streams (`POST /egress`,
//! `POST /file`, [`crate::stream`]), each upgraded on a mutual-TLS connection of its own,
//! with a few upgraded ahead of the next calls ([`crate::ahead`], [`super::warm`]).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{error_chain, warm, ClientError, CONNECT_TIMEOUT};
use crate::ahead::{self, AHEAD_PATH, AHEAD_PROTOCOL};
use crate::stream::{StreamKind, CALL_ID_HEADER, TOKEN_HEADER};
use crate::tls;
use crate::TlsFiles;

/// The upgraded connection of a stream: the peer's bytes both ways.
pub type ChannelStream = TokioIo<hyper::upgrade::Upgraded>;

/// Longest wait for a stream's TLS handshake and `101` answer after the TCP connect.
pub const STREAM_OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// Streams a [`StreamClient`] keeps upgraded ahead for its next calls.
pub const WARM_STREAMS: usize = warm::READY;

/// A connection with its TLS handshake done and no request sent.
type Connected = tokio_rustls::client::TlsStream<TcpStream>;

/// Largest refusal text read from a server that did not upgrade.
const MAX_REFUSAL_BYTES: usize = 4096;

/// Opens byte streams to one channel server (the executor's side of the egress proxy):
/// each on a connection of its own (mutual TLS, the server's identity checked as its
/// certificate name), upgraded from `POST /egress`, or taken from the few upgraded ahead
/// of the next calls ([`warm`]); clones share them.
#[derive(Clone)]
pub struct StreamClient {
    /// `host:port` to connect to.
    addr: String,
    /// The base URL, for errors.
    url: String,
    name: ServerName<'static>,
    tls: TlsConnector,
    warm: Arc<warm::WarmPool<ChannelStream>>,
}

impl std::fmt::Debug for StreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamClient")
            .field("url", &self.url)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl StreamClient {
    /// A stream client of `base_url` (`https://host:port`, as [`RpcClient::new`]) whose
    /// certificate must name `expected_identity`, presenting this side's certificate from
    /// `files`.
    pub fn new(
        base_url: &str,
        expected_identity: &str,
        files: &TlsFiles,
    ) -> Result<Self, ClientError> {
        Self::with_config(base_url, expected_identity, tls::client_config(files)?)
    }

    /// [`StreamClient::new`] with a TLS client configuration already made
    /// ([`tls::client_config`]).
    pub fn with_config(
        base_url: &str,
        expected_identity: &str,
        config: rustls::ClientConfig,
    ) -> Result<Self, ClientError> {
        let bad = |reason: String| ClientError::BadUrl {
            url: base_url.to_string(),
            reason,
        };
        let uri: hyper::Uri = base_url
            .parse()
            .map_err(|e: http::uri::InvalidUri| bad(e.to_string()))?;
        if uri.scheme_str() != Some("https") {
            return Err(bad("the channel is https://".into()));
        }
        let host = uri.host().ok_or_else(|| bad("no host".into()))?;
        let addr = format!("{host}:{}", uri.port_u16().unwrap_or(443));
        let name = ServerName::try_from(expected_identity.to_string())
            .map_err(|_| ClientError::BadIdentity(expected_identity.to_string()))?;
        Ok(Self {
            addr,
            url: base_url.trim_end_matches('/').to_string(),
            name,
            tls: TlsConnector::from(std::sync::Arc::new(config)),
            warm: Arc::default(),
        })
    }

    /// Streams upgraded ahead and ready for the next calls now (at most
    /// [`WARM_STREAMS`]).
    pub fn warm_ready(&self) -> usize {
        self.warm.ready()
    }

    /// Opens the egress stream of call `call_id`, presenting its capability `token`
    /// (headers [`CALL_ID_HEADER`] and [`TOKEN_HEADER`]): `POST /egress` with
    /// `Connection: Upgrade`, `Upgrade: skillbox-egress`, and the connection once the server
    /// answered `101`. Whether the call and token are good is told on the stream (the
    /// proxy's `403` with `X-Skillbox-Refused`), not here.
    ///
    /// # Errors
    /// `Connect` when no connection could be made ([`CONNECT_TIMEOUT`]), `Timeout` when
    /// the handshake or the answer took longer than [`STREAM_OPEN_TIMEOUT`], `Refused` with
    /// the server's status and text when it did not upgrade, `Unreachable` when the
    /// connection broke.
    pub async fn open_egress(
        &self,
        call_id: &str,
        token: &str,
    ) -> Result<ChannelStream, ClientError> {
        self.open(StreamKind::Egress, call_id, token).await
    }

    /// Opens a context file stream of call `call_id` (`POST /file`, `Upgrade:
    /// skillbox-file`), as [`StreamClient::open_egress`] opens an egress stream. A server
    /// that does not serve files closes it at once.
    ///
    /// # Errors
    /// As [`StreamClient::open_egress`].
    pub async fn open_file(
        &self,
        call_id: &str,
        token: &str,
    ) -> Result<ChannelStream, ClientError> {
        self.open(StreamKind::File, call_id, token).await
    }

    async fn open(
        &self,
        kind: StreamKind,
        call_id: &str,
        token: &str,
    ) -> Result<ChannelStream, ClientError> {
        let url = format!("{}{}", self.url, kind.path());
        let timed_out = || ClientError::Timeout {
            url: url.clone(),
            timeout_ms: u64::try_from(STREAM_OPEN_TIMEOUT.as_millis()).unwrap_or(u64::MAX),
        };
        // A stream upgraded ahead: the call named in its first bytes, no round trip. The
        // next one is started [`warm::REFILL_AFTER`] later.
        let preamble = ahead::preamble(kind, call_id, token).map_err(|e| ClientError::BadUrl {
            url: url.clone(),
            reason: e.to_string(),
        })?;
        while let Some(mut stream) = self.warm.take() {
            if !still_open(&mut stream) {
                tracing::debug!("a stream upgraded ahead was closed; taking another");
                continue;
            }
            let written = async {
                stream.write_all(&preamble).await?;
                stream.flush().await
            };
            let named = tokio::time::timeout(STREAM_OPEN_TIMEOUT, written).await;
            self.fill_warm();
            match named {
                Ok(Ok(())) => return Ok(stream),
                Ok(Err(e)) => tracing::debug!(error = %e, "a stream upgraded ahead broke"),
                Err(_) => return Err(timed_out()),
            }
        }
        let opening = async {
            let call = Some((call_id, token));
            let opened = self.open_fresh(kind.path(), kind.protocol(), call).await;
            self.fill_warm();
            opened
        };
        tokio::time::timeout(STREAM_OPEN_TIMEOUT, opening)
            .await
            .map_err(|_| timed_out())?
    }

    /// A TCP connection to the server with the mutual-TLS handshake done (the TCP connect
    /// within [`CONNECT_TIMEOUT`]); why not.
    async fn connect(&self) -> Result<Connected, String> {
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&self.addr))
            .await
            .map_err(|_| format!("no connection within {CONNECT_TIMEOUT:?}"))?
            .map_err(|e| e.to_string())?;
        let _ = tcp.set_nodelay(true);
        self.tls
            .connect(self.name.clone(), tcp)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))
    }

    /// Starts making streams upgraded ahead for the next calls ([`warm`]).
    fn fill_warm(&self) {
        self.warm.fill(|| {
            let client = self.clone();
            async move {
                let made = client.open_fresh(AHEAD_PATH, AHEAD_PROTOCOL, None);
                match tokio::time::timeout(STREAM_OPEN_TIMEOUT, made).await {
                    Ok(Ok(stream)) => Some(stream),
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "a stream ahead of the next call failed");
                        None
                    }
                    Err(_) => None,
                }
            }
        });
    }

    /// A stream on a fresh connection: connected, then upgraded at `path` to `protocol`
    /// ([`StreamClient::upgrade`]).
    async fn open_fresh(
        &self,
        path: &str,
        protocol: &'static str,
        call: Option<(&str, &str)>,
    ) -> Result<ChannelStream, ClientError> {
        let url = format!("{}{path}", self.url);
        let tls = (self.connect().await).map_err(|reason| ClientError::Connect {
            url: url.clone(),
            reason,
        })?;
        self.upgrade(&url, tls, path, protocol, call).await
    }

    /// Upgrades `tls` at `path` to `protocol`, naming the call `(call id, token)` in
    /// headers when given.
    async fn upgrade(
        &self,
        url: &str,
        tls: Connected,
        path: &str,
        protocol: &'static str,
        call: Option<(&str, &str)>,
    ) -> Result<ChannelStream, ClientError> {
        let broke = |e: hyper::Error| ClientError::Unreachable {
            url: url.to_string(),
            reason: error_chain(&e),
        };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(broke)?;
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!(error = %e, "channel stream connection ended");
            }
        });
        let mut req = http::Request::post(path)
            .header(http::header::HOST, self.name.to_str().as_ref())
            .header(http::header::CONNECTION, "Upgrade")
            .header(http::header::UPGRADE, protocol);
        if let Some((call_id, token)) = call {
            req = req
                .header(CALL_ID_HEADER, call_id)
                .header(TOKEN_HEADER, token);
        }
        let req = req
            .body(Empty::<Bytes>::new())
            .map_err(|e| ClientError::BadUrl {
                url: url.to_string(),
                reason: format!("the call id or token is not a header value: {e}"),
            })?;
        let resp = sender.send_request(req).await.map_err(broke)?;
        let status = resp.status();
        if status != http::StatusCode::SWITCHING_PROTOCOLS {
            let text = Limited::new(resp.into_body(), MAX_REFUSAL_BYTES)
                .collect()
                .await
                .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                .unwrap_or_default();
            return Err(ClientError::Refused {
                url: url.to_string(),
                status: status.as_u16(),
                reason: text,
            });
        }
        let upgraded = hyper::upgrade::on(resp).await.map_err(broke)?;
        Ok(TokioIo::new(upgraded))
    }
}

/// Whether a stream kept ready is still open: the server never writes first on one, so
/// anything readable (its end, or bytes) means it cannot carry a call.
fn still_open(stream: &mut ChannelStream) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    let mut byte = [0u8; 1];
    let mut buf = ReadBuf::new(&mut byte);
    matches!(Pin::new(stream).poll_read(&mut cx, &mut buf), Poll::Pending)
}
