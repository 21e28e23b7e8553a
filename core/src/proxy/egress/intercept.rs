//! The connections of a skill that binds secrets (docs/permissions.md): read request by
//! request rather than tunnelled. For `CONNECT` the proxy ends the program's TLS with a
//! certificate of the workspace's egress CA for the CONNECT host (`trust.rs`) and opens
//! its own TLS to the real server, verified against the webpki roots and `[egress]
//! extra_roots`; plain HTTP is read as it comes. Each request then:
//!
//! 1. must go to the connection's host (a plain connection cannot switch hosts), its
//!    `Host` and any absolute-form authority naming that host (`host.rs`: no fronting);
//! 2. has the placeholders of secrets bound to that host replaced by their values in the
//!    request line, the headers (inside `Basic` credentials too) and, when `[egress]
//!    secrets_in_body` allows it, the body; a placeholder of a secret bound elsewhere
//!    refuses it (`403`, logged as an exfiltration attempt);
//! 3. is sent to the server asking for `Accept-Encoding: identity`, and its answer comes
//!    back with every secret's value masked, decoded first when the server coded it
//!    anyway (`masking.rs`).
//!
//! Bodies are read whole, up to `[egress] max_inspected_body_bytes`. HTTP/1.1 only (the
//! proxy offers no other ALPN), so no request escapes the reading.
//!
//! A dependency build's connections are read the same way while the download cache is on
//! (`cache/`): it binds no secrets, so nothing is replaced nor masked; its package files
//! are answered from the cache or streamed from the server and kept.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::cache::{self, serve::CacheUse};
use super::forward::HOP_BY_HOP;
use super::host;
use super::masking::{self, BodyError, ProxyBody};
use super::relay::{Ended, Meter, Way};
use super::Outcome;
use crate::proxy::secrets::{CallSecrets, Leak};
use crate::proxy::target::Target;

/// What the reading of one connection needs.
pub struct Reading {
    /// The call's bound secrets.
    pub secrets: Arc<CallSecrets>,
    /// The host the connection reaches (scheme, host and port).
    pub target: Target,
    /// Whether the connection is plain HTTP (absolute-form requests).
    pub plain: bool,
    /// Whether placeholders in bodies are replaced (`[egress] secrets_in_body`).
    pub in_body: bool,
    /// The largest body read (`[egress] max_inspected_body_bytes`).
    pub max_body: usize,
    /// The download cache, for a dependency build's connection while it is on.
    pub cache: Option<CacheUse>,
}

/// Serves the program's requests on `program` by sending them on `server` (connected,
/// and for HTTPS already speaking TLS to the real server) until either side ends.
pub async fn serve<P, S>(program: P, server: S, reading: Reading, meter: Arc<Meter>) -> Outcome
where
    P: AsyncRead + AsyncWrite + Unpin + Send,
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let ended = Arc::new(Mutex::new(None));
    let server = Metered {
        inner: server,
        meter: Arc::clone(&meter),
        ended: Arc::clone(&ended),
    };
    let (sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(server)).await {
        Ok(pair) => pair,
        Err(e) => return Outcome::allowed(Some(format!("closed: {e}"))),
    };
    let upstream = tokio::spawn(conn);
    let state = Arc::new(State {
        reading,
        sender: tokio::sync::Mutex::new(sender),
        refused: Mutex::new(None),
        hits: AtomicU64::new(0),
    });
    let service = {
        let state = Arc::clone(&state);
        hyper::service::service_fn(move |req| {
            let state = Arc::clone(&state);
            async move { Ok::<_, Infallible>(state.handle(req).await) }
        })
    };
    let served =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(program), service);
    let end = tokio::select! {
        r = served => r.err().map(|e| Ended::Broken(e.to_string())),
        () = meter.idle_expired() => Some(Ended::Idle(meter.idle())),
    };
    upstream.abort();
    let limit = ended.lock().unwrap_or_else(|p| p.into_inner()).take();
    let refused = state
        .refused
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    let mut outcome = match (refused, limit.or(end)) {
        (Some(reason), _) => Outcome::refused(reason),
        (None, Some(ended)) => Outcome::allowed(ended.reason()),
        (None, None) => Outcome::allowed(None),
    };
    outcome.cache_hits = state.hits.load(Ordering::Acquire);
    outcome
}

/// One connection's reading state.
struct State {
    reading: Reading,
    sender: tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<Full<Bytes>>>,
    /// The first refusal, which the connection's record keeps.
    refused: Mutex<Option<String>>,
    /// Requests the download cache answered.
    hits: AtomicU64,
}

/// A request refused: its status and reason.
struct Refused(u16, String);

impl From<Leak> for Refused {
    fn from(leak: Leak) -> Self {
        Refused(403, leak.to_string())
    }
}

/// Whether a request header stays with this hop: the hop-by-hop and proxy headers plain
/// forwarding drops ([`super::forward::HOP_BY_HOP`]), and the framing (the body is sent
/// whole, its length recomputed); `Host` is kept.
fn hop_only(lower: &str) -> bool {
    (HOP_BY_HOP.contains(&lower) && lower != "host")
        || lower.starts_with("proxy-")
        || lower == "transfer-encoding"
        || lower == "content-length"
}

impl State {
    async fn handle(&self, req: Request<Incoming>) -> Response<ProxyBody> {
        let mut resp = self.answer(req).await;
        // A build's plain connection carries one request, as plain forwarding does: its
        // client may send the next one for another host on the same connection.
        if self.reading.plain && self.reading.cache.is_some() {
            resp.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
        }
        resp
    }

    /// The answer to `req`: from the download cache, or from the server (kept by the
    /// cache, or masked for a call with secrets).
    async fn answer(&self, req: Request<Incoming>) -> Response<ProxyBody> {
        let secrets = Arc::clone(&self.reading.secrets);
        let sent = match self.rewrite(req).await {
            Ok(sent) => sent,
            Err(Refused(status, reason)) => return self.refuse(status, reason),
        };
        let cached = self.reading.cache.as_ref().and_then(|c| {
            let line = sent.uri().path_and_query().map_or("/", |p| p.as_str());
            let key = c.key(&self.reading.target, sent.method(), line, sent.headers())?;
            Some((c, key))
        });
        if let Some(c) = (self.reading.cache.as_ref()).filter(|_| sent.method() == Method::GET) {
            c.log.asked(cached.is_some());
        }
        if let Some((c, key)) = &cached {
            if let Some(hit) = c.hit(key).await {
                self.hits.fetch_add(1, Ordering::AcqRel);
                return hit;
            }
        }
        let answer = self.sender.lock().await.send_request(sent).await;
        let resp = match answer {
            Ok(resp) => resp,
            Err(e) => return plain(502, "failed", &format!("the server's answer failed: {e}")),
        };
        if let Some((c, key)) = cached {
            return cache::body::kept_answer(resp, &c.cache, &key);
        }
        if secrets.is_empty() {
            return resp.map(|b| b.map_err(BodyError::from).boxed());
        }
        match masking::masked_answer(resp, secrets, self.reading.max_body).await {
            Ok(resp) => resp,
            Err(e) => self.refuse(502, e.to_string()),
        }
    }

    /// The request as sent to the server, or why it is refused.
    async fn rewrite(&self, req: Request<Incoming>) -> Result<Request<Full<Bytes>>, Refused> {
        let r = &self.reading;
        let (parts, body) = req.into_parts();
        if r.plain {
            let same = parts.uri.host().is_some_and(|h| {
                h.trim_end_matches('.')
                    .eq_ignore_ascii_case(r.target.host.trim_end_matches('.'))
            }) && parts.uri.port_u16().unwrap_or(80) == r.target.port;
            if !same {
                return Err(Refused(
                    403,
                    format!(
                        "{} is not {}: one proxy connection reaches one host; open another",
                        parts.uri,
                        r.target.origin()
                    ),
                ));
            }
        }
        let line = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let line = match r.secrets.rewrite(line.as_bytes(), &r.target, "line")? {
            Some(bytes) => String::from_utf8(bytes)
                .map_err(|_| Refused(400, "the rewritten request line is not UTF-8".into()))?,
            None => line.to_string(),
        };
        let mut out = Request::builder()
            .method(parts.method.clone())
            .uri(&line)
            .version(http::Version::HTTP_11);
        if let Some(authority) = parts.uri.authority() {
            host::check_authority(authority.as_str(), &r.target)
                .map_err(|e| Refused(e.status(), e.to_string()))?;
        }
        host::check_host(
            parts
                .headers
                .get_all(http::header::HOST)
                .iter()
                .map(|v| v.as_bytes()),
            &r.target,
        )
        .map_err(|e| Refused(e.status(), e.to_string()))?;
        let mut has_host = false;
        for (name, value) in &parts.headers {
            let lower = name.as_str();
            // The answer must come back in a coding the masking can read (`masking.rs`).
            if hop_only(lower) || lower == "accept-encoding" {
                continue;
            }
            has_host |= lower == "host";
            let value = match r
                .secrets
                .rewrite_header(lower, value.as_bytes(), &r.target)?
            {
                Some(bytes) => http::HeaderValue::from_bytes(&bytes)
                    .map_err(|_| Refused(400, format!("header {name}: not a header value")))?,
                None => value.clone(),
            };
            out = out.header(name, value);
        }
        if !has_host {
            out = out.header(http::header::HOST, r.target.host_header());
        }
        out = out.header(http::header::ACCEPT_ENCODING, "identity");
        let body = self.body(body).await?;
        if !body.is_empty() || parts.headers.contains_key(http::header::CONTENT_LENGTH) {
            out = out.header(http::header::CONTENT_LENGTH, body.len());
        }
        out.body(Full::new(body))
            .map_err(|e| Refused(400, format!("the request cannot be sent on: {e}")))
    }

    /// The request's body, read whole and its placeholders checked.
    async fn body(&self, body: Incoming) -> Result<Bytes, Refused> {
        let r = &self.reading;
        let max = r.max_body;
        let bytes = Limited::new(body, max)
            .collect()
            .await
            .map_err(|e| match e.downcast::<http_body_util::LengthLimitError>() {
                Ok(_) => Refused(
                    413,
                    format!(
                        "the request body is larger than {max} bytes, the most the proxy reads for \
                         a skill with bound secrets ([egress] max_inspected_body_bytes)"
                    ),
                ),
                Err(e) => Refused(400, format!("reading the request body failed: {e}")),
            })?
            .to_bytes();
        match r.secrets.rewrite(&bytes, &r.target, "body")? {
            None => Ok(bytes),
            Some(replaced) if r.in_body => Ok(Bytes::from(replaced)),
            Some(_) => Err(Refused(
                403,
                format!(
                    "the request body to {} carries a secret's placeholder, and the proxy \
                     replaces placeholders in bodies only when the operator allows it ([egress] \
                     secrets_in_body = true); send it in a header or the query",
                    r.target.host
                ),
            )),
        }
    }

    fn refuse(&self, status: u16, reason: String) -> Response<ProxyBody> {
        tracing::warn!(host = %self.reading.target.host, %reason, "egress request refused");
        let mut first = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert_with(|| reason.clone());
        plain(status, "refused", &reason)
    }
}

/// The proxy's own answer: `status`, `X-Skillbox-Refused` (or `-Failed`), the reason.
fn plain(status: u16, mark: &str, reason: &str) -> Response<ProxyBody> {
    let header = match mark {
        "refused" => "x-skillbox-refused",
        _ => "x-skillbox-error",
    };
    let one_line: String = reason.chars().filter(|c| !c.is_control()).collect();
    let mut resp = Response::new(
        Full::new(Bytes::from(format!("{reason}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::FORBIDDEN);
    if let Ok(v) = http::HeaderValue::from_str(&one_line) {
        resp.headers_mut().insert(header, v);
    }
    resp
}

/// The server side of a read connection: every byte counted on the connection's
/// [`Meter`]; past the call's bytes limit reading and writing fail (and say why).
struct Metered<S> {
    inner: S,
    meter: Arc<Meter>,
    ended: Arc<Mutex<Option<Ended>>>,
}

impl<S> Metered<S> {
    fn count(&self, way: Way, n: usize) -> std::io::Result<()> {
        self.meter.spend(way, n).map_err(|ended| {
            let reason = ended.reason().unwrap_or_default();
            *self.ended.lock().unwrap_or_else(|p| p.into_inner()) = Some(ended);
            std::io::Error::other(reason)
        })
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let n = buf.filled().len() - before;
        Poll::Ready(self.count(Way::In, n))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let n = ready!(Pin::new(&mut self.inner).poll_write(cx, buf))?;
        self.count(Way::Out, n)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A stream that first gives back bytes already read from it.
pub struct Rewind<S> {
    read: Bytes,
    inner: S,
}

impl<S> Rewind<S> {
    /// `inner`, with `read` (bytes taken from it) given back first.
    pub fn new(read: Vec<u8>, inner: S) -> Self {
        Self {
            read: Bytes::from(read),
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.read.is_empty() {
            let n = self.read.len().min(buf.remaining());
            let chunk = self.read.split_to(n);
            buf.put_slice(&chunk);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
