//! A progress line for long work the CLI waits on (a dependency build): on a terminal,
//! `LABEL… 12 s` redrawn every second on stderr and cleared at the end; elsewhere (a log,
//! a pipe) one plain line at the start and one every [`PLAIN_EVERY`], so logs stay
//! readable.

use std::io::{IsTerminal, Write};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a plain (not a terminal) line says the work goes on.
pub const PLAIN_EVERY: Duration = Duration::from_secs(15);

/// The line, drawn until this is dropped.
pub struct Ticker {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Starts the line for `label` (what is being waited for).
    pub fn start(label: String) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || draw(&label, terminal, &stopped))
            .ok();
        Self {
            stop: Some(stop),
            thread,
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn draw(label: &str, terminal: bool, stopped: &mpsc::Receiver<()>) {
    let started = Instant::now();
    let tick = if terminal {
        Duration::from_secs(1)
    } else {
        PLAIN_EVERY
    };
    let mut err = std::io::stderr();
    if !terminal {
        let _ = writeln!(err, "{label}…");
    }
    loop {
        if terminal {
            let _ = write!(err, "\r{label}… {} s ", started.elapsed().as_secs());
            let _ = err.flush();
        }
        match stopped.recv_timeout(tick) {
            Err(mpsc::RecvTimeoutError::Timeout) if !terminal => {
                let _ = writeln!(err, "{label}… {} s", started.elapsed().as_secs());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => break,
        }
    }
    if terminal {
        // Clear the line: what follows is the result.
        let _ = write!(err, "\r{}\r", " ".repeat(label.chars().count() + 16));
        let _ = err.flush();
    }
}
