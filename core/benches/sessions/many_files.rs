//! The sessions bench's context of many files (issue 42: "a context of 1 GiB in 1,000
//! files"): what the first call in it costs (the executor fetches every file), what the
//! next calls cost while nothing changed, and what a call costs after one file changed,
//! each next to an empty context's call and a local copy in the same run.

use std::time::Instant;

use crate::client::KeptBot;
use crate::setup::{children, cpu_ms};
use crate::{env_or, exec_true_in, pattern_from, percentile, upload_to};

/// The context the case works in.
const CONTEXT: &str = "bench-many";

/// How many files, how large together.
pub struct Case {
    /// How many files.
    pub files: usize,
    /// MiB they hold together.
    pub total_mib: usize,
}

impl Case {
    /// `SESSIONS_MANY_FILES` (default 1,000) files holding `SESSIONS_MANY_MB` MiB together
    /// (default 1,024).
    pub fn from_env() -> Self {
        Self {
            files: env_or("SESSIONS_MANY_FILES", 1000).max(1),
            total_mib: env_or("SESSIONS_MANY_MB", 1024).max(1),
        }
    }

    /// Bytes the files hold together.
    pub fn total_bytes(&self) -> usize {
        self.total_mib * 1024 * 1024
    }

    fn file_bytes(&self) -> usize {
        (self.total_mib * 1024 * 1024).div_ceil(self.files)
    }

    /// Uploads the files, times the calls; the report's section. `empty_ms` is the median
    /// `exec_command` in an empty context, `copy_mib_s` the local `std::fs::copy` rate,
    /// both from the same run.
    pub fn run(
        &self,
        (addr, token, core_pid): (&str, &str, u32),
        empty_ms: f64,
        copy_mib_s: f64,
    ) -> String {
        let size = self.file_bytes();
        let name = |i: usize| format!("d{:02}/f{i:04}.bin", i % 20);
        let t = Instant::now();
        for i in 0..self.files {
            let data = pattern_from(i as u64 + 1, size);
            upload_to(addr, token, (CONTEXT, &name(i)), &data);
        }
        let upload_s = t.elapsed().as_secs_f64();
        let mib = (size * self.files) as f64 / (1024.0 * 1024.0);

        let mut bot = KeptBot::connect(addr, token);
        let first = exec_true_in(&mut bot, CONTEXT);
        // `SESSIONS_MANY_CALLS` (default 9): more of them for a profiler.
        let calls = env_or("SESSIONS_MANY_CALLS", 9).max(1);
        let executors = children(core_pid);
        let cpu = || {
            let core = cpu_ms(core_pid).0;
            let exec: f64 = executors.iter().map(|p| cpu_ms(*p).0).sum();
            (core, exec)
        };
        let before = cpu();
        let mut same: Vec<f64> = (0..calls)
            .map(|_| exec_true_in(&mut bot, CONTEXT))
            .collect();
        let after = cpu();
        let per_call = |a: f64, b: f64| (b - a) / calls as f64;
        let (core_cpu, exec_cpu) = (per_call(before.0, after.0), per_call(before.1, after.1));
        // One file changed between calls: the next call moves that one
        // (`SESSIONS_MANY_CHANGED` rounds, default 5: more of them for a profiler).
        let mut changed = Vec::new();
        for round in 0..env_or("SESSIONS_MANY_CHANGED", 5).max(1) {
            let data = pattern_from(0xC0FF_EE00 + round as u64, size);
            upload_to(addr, token, (CONTEXT, &name(round % self.files)), &data);
            changed.push(exec_true_in(&mut bot, CONTEXT));
        }
        let close = serde_json::json!({"tool": "close_context", "context_id": CONTEXT, "args": {}});
        bot.call_body("close_context", &close.to_string());
        drop(bot);

        let (same_n, changed_n) = (same.len(), changed.len());
        let (same, changed) = (percentile(&mut same, 0.5), percentile(&mut changed, 0.5));
        let first_rate = mib / (first / 1000.0);
        format!(
            "\nA context of {} files of {:.2} MiB ({mib:.0} MiB together), in 20 folders: uploaded one by one in {upload_s:.1} s ({:.0} MiB/s); \
             the first `exec_command` `true` in it **{first:.0} ms** (the executor fetches every file: {first_rate:.0} MiB/s, against {copy_mib_s:.0} MiB/s for a local `std::fs::copy` of one file); \
             the next {} **{same:.2} ms** at the median, **{:+.2} ms** over an empty context's {empty_ms:.2} ms (goal: within +1 ms while the files did not change); \
             CPU per unchanged call: core {core_cpu:.2} ms, executor {exec_cpu:.2} ms (from `/proc`, 10 ms ticks); \
             after one file of it changed, the next call **{changed:.2} ms** at the median of {} ({:+.2} ms over the empty context).\n",
            self.files,
            size as f64 / (1024.0 * 1024.0),
            mib / upload_s,
            same_n,
            same - empty_ms,
            changed_n,
            changed - empty_ms,
        )
    }
}
