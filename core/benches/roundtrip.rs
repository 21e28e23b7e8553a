//! Round trip of a tool call through the whole system — bot → gateway → call pipeline →
//! mutual TLS → executor → sandbox → tool and back — next to a bare spawn of the same
//! program, measured side by side in one run (docs/hot-path.md explains the method and
//! keeps the results). Starts the real `skillbox up` (built binaries in the target dir) on
//! a temporary workspace; writes `target/roundtrip-bench.md`.
//!
//! Run: `cargo build --release --workspace && cargo bench -p skillbox-core --bench roundtrip`
//! (`ROUNDTRIP_N` calls per series, default 300; `ROUNDTRIP_PER_CLIENT` calls per client of
//! the 16-client run, default 64; `ROUNDTRIP_LOAD_SECS=S` instead runs 16
//! clients (`ROUNDTRIP_LOAD_CLIENTS`) on the plain tool for S seconds and reports
//! nothing, for a profiler;
//! `ROUNDTRIP_EXECUTOR=PATH` runs another executor binary, e.g. an older build for an A/B
//! comparison run after run, and `ROUNDTRIP_CORE=PATH` another `skillbox`; `ROUNDTRIP_EXECUTOR_TOML` adds `[executor]` lines, e.g.
//! `scratch_tmpfs_mb = 0`).
//!
//! Series, interleaved round by round so that load from elsewhere falls on all alike:
//! - `bare` — the static C tool spawned by `std::process::Command` with its arguments on
//!   stdin, stdout read, reaped: what a fresh process costs without skillbox.
//! - `plain` — the same binary as a `protocol: plain` tool, called through `skillbox up`.
//! - `jsonrpc` — a C tool speaking the JSON-RPC stdio protocol, through `skillbox up`.
//! - `python bare` / `python cold` / `python warm` — `python3 -c` bare, as a plain tool
//!   started cold, and with `execution.prestart: 2`.
//! - `plain, kept connection` — `plain` by a bot that keeps its HTTP connection open.
//!
//! Then 16 clients at once: the bare spawn rate with 16 threads against the call rate of
//! `plain` through `skillbox up` with 16 clients, first each call on a fresh connection,
//! then each client on one kept connection (`ROUNDTRIP_LOAD_KEPT=1` does that in the
//! profiling mode). Nothing here asserts a time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "roundtrip/client.rs"]
mod client;
#[path = "roundtrip/setup.rs"]
mod setup;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use client::{call, stage_totals, KeptBot};
use setup::{children, cpu_ms, sandbox_python, start_up, workspace, PY_SOURCE};

/// A bare spawn of `argv` with `{"n":1}` on stdin, stdout read, reaped; ms.
fn bare(argv: &[&str], dir: &Path) -> f64 {
    let t = Instant::now();
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"n":1}"#)
        .unwrap();
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    assert!(child.wait().unwrap().success());
    t.elapsed().as_secs_f64() * 1000.0
}

/// `n` `plain` calls in a row, each stage's mean from the metrics' sums and counts before
/// and after, and what the client saw beyond them; the bare spawn's mean beside.
fn breakdown(addr: &str, token: &str, n: usize, bare_argv: &[&str], dir: &Path) -> String {
    let before = stage_totals(addr, token);
    let client: f64 = (0..n)
        .map(|_| call(addr, token, "plain:run").0)
        .sum::<f64>()
        / n as f64;
    let after = stage_totals(addr, token);
    let bare_mean: f64 = (0..n).map(|_| bare(bare_argv, dir)).sum::<f64>() / n as f64;
    let mut out = format!(
        "\nWhere a `plain` call's time goes ({n} calls in a row, means from `skillbox_call_stage_seconds`):\n\n| stage | mean µs |\n|---|---|\n"
    );
    let mut staged = 0.0;
    for ((stage, s0, c0), (_, s1, c1)) in before.iter().zip(&after) {
        let mean_us = if c1 > c0 {
            (s1 - s0) / (c1 - c0) * 1e6
        } else {
            0.0
        };
        staged += mean_us;
        out.push_str(&format!("| {stage} | {mean_us:.0} |\n"));
    }
    let client_us = client * 1000.0;
    out.push_str(&format!(
        "| outside the stages (the bot's connection, HTTP parsing and writing, wake-ups) | {:.0} |\n| **the client's mean** | **{client_us:.0}** |\n| bare spawn of the same program, mean | {:.0} |\n",
        client_us - staged,
        bare_mean * 1000.0
    ));
    out
}

fn cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

fn median(v: &mut [f64]) -> f64 {
    percentile(v, 0.5)
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    // `p` is a fraction in 0..=1, so the index lies in 0..len (and is clamped below).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

/// Calls (or spawns) per second with `threads` workers doing `per` each.
fn rate(threads: usize, per: usize, work: impl Fn() + Send + Sync + 'static) -> f64 {
    let work = std::sync::Arc::new(work);
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let work = std::sync::Arc::clone(&work);
            std::thread::spawn(move || (0..per).for_each(|_| work()))
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    (threads * per) as f64 / start.elapsed().as_secs_f64()
}

/// What one 16-client run reached: its call rate, and the CPU ms the core, the executor
/// and the executor's reaped children spent during it.
struct LoadRun {
    rate: f64,
    core: f64,
    executor: f64,
    children: f64,
}

/// Runs `load` (which returns its rate) and reads the CPU times around it.
fn load_run(core: u32, executor: &[u32], load: impl FnOnce() -> f64) -> LoadRun {
    let core_before = cpu_ms(core);
    let exec_before: Vec<(f64, f64)> = executor.iter().map(|p| cpu_ms(*p)).collect();
    let rate = load();
    let core_after = cpu_ms(core);
    let (mut executor_self, mut children) = (0.0, 0.0);
    for (p, before) in executor.iter().zip(&exec_before) {
        let after = cpu_ms(*p);
        executor_self += after.0 - before.0;
        children += after.1 - before.1;
    }
    LoadRun {
        rate,
        core: core_after.0 - core_before.0,
        executor: executor_self,
        children,
    }
}

/// Calls per second with `threads` bots, each making `per` calls on one kept connection.
fn rate_kept(threads: usize, per: usize, addr: &str, token: &str) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut bot = KeptBot::connect(addr, token);
                (0..per).for_each(|_| {
                    bot.call("plain:run");
                });
            });
        }
    });
    (threads * per) as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let ws = workspace();
    let up = start_up(ws.path());
    let (addr, token) = (up.addr.clone(), up.token.clone());
    let n: usize = std::env::var("ROUNDTRIP_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    if let Some(secs) = std::env::var("ROUNDTRIP_LOAD_SECS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        // Profiling mode: 16 clients (`ROUNDTRIP_LOAD_CLIENTS`; 1 for one call's path
        // alone) calling `plain:run` for that long, no report.
        let clients = std::env::var("ROUNDTRIP_LOAD_CLIENTS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(16)
            .max(1);
        let until = Instant::now() + std::time::Duration::from_secs(secs);
        let (a, t) = (addr.clone(), token.clone());
        let kept = std::env::var("ROUNDTRIP_LOAD_KEPT").is_ok_and(|v| v == "1");
        let done = rate(clients, 1, move || {
            let mut bot = kept.then(|| KeptBot::connect(&a, &t));
            while Instant::now() < until {
                match bot.as_mut() {
                    Some(bot) => bot.call("plain:run"),
                    None => call(&a, &t, "plain:run"),
                };
            }
        });
        println!("load ran ({done:.2} workers/s)");
        return;
    }
    let plain_bin = ws.path().join("skills/plain/bin/tool");
    let plain_path = plain_bin.to_str().unwrap().to_string();
    let plain_argv = [plain_path.as_str()];
    let python = sandbox_python();
    let py_argv = [python.as_str(), "-c", PY_SOURCE];
    for _ in 0..20 {
        call(&addr, &token, "plain:run");
        call(&addr, &token, "native:ping");
        call(&addr, &token, "py:warm");
        call(&addr, &token, "pycold:cold");
    }
    let names = [
        "bare",
        "plain",
        "jsonrpc",
        "python bare",
        "python cold",
        "python warm",
        "plain, kept connection",
    ];
    let mut kept = KeptBot::connect(&addr, &token);
    let mut series: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut executor_ms = Vec::new();
    for _ in 0..n {
        series[0].push(bare(&plain_argv, ws.path()));
        let (ms, v) = call(&addr, &token, "plain:run");
        series[1].push(ms);
        executor_ms.push(v["duration_ms"].as_f64().unwrap_or(0.0));
        series[2].push(call(&addr, &token, "native:ping").0);
        series[3].push(bare(&py_argv, ws.path()));
        series[4].push(call(&addr, &token, "pycold:cold").0);
        series[5].push(call(&addr, &token, "py:warm").0);
        series[6].push(kept.call("plain:run").0);
    }
    drop(kept);
    let mut report = String::from(
        "# Round-trip benchmark\n\nOne client, each call on a fresh HTTP connection to the gateway (but `plain, kept connection`: one connection for all its calls, as a bot's HTTP client keeps); `bare` is the same program spawned directly.\n\n\
         | series | calls | median ms | p99 ms | median − bare ms |\n|---|---|---|---|---|\n",
    );
    let bare_med = median(&mut series[0]);
    let py_bare_med = median(&mut series[3]);
    for (i, name) in names.iter().enumerate() {
        let med = median(&mut series[i]);
        let base = if name.starts_with("python") {
            py_bare_med
        } else {
            bare_med
        };
        report.push_str(&format!(
            "| {name} | {} | {med:.2} | {:.2} | {:+.2} |\n",
            series[i].len(),
            percentile(&mut series[i], 0.99),
            med - base
        ));
    }
    report.push_str(&format!(
        "\n`plain` through skillbox: the executor's own duration_ms median {:.0} (1 ms resolution).\n",
        median(&mut executor_ms)
    ));

    report.push_str(&breakdown(&addr, &token, n, &plain_argv, ws.path()));

    let threads = 16;
    // Enough calls that the CPU times (10 ms ticks) and the rates settle: 1,024 by default.
    let per: usize = std::env::var("ROUNDTRIP_PER_CLIENT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let bin = plain_path.clone();
    let bare_rate = rate(threads, per, move || {
        bare(&[bin.as_str()], Path::new("/"));
    });
    let executor = children(up.pid);
    for kept in [false, true] {
        let load = load_run(up.pid, &executor, || {
            let (a, t) = (addr.clone(), token.clone());
            if kept {
                rate_kept(threads, per, &a, &t)
            } else {
                rate(threads, per, move || {
                    call(&a, &t, "plain:run");
                })
            }
        });
        let calls = (threads * per) as f64;
        let how = if kept {
            "each client on one kept connection"
        } else {
            "each call on a fresh connection"
        };
        report.push_str(&format!(
            "\n16 at once ({per} each, {how}): bare spawns {bare_rate:.0}/s, `plain` calls through skillbox {:.0}/s: ratio {:.2}.\n\n\
             CPU per call in that run (ms, from /proc, 10 ms ticks): core {:.2}, executor {:.2}, \
             the executor's reaped children (tools, kill helpers) {:.2}; the bare spawns used {:.2} ms of the machine's cores per spawn.\n",
            load.rate,
            load.rate / bare_rate,
            load.core / calls,
            load.executor / calls,
            load.children / calls,
            cores() * 1000.0 / bare_rate,
        ));
    }
    print!("{report}");
    let _ = std::fs::write(setup::target_dir().join("roundtrip-bench.md"), &report);
    drop(up);
}
