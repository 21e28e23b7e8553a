//! Connections to a stream server made ahead of need ([`super::StreamClient`]). Opening a
//! stream on a fresh connection costs a TCP connect and a mutual-TLS handshake (both
//! sides sign and verify) before the upgrade's one round trip; a program waiting for its
//! egress connection, or a call waiting for its context's files, paid for both. Here they
//! are done beforehand, off that path: a stream takes a connection that is ready, and once
//! it is upgraded the next one is started, [`REFILL_AFTER`] later.
//!
//! Nothing is sent on a connection until a stream takes it, so each still carries exactly
//! one upgrade, as a fresh one does, and the server sees the same requests. A connection
//! older than [`MAX_AGE`] is closed instead of used (the server's certificate may have
//! been rotated since its handshake). One the server closed meanwhile fails at its upgrade,
//! and the stream is opened on a fresh connection ([`super::StreamClient`]).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

/// A connection with its TLS handshake done and no request sent.
pub(super) type Connected = tokio_rustls::client::TlsStream<TcpStream>;

/// Connections kept ready for the next streams.
pub const READY: usize = 2;

/// How long after a stream took its connection the next one is started. Its handshake
/// costs both processes a signature and a verification; started at once, it ran beside the
/// stream that took the last one (the upgrade and a small request's whole exchange) on the
/// same cores, and added about 0.4 ms to such a request (docs/hot-path.md). With [`READY`]
/// made ahead, a program opening connections back to back still finds one ready.
pub const REFILL_AFTER: Duration = Duration::from_millis(1);

/// Oldest a ready connection is used.
pub const MAX_AGE: Duration = Duration::from_secs(20);

/// The ready connections of one stream client.
#[derive(Default)]
pub(super) struct WarmPool {
    ready: Mutex<VecDeque<(Instant, Connected)>>,
    /// Connections being made for the pool.
    filling: AtomicUsize,
}

impl WarmPool {
    /// A ready connection no older than [`MAX_AGE`], if there is one (older ones are closed).
    pub fn take(&self) -> Option<Connected> {
        let mut ready = self.ready.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((made, conn)) = ready.pop_front() {
            if made.elapsed() < MAX_AGE {
                return Some(conn);
            }
        }
        None
    }

    /// How many connections are ready now.
    pub fn ready(&self) -> usize {
        self.ready.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Starts making connections by `connect` until [`READY`] are ready or being made. A
    /// connection that cannot be made is not retried here: the next stream tries again.
    pub fn fill<F, Fut>(self: &Arc<Self>, connect: F)
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Option<Connected>> + Send + 'static,
    {
        loop {
            let filling = self.filling.load(Ordering::Acquire);
            if self.ready() + filling >= READY {
                return;
            }
            if self
                .filling
                .compare_exchange(filling, filling + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            let pool = Arc::clone(self);
            let making = connect();
            tokio::spawn(async move {
                tokio::time::sleep(REFILL_AFTER).await;
                let made = making.await;
                if let Some(conn) = made {
                    let mut ready = pool.ready.lock().unwrap_or_else(|p| p.into_inner());
                    if ready.len() < READY {
                        ready.push_back((Instant::now(), conn));
                    }
                }
                pool.filling.fetch_sub(1, Ordering::AcqRel);
            });
        }
    }
}
