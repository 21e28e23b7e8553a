//! Channel client: JSON-RPC calls over pooled mutual-TLS connections, the server's
//! identity checked as its certificate name whatever address it is reached at; and
//! [`StreamClient`], which opens the upgraded byte streams of `POST /egress`
//! ([`crate::stream`]).

mod warm;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full, Limited};
use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::stream::{StreamKind, CALL_ID_HEADER, TOKEN_HEADER};
use super::tls::{self, TlsError};
use super::{TlsFiles, RPC_PATH};
use skillbox_protocol::jsonrpc::{self, ErrorObject, Id, Message, Request};
use skillbox_protocol::rpc::RpcMethod;

/// Largest response body accepted.
pub const MAX_RESPONSE_BYTES: usize = jsonrpc::MAX_MESSAGE_BYTES;

/// Why a call did not get an answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// TLS material problem.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The expected identity is not a valid name.
    #[error("{0:?} is not a valid server name")]
    BadIdentity(String),
    /// The URL is not usable.
    #[error("bad channel URL {url:?}: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// No connection could be made (refused, no route, TLS handshake failed): the request
    /// was never sent, so sending it elsewhere cannot run it twice.
    #[error("peer unreachable at {url} (no connection): {reason}")]
    Connect {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// Connection, TLS or HTTP failure: the peer is unreachable or refused us.
    #[error("peer unreachable at {url}: {reason}")]
    Unreachable {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// No answer within the timeout.
    #[error("no answer from {url} within {timeout_ms} ms")]
    Timeout {
        /// The URL.
        url: String,
        /// The limit.
        timeout_ms: u64,
    },
    /// The answer was not a JSON-RPC response to our request.
    #[error("bad answer from {url}: {reason}")]
    BadAnswer {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The peer answered with a JSON-RPC error.
    #[error("{}: {}", .0.code, .0.message)]
    Rpc(ErrorObject),
    /// The server answered a stream request with something else than `101`: `404` when it
    /// serves no streams, `400` for a bad request.
    #[error("{url} refused the stream: HTTP {status}: {reason}")]
    Refused {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The server's text.
        reason: String,
    },
    /// The params of a typed call could not be written, or its result is not the method's
    /// result type.
    #[error("{method}: {reason}")]
    Typed {
        /// The method.
        method: &'static str,
        /// What did not fit.
        reason: String,
    },
}

/// `params` of `M` as the JSON a call sends.
pub fn encode_params<M: RpcMethod>(params: &M::Params) -> Result<Value, ClientError> {
    serde_json::to_value(params).map_err(|e| ClientError::Typed {
        method: M::NAME,
        reason: format!("params: {e}"),
    })
}

/// An answer read as `M`'s result.
pub fn decode_result<M: RpcMethod>(answer: Value) -> Result<M::Result, ClientError> {
    serde_json::from_value(answer).map_err(|e| ClientError::Typed {
        method: M::NAME,
        reason: format!("the answer is not its result: {e}"),
    })
}

/// Longest TCP connect to a peer before the attempt counts as "no connection".
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// A JSON-RPC client for one peer.
#[derive(Debug)]
pub struct RpcClient {
    url: hyper::Uri,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    next_id: AtomicI64,
}

impl RpcClient {
    /// A client of `base_url` (`https://host:port`) whose certificate must name
    /// `expected_identity`, presenting this side's certificate from `files`.
    pub fn new(
        base_url: &str,
        expected_identity: &str,
        files: &TlsFiles,
    ) -> Result<Self, ClientError> {
        let config = tls::client_config(files)?;
        let name = ServerName::try_from(expected_identity.to_string())
            .map_err(|_| ClientError::BadIdentity(expected_identity.to_string()))?;
        // Connections are pooled and reused (keep-alive); requests go out at once, not held
        // back by Nagle's algorithm waiting for the previous answer's ACK.
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        // A peer whose address vanished (a container gone from an overlay network) may
        // drop SYNs instead of refusing: give up soon, as a connect error (never sent).
        tcp.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_only()
            .with_server_name_resolver(FixedServerNameResolver::new(name))
            .enable_http1()
            .wrap_connector(tcp);
        let url: hyper::Uri = format!("{}{RPC_PATH}", base_url.trim_end_matches('/'))
            .parse()
            .map_err(|e: http::uri::InvalidUri| ClientError::BadUrl {
                url: base_url.to_string(),
                reason: e.to_string(),
            })?;
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Ok(Self {
            url,
            client,
            next_id: AtomicI64::new(1),
        })
    }

    /// The URL called.
    pub fn url(&self) -> String {
        self.url.to_string()
    }

    /// Calls `M` with `params` and reads its result as `M`'s result type.
    pub async fn call_method<M: RpcMethod>(
        &self,
        params: &M::Params,
        timeout: Duration,
    ) -> Result<M::Result, ClientError> {
        let answer = self
            .call(M::NAME, encode_params::<M>(params)?, timeout)
            .await?;
        decode_result::<M>(answer)
    }

    /// Calls `method` and waits at most `timeout` for the answer.
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = Message::Request(Request {
            id: Id::Number(id),
            method: method.to_string(),
            params: Some(params),
        })
        .to_line();
        let url = self.url();
        let req = http::Request::post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| ClientError::BadUrl {
                url: url.clone(),
                reason: e.to_string(),
            })?;
        let exchange = async {
            let resp = self.client.request(req).await.map_err(|e| {
                if e.is_connect() {
                    ClientError::Connect {
                        url: url.clone(),
                        reason: error_chain(&e),
                    }
                } else {
                    ClientError::Unreachable {
                        url: url.clone(),
                        reason: error_chain(&e),
                    }
                }
            })?;
            let status = resp.status();
            let bytes = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|e| ClientError::BadAnswer {
                    url: url.clone(),
                    reason: format!("reading the body: {e}"),
                })?
                .to_bytes();
            if !status.is_success() {
                return Err(ClientError::BadAnswer {
                    url: url.clone(),
                    reason: format!("HTTP {status}"),
                });
            }
            Ok(bytes)
        };
        let bytes = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| ClientError::Timeout {
                url: url.clone(),
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            })??;
        match jsonrpc::decode(&bytes) {
            Ok(Message::Response(r)) if r.id == Some(Id::Number(id)) => {
                r.outcome.map_err(ClientError::Rpc)
            }
            Ok(Message::Response(r)) if r.id.is_none() => {
                Err(ClientError::Rpc(r.outcome.err().unwrap_or_else(|| {
                    ErrorObject::new(jsonrpc::code::INTERNAL_ERROR, "error without detail")
                })))
            }
            Ok(_) => Err(ClientError::BadAnswer {
                url,
                reason: "not the response to our request".into(),
            }),
            Err(e) => Err(ClientError::BadAnswer {
                url,
                reason: e.to_string(),
            }),
        }
    }
}

/// The upgraded connection of a stream: the peer's bytes both ways.
pub type ChannelStream = TokioIo<hyper::upgrade::Upgraded>;

/// Longest wait for a stream's TLS handshake and `101` answer after the TCP connect.
pub const STREAM_OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections a [`StreamClient`] keeps made ahead for its next streams.
pub const WARM_STREAMS: usize = warm::READY;

/// Largest refusal text read from a server that did not upgrade.
const MAX_REFUSAL_BYTES: usize = 4096;

/// Opens byte streams to one channel server (the executor's side of the egress proxy):
/// each on a connection of its own (mutual TLS, the server's identity checked as its
/// certificate name), upgraded from `POST /egress`. A few connections are made ahead of
/// the next streams ([`warm`]); clones share them.
#[derive(Clone)]
pub struct StreamClient {
    /// `host:port` to connect to.
    addr: String,
    /// The base URL, for errors.
    url: String,
    name: ServerName<'static>,
    tls: TlsConnector,
    warm: Arc<warm::WarmPool>,
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

    /// Connections made ahead and ready for the next streams now (at most
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
        let ready = self.warm.take();
        self.fill_warm();
        if let Some(tls) = ready {
            let upgraded = self.upgrade(&url, tls, kind, (call_id, token));
            match tokio::time::timeout(STREAM_OPEN_TIMEOUT, upgraded).await {
                // The server closed it while it waited: a fresh connection below.
                Ok(Err(ClientError::Unreachable { reason, .. })) => {
                    tracing::debug!(%reason, "a connection made ahead was closed; opening a fresh one");
                }
                Ok(opened) => return opened,
                Err(_) => return Err(timed_out()),
            }
        }
        let opening = async {
            let tls = self
                .connect()
                .await
                .map_err(|reason| ClientError::Connect {
                    url: url.clone(),
                    reason,
                })?;
            self.upgrade(&url, tls, kind, (call_id, token)).await
        };
        tokio::time::timeout(STREAM_OPEN_TIMEOUT, opening)
            .await
            .map_err(|_| timed_out())?
    }

    /// A TCP connection to the server with the mutual-TLS handshake done (the TCP connect
    /// within [`CONNECT_TIMEOUT`]); why not.
    async fn connect(&self) -> Result<warm::Connected, String> {
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

    /// Starts making connections for the next streams ([`warm`]).
    fn fill_warm(&self) {
        self.warm.fill(|| {
            let client = self.clone();
            async move {
                let made = tokio::time::timeout(STREAM_OPEN_TIMEOUT, client.connect()).await;
                match made {
                    Ok(Ok(conn)) => Some(conn),
                    Ok(Err(reason)) => {
                        tracing::debug!(%reason, "a connection ahead of the next stream failed");
                        None
                    }
                    Err(_) => None,
                }
            }
        });
    }

    async fn upgrade(
        &self,
        url: &str,
        tls: tokio_rustls::client::TlsStream<TcpStream>,
        kind: StreamKind,
        (call_id, token): (&str, &str),
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
        let req = http::Request::post(kind.path())
            .header(http::header::HOST, self.name.to_str().as_ref())
            .header(http::header::CONNECTION, "Upgrade")
            .header(http::header::UPGRADE, kind.protocol())
            .header(CALL_ID_HEADER, call_id)
            .header(TOKEN_HEADER, token)
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

/// An error and its causes, joined with ": ".
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}
