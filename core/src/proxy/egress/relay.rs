//! Copying a connection's bytes both ways once the proxy let it through: each byte counted
//! for the connection's record and against its call's bytes limit, and the connection
//! closed when it has carried nothing either way for the idle timeout.
//!
//! When the program stops sending, the server is told (its writing side shut) and the
//! answer still flows; when the server stops sending, the connection is over. A program
//! that closed its side and is then gone when the server's last bytes (a TLS
//! `close_notify`) come ended normally.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::log::EgressLog;

/// Bytes read at once at first, and at most: a read that fills the buffer doubles it up to
/// [`MAX_CHUNK`], so a bulk download moves in large reads (a relay's throughput follows
/// the size of each read: docs/hot-path.md, "Egress proxy") while the many connections
/// that carry little keep small buffers.
const CHUNK: usize = 64 * 1024;
/// The largest read.
const MAX_CHUNK: usize = 1024 * 1024;

/// How a connection that was let through ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The server closed it (or the program, once the answer was through).
    Done,
    /// Nothing moved either way for the idle timeout.
    Idle(Duration),
    /// The call's bytes passed `[egress] max_bytes_per_call`.
    BytesLimit(u64),
    /// Reading or writing failed.
    Broken(String),
}

impl Ended {
    /// The reason recorded for a connection that ended so; `None` for a normal end.
    pub fn reason(&self) -> Option<String> {
        match self {
            Ended::Done => None,
            Ended::Idle(d) => Some(format!(
                "closed: nothing moved for {} ms ([egress] idle_timeout_ms)",
                d.as_millis()
            )),
            Ended::BytesLimit(max) => Some(format!(
                "closed: the call moved more than {max} bytes through the proxy ([egress] \
                 max_bytes_per_call)"
            )),
            Ended::Broken(why) => Some(format!("closed: {why}")),
        }
    }
}

/// Which way bytes go.
#[derive(Debug, Clone, Copy)]
pub enum Way {
    /// Program to server.
    Out,
    /// Server to program.
    In,
}

/// One connection's counters and its call's budget.
#[derive(Debug)]
pub struct Meter {
    log: EgressLog,
    max_bytes: u64,
    idle: Duration,
    began: Instant,
    /// Milliseconds after `began` of the last byte moved.
    last_ms: AtomicU64,
    out: AtomicU64,
    inn: AtomicU64,
}

impl Meter {
    /// A meter counting against `log`'s call, closing after `idle` without bytes.
    pub fn new(log: EgressLog, max_bytes: u64, idle: Duration) -> Self {
        Self {
            log,
            max_bytes,
            idle,
            began: Instant::now(),
            last_ms: AtomicU64::new(0),
            out: AtomicU64::new(0),
            inn: AtomicU64::new(0),
        }
    }

    /// The idle timeout.
    pub fn idle(&self) -> Duration {
        self.idle
    }

    /// `(bytes_out, bytes_in)` so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.out.load(Ordering::Acquire),
            self.inn.load(Ordering::Acquire),
        )
    }

    /// Counts `n` bytes going `way`; `Err` when they would pass the call's limit (they
    /// must not be sent).
    pub fn spend(&self, way: Way, n: usize) -> Result<(), Ended> {
        let n = u64::try_from(n).unwrap_or(u64::MAX);
        if !self.log.spend(n, self.max_bytes) {
            return Err(Ended::BytesLimit(self.max_bytes));
        }
        match way {
            Way::Out => self.out.fetch_add(n, Ordering::AcqRel),
            Way::In => self.inn.fetch_add(n, Ordering::AcqRel),
        };
        let now = u64::try_from(self.began.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(now, Ordering::Release);
        Ok(())
    }

    /// Writes `bytes` going `way` to `w`, counted first.
    pub async fn send<W: AsyncWrite + Unpin>(
        &self,
        w: &mut W,
        way: Way,
        bytes: &[u8],
    ) -> Result<(), Ended> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.spend(way, bytes.len())?;
        w.write_all(bytes)
            .await
            .map_err(|e| Ended::Broken(format!("writing failed: {e}")))
    }

    /// Completes once nothing has moved for the idle timeout.
    pub async fn idle_expired(&self) {
        loop {
            let last = Duration::from_millis(self.last_ms.load(Ordering::Acquire));
            let due = self.began + last + self.idle;
            if Instant::now() >= due {
                return;
            }
            tokio::time::sleep_until(due.into()).await;
        }
    }
}

/// Copies `program` ⇄ `server` until the server is done, a limit is hit or either breaks.
pub async fn relay<P, S>(program: P, server: S, meter: &Meter) -> Ended
where
    P: AsyncRead + AsyncWrite + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (pr, pw) = tokio::io::split(program);
    let (sr, sw) = tokio::io::split(server);
    let out = pump(pr, sw, meter, Way::Out);
    let inn = pump(sr, pw, meter, Way::In);
    tokio::pin!(out, inn);
    let mut out_done = false;
    loop {
        tokio::select! {
            r = &mut out, if !out_done => match r {
                Ok(()) => out_done = true,
                Err(e) => return e,
            },
            r = &mut inn => return match r {
                // The program closed its side first and is gone: a normal end.
                Err(Ended::Broken(_)) if out_done => Ended::Done,
                Err(e) => e,
                Ok(()) => Ended::Done,
            },
            () = meter.idle_expired() => return Ended::Idle(meter.idle),
        }
    }
}

/// Copies `r` to `w` until `r` ends (then shuts `w`).
async fn pump<R, W>(mut r: R, mut w: W, meter: &Meter, way: Way) -> Result<(), Ended>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = r
            .read(&mut buf)
            .await
            .map_err(|e| Ended::Broken(format!("reading failed: {e}")))?;
        if n == 0 {
            let _ = w.shutdown().await;
            return Ok(());
        }
        meter.send(&mut w, way, &buf[..n]).await?;
        if n == buf.len() && buf.len() < MAX_CHUNK {
            buf.resize(buf.len() * 2, 0);
        }
    }
}
