//! Capped reading of a tool's output: stdout and stderr share one byte budget
//! (`max_output_bytes`); stderr keeps its tail for error messages.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;

/// Bytes of stderr kept for error messages.
pub const STDERR_TAIL_BYTES: usize = 4096;

/// The shared output budget of one call.
#[derive(Debug)]
pub struct Budget {
    max: u64,
    used: AtomicU64,
    /// Woken once when the budget is exceeded.
    pub exceeded: Notify,
}

impl Budget {
    /// A budget of `max` bytes.
    pub fn new(max: u64) -> Arc<Self> {
        Arc::new(Self {
            max,
            used: AtomicU64::new(0),
            exceeded: Notify::new(),
        })
    }

    /// Charges `n` bytes; false (and a wake-up) when over budget.
    pub fn charge(&self, n: usize) -> bool {
        let used = self.used.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        if used > self.max {
            self.exceeded.notify_one();
            return false;
        }
        true
    }

    /// The limit.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Whether the budget is spent.
    pub fn is_exceeded(&self) -> bool {
        self.used.load(Ordering::Relaxed) > self.max
    }
}

/// The stderr log of a call: its first [`STDERR_HEAD_BYTES`] and its last
/// [`STDERR_TAIL_BYTES`]. The head keeps what a runtime says before a long trace: V8's
/// "Fatal process out of memory" comes before a native stack trace that can push it out of
/// the tail, and a call stopped by its memory limit then looked like any other crash.
#[derive(Debug, Default)]
pub struct StderrLog {
    head: Vec<u8>,
    tail: Vec<u8>,
}

/// How much of the start of a call's stderr is kept.
pub const STDERR_HEAD_BYTES: usize = 4096;

impl StderrLog {
    fn push(&mut self, bytes: &[u8]) {
        let room = STDERR_HEAD_BYTES.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > STDERR_TAIL_BYTES {
            let cut = self.tail.len() - STDERR_TAIL_BYTES;
            self.tail.drain(..cut);
        }
    }

    /// The kept tail as text.
    pub fn tail(&self) -> String {
        String::from_utf8_lossy(&self.tail).into_owned()
    }

    /// The kept head as text.
    pub fn head(&self) -> String {
        String::from_utf8_lossy(&self.head).into_owned()
    }
}

/// Reads `stream` to its end (or until the budget is spent), keeping a tail in `log`.
pub async fn drain_stderr<R: AsyncRead + Unpin>(
    mut stream: R,
    budget: Arc<Budget>,
    log: Arc<Mutex<StderrLog>>,
) {
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if let Ok(mut l) = log.lock() {
                    l.push(&buf[..n]);
                }
                if !budget.charge(n) {
                    return;
                }
            }
        }
    }
}

/// Reads all of `stream` into memory within the budget; `None` when the budget ran out.
pub async fn read_all<R: AsyncRead + Unpin>(mut stream: R, budget: &Budget) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return Some(out),
            Ok(n) => {
                if !budget.charge(n) {
                    return None;
                }
                out.extend_from_slice(&buf[..n]);
            }
        }
    }
}
