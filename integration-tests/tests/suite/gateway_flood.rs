//! A connection flood against the real binary: 2,000 connections from one address (the
//! loopback every local bot shares) each send the start of a request head and then a
//! byte every 2 s, reconnecting when the gateway closes them; meanwhile `GET /healthz`
//! and a tool call, each on a new connection, must answer within a second, every time.
//! The test prints what the core held and its memory before and during the flood
//! (docs/http-api.md, "Limits", quotes the figures).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::resource::{getrlimit, setrlimit, Resource};
use serde_json::json;

use crate::harness::{Options, Skillbox};

/// Connections of the flood.
const FLOOD: usize = 2_000;
/// A flood connection sends one more byte of its head this often.
const TRICKLE_EVERY: Duration = Duration::from_secs(2);
/// How long the probes run under the flood.
const PROBING: Duration = Duration::from_secs(10);
/// The requirement: every probe answers within this.
const ANSWER_WITHIN: Duration = Duration::from_secs(1);
/// A probe's read gives up after this (a failure, reported with the others).
const PROBE_GIVE_UP: Duration = Duration::from_secs(5);
/// The start of a head that never ends.
const SLOW_HEAD: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ";

/// Raises this process's soft open-file limit to the hard limit (the flood's sockets).
fn raise_own_open_files_limit() -> u64 {
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    hard
}

/// The sockets `pid` holds open.
fn sockets_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.flatten()
                .filter(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// A `VmRSS`-like line of `/proc/<pid>/status`, in KiB.
fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// What the flood saw.
#[derive(Debug, Default)]
struct FloodStats {
    /// Rounds of trickling done.
    rounds: AtomicUsize,
    /// Connections of the flood the gateway held open, at most, at the start of a round.
    held_most: AtomicUsize,
    /// Connections the gateway closed (evicted, or cut at the head timeout) and the flood
    /// opened again.
    reopened: AtomicUsize,
    /// Connections closed with an answer (a 503).
    answered: AtomicUsize,
}

/// A slow head, connected and started; `None` when the connect failed.
fn open_slow(addr: &str) -> Option<TcpStream> {
    let mut tcp = TcpStream::connect(addr).ok()?;
    tcp.write_all(SLOW_HEAD).ok()?;
    tcp.set_nonblocking(true).ok()?;
    Some(tcp)
}

/// Whether the gateway still holds `tcp` open (it sent nothing and did not close it).
fn still_open(tcp: &mut TcpStream, stats: &FloodStats) -> bool {
    let mut buf = [0u8; 512];
    match tcp.read(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => true,
        Ok(0) | Err(_) => false,
        Ok(_) => {
            stats.answered.fetch_add(1, Ordering::Relaxed);
            false
        }
    }
}

/// Opens the flood, says so on `ready`, then every [`TRICKLE_EVERY`] sends each open
/// connection one more byte and opens again those the gateway closed, until `stop`.
fn flood(
    addr: String,
    stop: Arc<AtomicBool>,
    stats: Arc<FloodStats>,
    ready: mpsc::Sender<()>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut conns: Vec<Option<TcpStream>> = (0..FLOOD).map(|_| open_slow(&addr)).collect();
        let _ = ready.send(());
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(TRICKLE_EVERY);
            // First every connection, then the reopening (each of which evicts one).
            for slot in &mut conns {
                let alive = slot
                    .as_mut()
                    .is_some_and(|tcp| still_open(tcp, &stats) && tcp.write(b"a").is_ok());
                if !alive {
                    *slot = None;
                }
            }
            let held = conns.iter().filter(|c| c.is_some()).count();
            stats.held_most.fetch_max(held, Ordering::Relaxed);
            for slot in conns.iter_mut().filter(|c| c.is_none()) {
                *slot = open_slow(&addr);
                stats.reopened.fetch_add(1, Ordering::Relaxed);
            }
            stats.rounds.fetch_add(1, Ordering::Relaxed);
        }
    })
}

/// One request on a new connection: how long until its whole answer, and its status
/// line, or what failed.
fn probe(addr: &str, request: &str) -> (Duration, Result<String, String>) {
    let started = Instant::now();
    let answer = (|| {
        let mut tcp = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
        tcp.set_read_timeout(Some(PROBE_GIVE_UP))
            .map_err(|e| e.to_string())?;
        tcp.write_all(request.as_bytes())
            .map_err(|e| format!("write: {e}"))?;
        let mut raw = Vec::new();
        tcp.read_to_end(&mut raw)
            .map_err(|e| format!("read: {e}"))?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        if text.starts_with("HTTP/1.1 200") {
            Ok(text)
        } else {
            Err(format!("answer: {text:?}"))
        }
    })();
    (started.elapsed(), answer)
}

#[test]
fn gateway_flood_keeps_health_and_calls_answering() {
    let fd_limit = raise_own_open_files_limit();
    let sb = Skillbox::start(Options::default());
    let addr = sb.addr.clone();
    let core = sb.pid();
    assert_eq!(
        sb.call_ok("echo:echo", json!({"text": "warm"}))["echo"]["text"],
        "warm"
    );
    let health = format!("GET /healthz HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    let body = json!({"tool": "echo:echo", "args": {"text": "under flood"}}).to_string();
    let call = format!(
        "POST /v1/tools/call HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\
         authorization: Bearer {}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        sb.token,
        body.len()
    );
    let (sockets_before, rss_before) = (sockets_of(core), status_kib(core, "VmRSS:"));

    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(FloodStats::default());
    let (ready, opened) = mpsc::channel();
    let flooding = flood(addr.clone(), Arc::clone(&stop), Arc::clone(&stats), ready);
    opened.recv().unwrap();
    let (mut sockets_during, mut rss_during) = (0, 0);
    let mut probes = Vec::new();
    let deadline = Instant::now() + PROBING;
    while Instant::now() < deadline {
        let (took, answer) = probe(&addr, &health);
        probes.push(("GET /healthz", took, answer));
        let (took, answer) = probe(&addr, &call);
        let answer = answer.and_then(|text| match text.contains("under flood") {
            true => Ok(text),
            false => Err(format!("not the echo: {text:?}")),
        });
        probes.push(("echo:echo", took, answer));
        sockets_during = sockets_during.max(sockets_of(core));
        rss_during = rss_during.max(status_kib(core, "VmRSS:"));
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    flooding.join().unwrap();

    let slowest = |what: &str| {
        probes
            .iter()
            .filter(|(w, _, _)| *w == what)
            .map(|(_, took, _)| *took)
            .max()
            .unwrap_or_default()
    };
    println!(
        "flood of {FLOOD} slow heads from 127.0.0.1 (test fd limit {fd_limit}), {} rounds: \
         the core held {sockets_before} sockets before, at most {sockets_during} during; \
         at most {} flood connections held at once, {} closed by the core and reopened, {} \
         answered; VmRSS {rss_before} KiB before, at most {rss_during} KiB during (VmHWM {} \
         KiB); {} probes, the slowest /healthz {:?}, the slowest echo:echo {:?}",
        stats.rounds.load(Ordering::Relaxed),
        stats.held_most.load(Ordering::Relaxed),
        stats.reopened.load(Ordering::Relaxed),
        stats.answered.load(Ordering::Relaxed),
        status_kib(core, "VmHWM:"),
        probes.len(),
        slowest("GET /healthz"),
        slowest("echo:echo"),
    );
    let failed: Vec<String> = probes
        .iter()
        .filter(|(_, took, answer)| answer.is_err() || *took > ANSWER_WITHIN)
        .map(|(what, took, answer)| format!("{what} after {took:?}: {:?}", answer.as_ref().err()))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} probes failed or took over {ANSWER_WITHIN:?}:\n{}",
        failed.len(),
        probes.len(),
        failed.join("\n")
    );
    assert!(
        sockets_during >= sockets_before + 1000,
        "the flood was held ({sockets_during} sockets), not refused at the door"
    );
}
