//! The gateway's HTTP/1.1 server: the accept loop and what bounds a connection
//! (docs/http-api.md, "Limits"). Every bound has a `[gateway]` key:
//! - a request head must be in within `header_timeout_ms`, counted from when the
//!   connection starts waiting for it (hyper's header read timeout, on a tokio timer);
//!   a connection accepted while `high_water_connections` are open, and every connection
//!   of the health reserve, gets `header_timeout_under_load_ms` instead; a head is at most
//!   [`MAX_HEAD_BYTES`] (431 past it);
//! - a body is refused from its `Content-Length` when over `max_request_bytes` (413)
//!   before a byte of it is read, and given up after `body_timeout_ms` (408)
//!   ([`super::request::read_bounded`]); both answers close the connection, whose body is
//!   then never read;
//! - a kept-alive connection with no request in progress is closed after
//!   `idle_timeout_ms`;
//! - a peer address holds at most `max_connections_per_peer` connections: past it, its
//!   new connection evicts its oldest connection with no request in progress (a slow head
//!   pays, a head sent at once gets in), or gets a fixed 503 when each has a request in
//!   progress ([`admission`]);
//! - at most `max_connections` connections are served (by default half the open-file
//!   limit, [`GatewayConfig::max_connections_for`]). Past the cap,
//!   `healthz_reserve_connections` more are each served one request, answered only when it
//!   is `GET /healthz` (anything else 503), so a health probe keeps answering while the
//!   cap is hit; a full reserve evicts its oldest idle connection for a new one; when
//!   every reserve connection has a request in progress, a connection gets a fixed 503
//!   and is closed at once.

mod activity;
mod admission;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use skillbox_protocol::result::ErrorKind;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use self::admission::{over_cap_message, Admission, Refusal, Slot, Ticket};
use super::body::ReplyBody;
use super::error::ApiError;
use crate::gateway::Gateway;
use crate::state::config::gateway::FALLBACK_FD_LIMIT;
use crate::state::config::GatewayConfig;

/// The largest request head (hyper answers 431 past it) and the read buffer a connection
/// grows to: with `max_connections` idle connections, what bounds what their heads hold.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;

/// The gateway listener's queue of connections not yet accepted (the kernel caps it at
/// `net.core.somaxconn`): a burst of new connections waits there instead of having its
/// SYNs dropped (a client then retries after a second).
pub const LISTEN_BACKLOG: u32 = 4096;

/// What bounds the gateway's connections and request bodies (`[gateway]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Longest wait for a request head (`header_timeout_ms`).
    pub header_timeout: Duration,
    /// The head timeout past the high-water mark and in the health reserve
    /// (`header_timeout_under_load_ms`).
    pub header_timeout_under_load: Duration,
    /// Longest wait for a whole request body (`body_timeout_ms`).
    pub body_timeout: Duration,
    /// A kept-alive connection with no request in progress is closed after this
    /// (`idle_timeout_ms`).
    pub idle_timeout: Duration,
    /// Connections served at once (`max_connections`).
    pub max_connections: usize,
    /// Connections of one peer address at once (`max_connections_per_peer`).
    pub max_connections_per_peer: usize,
    /// Open connections past which a new one gets the short head timeout
    /// (`high_water_connections`).
    pub high_water: usize,
    /// Connections past the cap that may ask `GET /healthz` (`healthz_reserve_connections`).
    pub healthz_reserve: usize,
}

impl ServerLimits {
    /// The limits `[gateway]` sets, the unset caps derived from `fd_limit`, the core's
    /// open-file limit.
    pub fn from_config(c: &GatewayConfig, fd_limit: u64) -> Self {
        let max_connections = c.max_connections_for(fd_limit);
        Self {
            header_timeout: Duration::from_millis(c.header_timeout_ms),
            header_timeout_under_load: Duration::from_millis(c.header_timeout_under_load_ms),
            body_timeout: Duration::from_millis(c.body_timeout_ms),
            idle_timeout: Duration::from_millis(c.idle_timeout_ms),
            max_connections,
            max_connections_per_peer: c.max_connections_per_peer_for(max_connections),
            high_water: c.high_water_for(max_connections),
            healthz_reserve: c.healthz_reserve_connections,
        }
    }
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self::from_config(&GatewayConfig::default(), FALLBACK_FD_LIMIT)
    }
}

/// Binds the gateway's listener on `addr` (`host:port`, the first address it resolves to
/// that binds) with a queue of [`LISTEN_BACKLOG`].
pub async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let mut last = None;
    for resolved in tokio::net::lookup_host(addr).await? {
        let socket = match resolved {
            SocketAddr::V4(_) => TcpSocket::new_v4()?,
            SocketAddr::V6(_) => TcpSocket::new_v6()?,
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(resolved) {
            Ok(()) => return socket.listen(LISTEN_BACKLOG),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            "the address resolves to nothing",
        )
    }))
}

/// Serves the gateway on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, gateway: Arc<Gateway>) {
    let admission = Admission::new(gateway.server_limits.clone());
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
        let ticket = match admission.admit(peer.ip()) {
            Ok(t) => t,
            Err(refusal) => {
                refuse(&tcp, &refusal.message(&gateway.server_limits));
                continue;
            }
        };
        let gateway = Arc::clone(&gateway);
        tokio::spawn(connection(tcp, peer, gateway, ticket));
    }
}

/// The refusal of a connection the admission did not take: written without waiting (a
/// fresh socket's send buffer takes it whole), then the connection is closed.
fn refuse(tcp: &TcpStream, message: &str) {
    let body = serde_json::json!({
        "error": message,
        "error_kind": ErrorKind::Unavailable,
    })
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    );
    let _ = tcp.try_write(answer.as_bytes());
    tracing::debug!(message, "gateway connection refused");
}

/// Serves one connection within the limits; returns when it is closed, or evicted.
async fn connection(tcp: TcpStream, peer: SocketAddr, gateway: Arc<Gateway>, ticket: Ticket) {
    let limits = gateway.server_limits.clone();
    let (slot, activity) = (ticket.slot, Arc::clone(&ticket.activity));
    let service = {
        let activity = Arc::clone(&activity);
        service_fn(move |req: Request<Incoming>| {
            let gateway = Arc::clone(&gateway);
            let busy = activity.begin();
            async move {
                let mut response = match (slot, &busy) {
                    // Evicted as its head completed: the connection is being closed.
                    (_, None) => ApiError::new(
                        ErrorKind::Unavailable,
                        Refusal::Evicted.message(&gateway.server_limits),
                    )
                    .into_response()
                    .map(ReplyBody::from),
                    (Slot::Full, Some(_)) => Arc::clone(&gateway).handle(req).await,
                    (Slot::HealthOnly, Some(_)) => health_only(gateway, req).await,
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
        .header_read_timeout(ticket.header_timeout)
        .max_header_size(MAX_HEAD_BYTES)
        .max_buf_size(MAX_HEAD_BYTES)
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
            () = activity.evicted() => {
                tracing::debug!(%peer, "gateway connection evicted for a newer one of its peer");
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
async fn health_only(gateway: Arc<Gateway>, req: Request<Incoming>) -> Response<ReplyBody> {
    if req.method() == Method::GET && req.uri().path() == "/healthz" {
        return gateway.handle(req).await;
    }
    ApiError::new(
        ErrorKind::Unavailable,
        over_cap_message(&gateway.server_limits),
    )
    .into_response()
    .map(ReplyBody::from)
}

/// A 413 or 408 leaves the rest of the body unread: the connection closes after it.
fn close_after_unread_body(response: &mut Response<ReplyBody>) {
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
mod flood_tests;
#[cfg(test)]
mod tests;
