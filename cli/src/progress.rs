//! A progress line for long work the CLI waits on (a dependency build): on a terminal,
//! `LABEL… 12 s` (and what the work says of itself: `, 3 downloads, 48.2 MB`) redrawn
//! every second on stderr and cleared at the end; elsewhere (a log, a pipe) one plain
//! line at the start and one every [`PLAIN_EVERY`], so logs stay readable.

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
    /// Starts the line for `label` (what is being waited for), with what `detail` says at each redraw (asked on the
    /// line's own thread).
    pub fn start_with(
        label: String,
        detail: impl FnMut() -> Option<String> + Send + 'static,
    ) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || draw(&label, terminal, &stopped, detail))
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

fn draw(
    label: &str,
    terminal: bool,
    stopped: &mpsc::Receiver<()>,
    mut detail: impl FnMut() -> Option<String>,
) {
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
    let mut widest = 0;
    loop {
        let line = |detail: Option<String>| {
            let secs = started.elapsed().as_secs();
            match detail {
                Some(d) => format!("{label}… {secs} s, {d}"),
                None => format!("{label}… {secs} s"),
            }
        };
        if terminal {
            let now = line(detail());
            widest = widest.max(now.chars().count());
            let _ = write!(err, "\r{now:<widest$} ");
            let _ = err.flush();
        }
        match stopped.recv_timeout(tick) {
            Err(mpsc::RecvTimeoutError::Timeout) if !terminal => {
                let _ = writeln!(err, "{}", line(detail()));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => break,
        }
    }
    if terminal {
        // Clear the line: what follows is the result.
        let _ = write!(err, "\r{}\r", " ".repeat(widest + 1));
        let _ = err.flush();
    }
}
