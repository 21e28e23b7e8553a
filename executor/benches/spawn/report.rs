//! The Markdown report of the spawn benchmark.

use std::fmt::Write as _;
use std::time::Duration;

use crate::pieces::KillAnswer;
use crate::{tool_version, Host, Method, Series, Tool, STAGES, TINY_C, WARMUP};

/// Nearest-rank percentile.
pub fn percentile(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    // `p` is a fraction in 0..=1, so the product lies in 0..=len and the cast neither wraps
    // nor loses a sign; the clamp keeps the rank inside the slice either way.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

pub struct Report<'a> {
    pub n: usize,
    pub docker_n: usize,
    pub tools: &'a [Tool],
    pub series: &'a [Series],
    pub host: &'a Host,
    pub notes: &'a [String],
    pub components: &'a [(&'static str, Duration)],
    pub child_steps: &'a [(&'static str, Duration)],
    /// `Debug` of the compiled seccomp programs (their sizes).
    pub filters: &'a str,
    /// What `kill(-1, SIGKILL)` returned as a uid owning no process (root only).
    pub kill_answer: Option<KillAnswer>,
    pub landlock_abi: u32,
    pub user_switch: bool,
}

pub fn report(r: &Report<'_>) -> String {
    let mut md = String::new();
    let date = tool_version("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let kernel = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(
        md,
        "# Spawn benchmark: bare vs skillbox vs bwrap vs docker\n"
    );
    let _ = writeln!(md, "- date: {date}");
    let _ = writeln!(
        md,
        "- machine: nproc {nproc}, kernel {kernel}, Landlock ABI {}, {}",
        r.landlock_abi,
        if r.user_switch {
            "running as root (per-call uid on)"
        } else {
            "not root (no per-call uid)"
        }
    );
    let _ = writeln!(
        md,
        "- runs: {} per method ({} for docker), after {WARMUP} uncounted warm-up runs (1 for docker); methods interleaved round by round",
        r.n, r.docker_n
    );
    let _ = writeln!(
        md,
        "- tiny C tool: `{}` {}",
        TINY_C.trim(),
        r.host.tiny_note
    );
    let _ = writeln!(
        md,
        "- bwrap: {}; docker: {}",
        r.host.bwrap_version,
        match &r.host.docker {
            Ok(v) => format!("server {v}"),
            Err(_) => "unavailable".into(),
        }
    );
    let _ = writeln!(
        md,
        "- time per spawn = wall clock from spawn to the reaped exit; skillbox adds `prepare()` before and `guard.finish()` after\n"
    );

    let _ = writeln!(
        md,
        "| tool | method | runs | median | p99 | median ÷ bare | median − bare |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|");
    let mut skipped = Vec::new();
    for (t, tool) in r.tools.iter().enumerate() {
        let mut bare_median = None;
        for s in r.series.iter().filter(|s| s.tool == t) {
            if let Some(why) = &s.skipped {
                skipped.push(format!("{} / {}: {why}", tool.label, s.method.name()));
                continue;
            }
            let mut v = s.total.clone();
            let median = percentile(&mut v, 0.5);
            let p99 = percentile(&mut v, 0.99);
            if s.method == Method::Bare {
                bare_median = Some(median);
            }
            let (ratio, added) = match bare_median {
                Some(b) if s.method != Method::Bare && !b.is_zero() => (
                    format!("{:.1}×", median.as_secs_f64() / b.as_secs_f64()),
                    format!("{:+.3} ms", (median.as_secs_f64() - b.as_secs_f64()) * 1e3),
                ),
                _ => ("1.0×".into(), "—".into()),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {ratio} | {added} |",
                tool.label,
                s.method.name(),
                v.len(),
                ms(median),
                ms(p99)
            );
        }
    }
    if !skipped.is_empty() || !r.notes.is_empty() {
        let _ = writeln!(md, "\nSkipped:");
        for s in r.notes.iter().chain(&skipped) {
            let _ = writeln!(md, "- {s}");
        }
    }

    let _ = writeln!(md, "\n## Where a skillbox call spends its time (medians)\n");
    let live: Vec<&Series> = r
        .series
        .iter()
        .filter(|s| s.method == Method::Skillbox && s.skipped.is_none())
        .collect();
    let _ = write!(md, "| stage |");
    for s in &live {
        let _ = write!(md, " {} |", r.tools[s.tool].label);
    }
    let _ = write!(md, "\n|---|");
    for _ in &live {
        let _ = write!(md, "---:|");
    }
    let _ = writeln!(md);
    for (i, stage) in STAGES.iter().enumerate() {
        let _ = write!(md, "| {stage} |");
        for s in &live {
            let mut v = s.phases[i].clone();
            let _ = write!(md, " {} |", ms(percentile(&mut v, 0.5)));
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md, "\nPieces measured alone ({} runs each):\n", r.n);
    let _ = writeln!(md, "| piece | median |");
    let _ = writeln!(md, "|---|---:|");
    for (name, d) in r.components {
        let _ = writeln!(md, "| {name} | {} |", ms(*d));
    }
    match r.kill_answer {
        Some(KillAnswer::Success) => {
            let _ = writeln!(
                md,
                "\n`kill(-1, SIGKILL)` from a helper running as a uid that owns no process \
                 returned 0 (success), not ESRCH: the kernel counts processes it may not \
                 signal (EPERM) and reports success when there are any, so a loop that \
                 repeats `kill(-1)` until it fails never ends early."
            );
        }
        Some(KillAnswer::NoProcess) => {
            let _ = writeln!(
                md,
                "\n`kill(-1, SIGKILL)` from a helper running as a uid that owns no process \
                 failed with ESRCH, as expected."
            );
        }
        Some(KillAnswer::Other) => {
            let _ = writeln!(md, "\nThe `kill(-1)` probe failed (helper could not run).");
        }
        None => {}
    }
    if !r.child_steps.is_empty() {
        let _ = writeln!(
            md,
            "\nChild side: the tiny tool by `std::process` (stdio null) with more and more of \
             `ChildSetup::apply` in `pre_exec`, {} runs each, interleaved:\n",
            r.n
        );
        let _ = writeln!(md, "| child setup | median spawn → exit |");
        let _ = writeln!(md, "|---|---:|");
        for (name, d) in r.child_steps {
            let _ = writeln!(md, "| {name} | {} |", ms(*d));
        }
        let _ = writeln!(
            md,
            "\nseccomp programs installed per spawn: `{}`",
            r.filters
        );
    }
    md
}
