//! The executor's side of egress (docs/sandbox.md): every connection a network call's
//! programs make to the proxy port on their loopback ([`crate::sandbox::netns`]) is carried
//! to the core's egress proxy on a stream of its own ([`CapabilityBroker::egress`]: `POST
//! /egress` upgraded over the channel's mutual TLS, naming the call and presenting its
//! capability token), bytes copied both ways until either side is done. The executor
//! never reads the bytes: which hosts a call may reach, and every refusal (`403` with
//! `X-Skillbox-Refused`), is the core's. Only when no stream to the core can be opened does
//! the executor answer the program itself: `502` with `X-Skillbox-Refused` saying why.
//!
//! [`relay`] serves one call's listener; it never returns, and the call (or session)
//! drops it when it ends, which closes the listener and every connection it carries.

use std::convert::Infallible;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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

/// Serves `listener`, the proxy port of `call`'s namespace, until dropped: each accepted
/// connection is carried to the core through `broker`, at most
/// [`MAX_CONNECTIONS_PER_CALL`] at once. Never returns.
pub async fn relay<B: CapabilityBroker>(
    listener: TcpListener,
    broker: &B,
    call: &CallInfo,
) -> Infallible {
    let mut open = FuturesUnordered::new();
    loop {
        tokio::select! {
            accepted = listener.accept(), if open.len() < MAX_CONNECTIONS_PER_CALL => {
                match accepted {
                    Ok((conn, _)) => open.push(carry(conn, broker, call)),
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting a connection on a call's proxy port failed");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                }
            }
            Some(()) = open.next(), if !open.is_empty() => {}
        }
    }
}

/// Carries one connection: opens its stream to the core and copies both ways until both
/// sides are done, or answers the refusal when no stream can be opened.
async fn carry<B: CapabilityBroker>(mut conn: TcpStream, broker: &B, call: &CallInfo) {
    let _ = conn.set_nodelay(true);
    match broker.egress(call).await {
        Ok(mut stream) => {
            let copied = tokio::io::copy_bidirectional_with_sizes(
                &mut conn,
                &mut stream,
                COPY_BUFFER_BYTES,
                COPY_BUFFER_BYTES,
            )
            .await;
            if let Err(e) = copied {
                tracing::debug!(error = %e, "an egress connection ended with an error");
            }
        }
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
