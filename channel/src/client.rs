//! Channel client: JSON-RPC calls over pooled mutual-TLS connections, the server's
//! identity checked as its certificate name whatever address it is reached at; and
//! [`StreamClient`], which opens the upgraded byte streams of `POST /egress`
//! ([`crate::stream`]).

mod streams;
mod warm;

pub use streams::{ChannelStream, StreamClient, STREAM_OPEN_TIMEOUT, WARM_STREAMS};

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::ServerName;
use serde_json::value::RawValue;
use serde_json::Value;

use super::tls::{self, TlsError};
use super::{TlsFiles, RPC_PATH};
use skillbox_protocol::jsonrpc::{self, ErrorObject, Id, Message};
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
pub fn encode_params<M: RpcMethod>(params: &M::Params) -> Result<Box<RawValue>, ClientError> {
    serde_json::value::to_raw_value(params).map_err(|e| ClientError::Typed {
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
        // Written straight from the typed params: no `Value` tree of them first.
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = jsonrpc::request_line(id, M::NAME, params).map_err(|e| ClientError::Typed {
            method: M::NAME,
            reason: format!("params: {e}"),
        })?;
        let answer = self.exchange(id, body, timeout).await?;
        decode_result::<M>(answer)
    }

    /// Calls `method` with `params` (a `Value`, or params written already:
    /// `serde_json::value::RawValue`) and waits at most `timeout` for the answer.
    pub async fn call<P: serde::Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = jsonrpc::request_line(id, method, params).map_err(|e| ClientError::Typed {
            method: "request",
            reason: format!("{method} params: {e}"),
        })?;
        self.exchange(id, body, timeout).await
    }

    /// Sends `body`, the request line of request `id`, and waits at most `timeout` for
    /// its answer.
    async fn exchange(
        &self,
        id: i64,
        body: String,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
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

/// An error and its causes, joined with ": ".
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}
