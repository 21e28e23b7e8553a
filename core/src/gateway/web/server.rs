//! The gateway's HTTP/1.1 server: the accept loop and what bounds a connection
//! (docs/http-api.md, "Limits"). Every bound has a `[gateway]` key:
//! - a request head must be in within `header_timeout_ms`, counted from when the
//!   connection starts waiting for it (hyper's header read timeout, on a tokio timer);
//! - a body is refused from its `Content-Length` when over `max_request_bytes` (413)
//!   before a byte of it is read, and given up after `body_timeout_ms` (408)
//!   ([`super::request::read_bounded`]); both answers close the connection, whose body is
//!   then never read;
//! - a kept-alive connection with no request in progress is closed after
//!   `idle_timeout_ms`;
//! - at most `max_connections` connections are served. Past the cap,
//!   `healthz_reserve_connections` more are each served one request, answered only when it
//!   is `GET /healthz` (anything else 503), so a health probe keeps answering while the
//!   cap is hit; past both, a connection gets a fixed 503 and is closed at once.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use skillbox_protocol::result::ErrorKind;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::error::ApiError;
use crate::gateway::Gateway;
use crate::state::config::GatewayConfig;

/// What bounds the gateway's connections and request bodies (`[gateway]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Longest wait for a request head (`header_timeout_ms`).
    pub header_timeout: Duration,
    /// Longest wait for a whole request body (`body_timeout_ms`).
    pub body_timeout: Duration,
    /// A kept-alive connection with no request in progress is closed after this
    /// (`idle_timeout_ms`).
    pub idle_timeout: Duration,
    /// Connections served at once (`max_connections`).
    pub max_connections: usize,
    /// Connections past the cap that may ask `GET /healthz` (`healthz_reserve_connections`).
    pub healthz_reserve: usize,
}

impl ServerLimits {
    /// The limits `[gateway]` sets.
    pub fn from_config(c: &GatewayConfig) -> Self {
        Self {
            header_timeout: Duration::from_millis(c.header_timeout_ms),
            body_timeout: Duration::from_millis(c.body_timeout_ms),
            idle_timeout: Duration::from_millis(c.idle_timeout_ms),
            max_connections: c.max_connections,
            healthz_reserve: c.healthz_reserve_connections,
        }
    }
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self::from_config(&GatewayConfig::default())
    }
}

/// Which slot a connection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// One of `max_connections`: every route, kept alive.
    Full,
    /// One of the reserve past the cap: one request, only `GET /healthz` answered.
    HealthOnly,
}

/// Serves the gateway on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, gateway: Arc<Gateway>) {
    let limits = gateway.server_limits.clone();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let reserve = Arc::new(Semaphore::new(limits.healthz_reserve));
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "gateway accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let (permit, slot) = match Arc::clone(&slots).try_acquire_owned() {
            Ok(p) => (p, Slot::Full),
            Err(_) => match Arc::clone(&reserve).try_acquire_owned() {
                Ok(p) => (p, Slot::HealthOnly),
                Err(_) => {
                    refuse_over_cap(&tcp, &limits);
                    continue;
                }
            },
        };
        let gateway = Arc::clone(&gateway);
        tokio::spawn(async move {
            connection(tcp, peer, gateway, slot).await;
            drop(permit);
        });
    }
}

/// The refusal of a connection past the cap and the reserve: written without waiting
/// (a fresh socket's send buffer takes it whole), then the connection is closed.
fn refuse_over_cap(tcp: &TcpStream, limits: &ServerLimits) {
    let body = serde_json::json!({
        "error": over_cap_message(limits),
        "error_kind": ErrorKind::Unavailable,
    })
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    );
    let _ = tcp.try_write(answer.as_bytes());
    tracing::debug!("gateway connection refused: connection cap and health reserve in use");
}

fn over_cap_message(limits: &ServerLimits) -> String {
    format!(
        "the gateway is serving its {} connections (gateway.max_connections); retry shortly, \
         reuse a kept-alive connection, or raise gateway.max_connections",
        limits.max_connections
    )
}

/// Whether a request is in progress on a connection, and since when none is.
#[derive(Debug)]
struct Activity {
    start: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds after `start` when the last request finished.
    last_done_ms: AtomicU64,
}

/// A request in progress; its drop marks the connection idle from now.
struct Busy(Arc<Activity>);

impl Activity {
    fn begin(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(self))
    }

    /// How long no request has been in progress; `None` while one is.
    fn idle_for(&self) -> Option<Duration> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let since = Duration::from_millis(self.last_done_ms.load(Ordering::SeqCst));
        Some(self.start.elapsed().saturating_sub(since))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let now = u64::try_from(self.0.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.0.last_done_ms.store(now, Ordering::SeqCst);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves one connection within the limits; returns when it is closed.
async fn connection(tcp: TcpStream, peer: SocketAddr, gateway: Arc<Gateway>, slot: Slot) {
    let limits = gateway.server_limits.clone();
    let activity = Arc::new(Activity {
        start: Instant::now(),
        in_flight: AtomicUsize::new(0),
        last_done_ms: AtomicU64::new(0),
    });
    let service = {
        let activity = Arc::clone(&activity);
        service_fn(move |req: Request<Incoming>| {
            let gateway = Arc::clone(&gateway);
            let busy = activity.begin();
            async move {
                let mut response = match slot {
                    Slot::Full => Arc::clone(&gateway).handle(req).await,
                    Slot::HealthOnly => health_only(gateway, req).await,
                };
                close_after_unread_body(&mut response);
                drop(busy);
                Ok::<_, Infallible>(response)
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(slot == Slot::Full);
    let conn = builder.serve_connection(TokioIo::new(tcp), service);
    tokio::pin!(conn);
    let mut closing = false;
    loop {
        let wait = match activity.idle_for() {
            Some(idle) => limits.idle_timeout.saturating_sub(idle),
            None => limits.idle_timeout,
        };
        tokio::select! {
            ended = conn.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!(%peer, error = %e, "gateway connection ended");
                }
                return;
            }
            () = tokio::time::sleep(wait), if !closing => {
                if activity.idle_for().is_some_and(|idle| idle >= limits.idle_timeout) {
                    tracing::debug!(%peer, "gateway connection idle past gateway.idle_timeout_ms; closing");
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}

/// A connection of the health reserve: `GET /healthz` is answered, anything else 503.
async fn health_only(gateway: Arc<Gateway>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() == Method::GET && req.uri().path() == "/healthz" {
        return gateway.handle(req).await;
    }
    ApiError::new(
        ErrorKind::Unavailable,
        over_cap_message(&gateway.server_limits),
    )
    .into_response()
}

/// A 413 or 408 leaves the rest of the body unread: the connection closes after it.
fn close_after_unread_body(response: &mut Response<Full<Bytes>>) {
    if matches!(
        response.status(),
        StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT
    ) {
        response
            .headers_mut()
            .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
}

#[cfg(test)]
mod tests;
