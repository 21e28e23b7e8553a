//! Channel server: accepts TLS connections, checks the client's identity, and serves
//! JSON-RPC requests on `POST /rpc` with a body-size limit, and, when a
//! [`StreamHandler`] is registered, upgraded byte streams on `POST /egress` and `POST
//! /file` ([`crate::stream`]) and on `POST /stream`, upgraded before their call
//! ([`crate::ahead`]).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::ahead::AHEAD_PATH;
use super::stream::{self, StreamHandler, StreamKind};
use super::tls::{self, TlsError};
use super::{TlsFiles, RPC_PATH};
use serde_json::value::RawValue;
use skillbox_protocol::jsonrpc::{self, code, Call, ErrorObject, Message, Params};

/// A boxed future of a handler's answer.
pub type RpcFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, ErrorObject>> + Send + 'a>>;

/// Handles the methods of one side of the channel.
pub trait RpcHandler: Send + Sync + 'static {
    /// Answers one request.
    fn handle<'a>(&'a self, method: &'a str, params: Option<Value>) -> RpcFuture<'a>;

    /// Answers one request whose params are the JSON text they came in. The server calls
    /// this; by default it reads them into a `Value` for [`RpcHandler::handle`]. A side
    /// whose methods take large params reads them as their own types instead.
    fn handle_raw<'a>(&'a self, method: &'a str, params: Option<&'a RawValue>) -> RpcFuture<'a> {
        match params
            .map(|p| serde_json::from_str::<Value>(p.get()))
            .transpose()
        {
            Ok(params) => self.handle(method, params),
            Err(e) => Box::pin(std::future::ready(Err(ErrorObject::new(
                code::INVALID_PARAMS,
                format!("params: {e}"),
            )))),
        }
    }
}

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The DNS name the client certificate must carry.
    pub expected_peer: String,
    /// Largest request body.
    pub max_body_bytes: usize,
}

/// A server TLS configuration that reloads its files when they change (checked at each
/// accepted connection by modification time), so certificates rotate without restart.
#[derive(Debug)]
pub struct ReloadingServerConfig {
    files: TlsFiles,
    current: RwLock<(Arc<ServerConfig>, Vec<Option<SystemTime>>)>,
}

impl ReloadingServerConfig {
    /// Loads the files once; fails when they are unusable.
    pub fn new(files: TlsFiles) -> Result<Self, TlsError> {
        let config = tls::server_config(&files)?;
        let stamps = stamps(&files);
        Ok(Self {
            files,
            current: RwLock::new((config, stamps)),
        })
    }

    /// The configuration in force, reloaded first if a file changed. A reload that fails
    /// keeps the previous configuration and logs why.
    pub fn get(&self) -> Option<Arc<ServerConfig>> {
        let now = stamps(&self.files);
        {
            let cur = self.current.read().ok()?;
            if cur.1 == now {
                return Some(Arc::clone(&cur.0));
            }
        }
        match tls::server_config(&self.files) {
            Ok(config) => {
                tracing::info!(cert = %self.files.cert.display(), "channel certificates reloaded");
                let mut cur = self.current.write().ok()?;
                *cur = (Arc::clone(&config), now);
                Some(config)
            }
            Err(e) => {
                tracing::error!(error = %e, "channel certificate reload failed; keeping the previous ones");
                self.current.read().ok().map(|c| Arc::clone(&c.0))
            }
        }
    }
}

fn stamps(files: &TlsFiles) -> Vec<Option<SystemTime>> {
    [&files.ca, &files.cert, &files.key]
        .iter()
        .map(|p: &&PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
}

/// Serves the channel on `listener` until the task is dropped (JSON-RPC only; `/egress`
/// is `404`).
pub async fn serve(
    listener: TcpListener,
    tls: Arc<ReloadingServerConfig>,
    options: ServerOptions,
    handler: Arc<dyn RpcHandler>,
) {
    serve_with_streams(listener, tls, options, handler, None).await;
}

/// [`serve`], and the upgraded streams of `POST /egress` handed to `streams` when there
/// is one (else `/egress` is `404`). Both are served to the expected peer only.
pub async fn serve_with_streams(
    listener: TcpListener,
    tls: Arc<ReloadingServerConfig>,
    options: ServerOptions,
    handler: Arc<dyn RpcHandler>,
    streams: Option<Arc<dyn StreamHandler>>,
) {
    let options = Arc::new(options);
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "channel accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(config) = tls.get() else { continue };
        let handler = Arc::clone(&handler);
        let options = Arc::clone(&options);
        let streams = streams.clone();
        tokio::spawn(async move {
            let _ = tcp.set_nodelay(true);
            let stream = match TlsAcceptor::from(config).accept(tcp).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "channel TLS handshake refused");
                    return;
                }
            };
            let names = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .map(tls::dns_names)
                .unwrap_or_default();
            if !names.iter().any(|n| *n == options.expected_peer) {
                tracing::warn!(%peer, ?names, expected = %options.expected_peer, "channel peer refused: wrong identity");
                return;
            }
            let service = service_fn(move |req: Request<Incoming>| {
                let handler = Arc::clone(&handler);
                let options = Arc::clone(&options);
                let streams = streams.clone();
                async move {
                    let path = req.uri().path();
                    let (ahead, kind) = (path == AHEAD_PATH, StreamKind::at(path));
                    let answer = match (streams, kind) {
                        (Some(streams), _) if ahead => crate::ahead::upgrade(req, streams),
                        (Some(streams), Some(kind)) => stream::upgrade(req, streams, kind),
                        _ => respond(req, &*handler, &options).await,
                    };
                    Ok::<_, std::convert::Infallible>(answer)
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "channel connection ended");
            }
        });
    }
}

async fn respond(
    req: Request<Incoming>,
    handler: &dyn RpcHandler,
    options: &ServerOptions,
) -> Response<Full<Bytes>> {
    if req.uri().path() != RPC_PATH {
        return plain(
            StatusCode::NOT_FOUND,
            "not found; the channel serves POST /rpc",
        );
    }
    if req.method() != Method::POST {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "use POST /rpc");
    }
    let body = match Limited::new(req.into_body(), options.max_body_bytes)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return rpc(Message::Response(jsonrpc::Response::error(
                None,
                ErrorObject::new(
                    code::INVALID_REQUEST,
                    format!(
                        "request body over the {}-byte limit",
                        options.max_body_bytes
                    ),
                ),
            )))
        }
    };
    let (id, method, params) = match jsonrpc::decode_call(&body) {
        Ok(Call::Request(id, method, params)) => (id, method, params),
        Ok(Call::Notification(method, params)) => {
            let _ = handler
                .handle_raw(&method, params.as_ref().map(Params::get))
                .await;
            return plain(StatusCode::NO_CONTENT, "");
        }
        Ok(Call::Response(_)) => {
            return rpc(Message::Response(jsonrpc::Response::error(
                None,
                ErrorObject::new(code::INVALID_REQUEST, "expected a request, got a response"),
            )))
        }
        Err(e) => {
            return rpc(Message::Response(jsonrpc::Response::error(
                None,
                e.to_error_object(),
            )))
        }
    };
    let outcome = handler
        .handle_raw(&method, params.as_ref().map(Params::get))
        .await;
    rpc(Message::Response(jsonrpc::Response {
        id: Some(id),
        outcome,
    }))
}

fn rpc(msg: Message) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(msg.to_line())));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = status;
    r
}
