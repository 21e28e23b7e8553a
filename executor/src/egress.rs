//! The executor's side of egress (docs/sandbox.md): every connection a network call's
//! programs make to the proxy port on their loopback ([`crate::sandbox::netns`]) is carried
//! to the core's egress proxy on a stream of its own ([`CapabilityBroker::egress`]: `POST
//! /egress` upgraded over the channel's mutual TLS, naming the call and presenting its
//! capability token), bytes copied both ways until either side is done. The executor
//! never reads the bytes: which hosts a call may reach, and every refusal (`403` with
//! `X-Skillbox-Refused`), is the core's. Only when no stream to the core can be opened does
//! the executor answer the program itself: `502` with `X-Skillbox-Refused` saying why.
//!
//! Programs that ignore the proxy variables reach the same proxy: their lookups are
//! answered in the namespace ([`resolver`]) and their connections taken there by the port
//! they dialled ([`transparent`]).
//!
//! [`relay`] serves one call's listeners; it never returns, and the call (or session)
//! drops it when it ends, which closes the listeners and every connection they carry.

mod resolver;
mod transparent;

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Poll;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use skillbox_channel::stream::BoxedStream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

use crate::broker::{CallInfo, CapabilityBroker};

/// Most connections one call has open through the relay at once; more wait in the
/// listener's backlog (the core limits a call's connections itself, this bounds the
/// executor's descriptors).
pub const MAX_CONNECTIONS_PER_CALL: usize = 64;

/// Bytes buffered each way per connection.
const COPY_BUFFER_BYTES: usize = 64 * 1024;

/// How long a refused connection is read (and what it sent dropped) after the answer, so
/// that closing it does not reset the connection before the program read the answer.
const REFUSAL_LINGER: Duration = Duration::from_secs(2);

/// Pause after a failed `accept` (out of descriptors), before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

pub use crate::broker::EgressError;

/// The listeners of one network call's namespace, for the runtime
/// ([`crate::sandbox::netns::CallNetwork`]).
#[derive(Debug)]
pub struct Listeners {
    proxy: TcpListener,
    transparent: Vec<TcpListener>,
    resolver: Option<UdpSocket>,
}

impl Listeners {
    /// The namespace's sockets on this runtime; `None` without a proxy port (a
    /// loopback-only namespace).
    pub fn from_std(
        proxy: Option<std::net::TcpListener>,
        transparent: Vec<std::net::TcpListener>,
        resolver: Option<std::net::UdpSocket>,
    ) -> std::io::Result<Option<Self>> {
        let Some(proxy) = proxy else {
            return Ok(None);
        };
        Ok(Some(Self {
            proxy: TcpListener::from_std(proxy)?,
            transparent: (transparent.into_iter())
                .map(TcpListener::from_std)
                .collect::<Result<_, _>>()?,
            resolver: resolver.map(UdpSocket::from_std).transpose()?,
        }))
    }
}

/// A connection being carried.
type Carrying<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Serves `listeners`, the namespace of `call`'s processes, until dropped: each accepted
/// connection is carried to the core through `broker`, at most [`MAX_CONNECTIONS_PER_CALL`]
/// at once, and the lookups are answered. Never returns.
pub async fn relay<B: CapabilityBroker>(
    listeners: Listeners,
    broker: &B,
    call: &CallInfo,
) -> Infallible {
    let names = Mutex::new(resolver::Names::default());
    let lookups = async {
        match &listeners.resolver {
            Some(socket) => resolver::serve(socket, &names).await,
            None => std::future::pending().await,
        }
    };
    let carrying = async {
        let mut open: FuturesUnordered<Carrying<'_>> = FuturesUnordered::new();
        loop {
            tokio::select! {
                accepted = listeners.proxy.accept(), if open.len() < MAX_CONNECTIONS_PER_CALL => {
                    match accepted {
                        Ok((conn, _)) => open.push(Box::pin(carry(conn, broker, call))),
                        Err(e) => accept_failed(e).await,
                    }
                }
                accepted = accept_any(&listeners.transparent), if open.len() < MAX_CONNECTIONS_PER_CALL => {
                    match accepted {
                        Ok(conn) => open.push(Box::pin(transparent::carry(conn, &names, broker, call))),
                        Err(e) => accept_failed(e).await,
                    }
                }
                Some(()) = open.next(), if !open.is_empty() => {}
            }
        }
    };
    tokio::select! {
        never = lookups => never,
        never = carrying => never,
    }
}

/// The next connection on any of `listeners` (pending forever when there is none).
async fn accept_any(listeners: &[TcpListener]) -> std::io::Result<TcpStream> {
    std::future::poll_fn(|cx| {
        for listener in listeners {
            if let Poll::Ready(accepted) = listener.poll_accept(cx) {
                return Poll::Ready(accepted.map(|(conn, _)| conn));
            }
        }
        Poll::Pending
    })
    .await
}

/// Logs a failed `accept` (out of descriptors) and waits a moment before the next.
async fn accept_failed(e: std::io::Error) {
    tracing::warn!(error = %e, "accepting a connection in a call's namespace failed");
    tokio::time::sleep(ACCEPT_BACKOFF).await;
}

/// Carries one connection: opens its stream to the core and copies both ways until both
/// sides are done, or answers the refusal when no stream can be opened.
async fn carry<B: CapabilityBroker>(mut conn: TcpStream, broker: &B, call: &CallInfo) {
    let _ = conn.set_nodelay(true);
    match broker.egress(call).await {
        Ok(mut stream) => splice(&mut conn, &mut stream).await,
        Err(e) => {
            tracing::warn!(error = %e, "a connection of the call could not be carried to the core");
            let _ = conn.write_all(refusal(&e).as_bytes()).await;
            let _ = conn.shutdown().await;
            let mut sink = [0u8; 4096];
            let drain = async { while matches!(conn.read(&mut sink).await, Ok(n) if n > 0) {} };
            let _ = tokio::time::timeout(REFUSAL_LINGER, drain).await;
        }
    }
}

/// Copies a program's connection and its stream to the core both ways until both sides
/// are done.
async fn splice(conn: &mut TcpStream, stream: &mut BoxedStream) {
    let copied = tokio::io::copy_bidirectional_with_sizes(
        conn,
        stream,
        COPY_BUFFER_BYTES,
        COPY_BUFFER_BYTES,
    )
    .await;
    if let Err(e) = copied {
        tracing::debug!(error = %e, "an egress connection ended with an error");
    }
}

/// The answer to a program whose connection could not be carried: `502` with the reason in
/// `X-Skillbox-Refused` (as the core's proxy names its refusals) and as the body.
fn refusal(e: &EgressError) -> String {
    let reason: String = (e.to_string().chars())
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!(
        "HTTP/1.1 502 Bad Gateway\r\nX-Skillbox-Refused: {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reason}\n",
        reason.len() + 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_is_one_http_answer_naming_the_reason() {
        let text = refusal(&EgressError::NoCore);
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 502 "), "{head}");
        assert!(head.contains("X-Skillbox-Refused: this executor has no core"));
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(length, body.len());
    }
}
