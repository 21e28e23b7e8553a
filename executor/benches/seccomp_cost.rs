//! What the seccomp allow list costs a call, against the deny list it replaced and against
//! no filter, in one run: a process is spawned with `no_new_privs` and then (a) no filter,
//! (b) the first version's deny list (`benches/seccomp/deny_list_v1.json`, kept as the
//! baseline) or (c) the allow list of `policies/seccomp/tool.json`, and runs to its exit.
//! Two programs: `true` (the cost of installing the filter) and `python3 -c pass` (about a
//! thousand syscalls, what an interpreter start pays per syscall). Rounds interleave the
//! three variants so background load falls on all alike. A benchmark: it asserts nothing
//! about time.
//!
//! `SECCOMP_BENCH_N` sets the runs per variant (default 200). The Markdown report goes to
//! `target/seccomp-bench.md` and stdout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seccompiler::{BpfProgram, TargetArch};
use skillbox_executor::sandbox::seccomp::{self, ToolFilters};

const DENY_LIST_V1: &str = include_str!("seccomp/deny_list_v1.json");

enum Filter {
    None,
    DenyListV1(Arc<Vec<BpfProgram>>),
    AllowList(Arc<ToolFilters>),
}

impl Filter {
    fn name(&self) -> &'static str {
        match self {
            Filter::None => "no filter",
            Filter::DenyListV1(_) => "deny list (v1)",
            Filter::AllowList(_) => "allow list",
        }
    }
}

fn no_new_privs() -> io::Result<()> {
    // SAFETY: integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn run(argv: &[&str], filter: &Filter) -> Duration {
    let mut command = Command::new(argv[0]);
    command
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match filter {
        Filter::None => {
            // SAFETY: prctl only, between fork and exec.
            unsafe { command.pre_exec(no_new_privs) };
        }
        Filter::DenyListV1(programs) => {
            let programs = Arc::clone(programs);
            // SAFETY: prctl and seccomp over programs compiled before the fork; apply_filter
            // builds its sock_fprog on the stack and does not allocate on success.
            unsafe {
                command.pre_exec(move || {
                    no_new_privs()?;
                    for p in programs.iter() {
                        seccompiler::apply_filter(p)
                            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
                    }
                    Ok(())
                })
            };
        }
        Filter::AllowList(filters) => {
            let filters = Arc::clone(filters);
            // SAFETY: as above; ToolFilters::apply is allocation-free (tested).
            unsafe {
                command.pre_exec(move || {
                    no_new_privs()?;
                    filters.apply()
                })
            };
        }
    }
    let start = Instant::now();
    let status = command.status().unwrap();
    let elapsed = start.elapsed();
    assert!(
        status.success(),
        "{argv:?} under {} failed: {status}",
        filter.name()
    );
    elapsed
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let n: usize = std::env::var("SECCOMP_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut deny = seccompiler::compile_from_json(DENY_LIST_V1.as_bytes(), TargetArch::x86_64)
        .expect("the v1 deny list compiles");
    let deny_programs: Vec<BpfProgram> = ["tool_enosys", "tool_eperm"]
        .iter()
        .map(|name| deny.remove(*name).expect("v1 filter"))
        .collect();
    let filters = [
        Filter::None,
        Filter::DenyListV1(Arc::new(deny_programs)),
        Filter::AllowList(Arc::new(
            seccomp::compile().expect("the allow list compiles"),
        )),
    ];
    let programs: [&[&str]; 2] = [&["true"], &["python3", "-c", "pass"]];
    let mut report = String::from(
        "# seccomp cost per call\n\n\
         Median wall-clock time from spawn to reaped exit, same run, rounds interleaved.\n\n\
         | program | no filter | deny list (v1) | allow list | allow / none | allow / deny v1 |\n\
         |---|---|---|---|---|---|\n",
    );
    for argv in programs {
        for f in &filters {
            for _ in 0..5 {
                run(argv, f);
            }
        }
        let mut samples = vec![Vec::with_capacity(n); filters.len()];
        for _ in 0..n {
            for (f, v) in filters.iter().zip(samples.iter_mut()) {
                v.push(run(argv, f));
            }
        }
        let m: Vec<Duration> = samples.iter_mut().map(|v| median(v)).collect();
        let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
        report.push_str(&format!(
            "| `{}` | {:.3} ms | {:.3} ms | {:.3} ms | {:.3} | {:.3} |\n",
            argv.join(" "),
            m[0].as_secs_f64() * 1e3,
            m[1].as_secs_f64() * 1e3,
            m[2].as_secs_f64() * 1e3,
            ratio(m[2], m[0]),
            ratio(m[2], m[1]),
        ));
    }
    report.push_str(&format!("\n{n} runs per variant and program.\n"));
    print!("{report}");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let _ = std::fs::write(target.join("seccomp-bench.md"), &report);
}
