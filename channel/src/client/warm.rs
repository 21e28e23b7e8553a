//! Streams to a stream server made ahead of need ([`super::StreamClient`]). Opening a
//! stream on a fresh connection costs a TCP connect and a mutual-TLS handshake (both
//! sides sign and verify) and the upgrade's round trip; a program waiting for its egress
//! connection, or a call waiting for its context's files, paid for all three. Here they are
//! done beforehand, off that path: each connection is upgraded with no call named
//! ([`crate::ahead`]), a stream takes one that is ready and names its call in its first
//! bytes, and the next one is started [`REFILL_AFTER`] later.
//!
//! A stream older than [`MAX_AGE`] is closed instead of used (the server's certificate
//! may have been rotated since its handshake). One the server closed meanwhile is seen as
//! closed when it is taken, and the stream is opened on a fresh connection
//! ([`super::StreamClient`]).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Streams kept ready for the next calls.
pub const READY: usize = 2;

/// How long after a call took its stream the next one is started. Its handshake costs
/// both processes a signature and a verification; started at once, it ran beside the
/// stream that took the last one (a small request's whole exchange) on the same cores,
/// and added about 0.4 ms to such a request (docs/hot-path.md). With [`READY`] made
/// ahead, a program opening connections back to back still finds one ready.
pub const REFILL_AFTER: Duration = Duration::from_millis(1);

/// Oldest a ready stream is used.
pub const MAX_AGE: Duration = Duration::from_secs(20);

/// The ready streams of one stream client.
pub(super) struct WarmPool<T> {
    ready: Mutex<VecDeque<(Instant, T)>>,
    /// Streams being made for the pool.
    filling: AtomicUsize,
}

impl<T> Default for WarmPool<T> {
    fn default() -> Self {
        Self {
            ready: Mutex::default(),
            filling: AtomicUsize::new(0),
        }
    }
}

impl<T: Send + 'static> WarmPool<T> {
    /// A ready stream no older than [`MAX_AGE`], if there is one (older ones are closed).
    pub fn take(&self) -> Option<T> {
        let mut ready = self.ready.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((made, conn)) = ready.pop_front() {
            if made.elapsed() < MAX_AGE {
                return Some(conn);
            }
        }
        None
    }

    /// How many streams are ready now.
    pub fn ready(&self) -> usize {
        self.ready.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Starts making streams by `connect` until [`READY`] are ready or being made. A
    /// stream that cannot be made is not retried here: the next call tries again.
    pub fn fill<F, Fut>(self: &Arc<Self>, connect: F)
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Option<T>> + Send + 'static,
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
