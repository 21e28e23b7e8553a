//! What the seccomp allow list costs a call, against the deny list it replaced and against
//! no filter, in one run: a process is spawned with `no_new_privs` and then no filter, the
//! first version's deny list (`benches/seccomp/deny_list_v1.json`, kept as the baseline),
//! or the allow list of `policies/seccomp/tool.json` compiled three ways: as seccompiler's
//! one linear chain, with every argument check dropped (the most a split into an
//! unconditional and a conditional program could save), and as shipped, a binary search
//! over syscall numbers (`sandbox/seccomp/search_tree.rs`). Then it runs to its exit. Two programs: `true` (the
//! cost of installing the filter) and `python3 -c pass` (about a thousand syscalls, what an
//! interpreter start pays per syscall). Rounds interleave the variants so background load
//! falls on all alike. A benchmark: it asserts nothing about time.
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
use skillbox_executor::sandbox::seccomp;

const DENY_LIST_V1: &str = include_str!("seccomp/deny_list_v1.json");

/// One variant: a name and the programs installed (none: `no_new_privs` only).
struct Filter {
    name: String,
    programs: Option<Arc<Vec<BpfProgram>>>,
}

/// Syscalls every program makes many times, most frequent first (counted with `strace -c`
/// on `python3 -c pass`). Kept for the record: the 2026-11-23 runs showed that rule order
/// never reaches seccompiler's program (docs/spawn-benchmark.md).
#[allow(dead_code)]
const HOT: &[&str] = &[
    "newfstatat",
    "read",
    "close",
    "openat",
    "mmap",
    "fstat",
    "lseek",
    "rt_sigaction",
    "getdents64",
    "ioctl",
    "brk",
    "mprotect",
    "munmap",
    "pread64",
    "readlink",
    "write",
    "futex",
    "getrandom",
    "fcntl",
    "getcwd",
    "rt_sigprocmask",
    "execve",
    "exit_group",
];

/// The policy's allow list with its rules reordered or rewritten by `edit`, compiled with
/// the unchanged `tool_enosys` program, in the order `ToolFilters::apply` installs them.
fn variant(name: &str, edit: impl FnOnce(&mut Vec<serde_json::Value>)) -> Filter {
    let mut policy: serde_json::Value = serde_json::from_str(seccomp::POLICY_JSON).unwrap();
    let rules = policy[seccomp::ALLOW_FILTER]["filter"]
        .as_array_mut()
        .unwrap();
    edit(rules);
    let text = serde_json::to_string(&policy).unwrap();
    let mut programs = seccompiler::compile_from_json(text.as_bytes(), TargetArch::x86_64)
        .expect("the variant compiles");
    let enosys = programs.remove(seccomp::ENOSYS_FILTER).unwrap();
    let allow = programs.remove(seccomp::ALLOW_FILTER).unwrap();
    // seccompiler keeps a filter's rules in a map by syscall number, so the JSON order may
    // not reach the program at all: say when a variant compiles to the shipped program.
    let mut shipped =
        seccompiler::compile_from_json(seccomp::POLICY_JSON.as_bytes(), TargetArch::x86_64)
            .unwrap();
    let same = shipped.remove(seccomp::ALLOW_FILTER).unwrap() == allow;
    Filter {
        name: format!(
            "{name} ({} insns{})",
            allow.len(),
            if same {
                ", the policy as seccompiler compiles it"
            } else {
                ""
            }
        ),
        programs: Some(Arc::new(vec![enosys, allow])),
    }
}

/// The programs the executor installs (the allow list as a search tree).
fn shipped() -> Filter {
    let filters = seccomp::compile().expect("the policy compiles");
    let [enosys, allow] = filters.programs();
    Filter {
        name: format!("allow list as shipped, search tree ({} insns)", allow.len()),
        programs: Some(Arc::new(vec![enosys.clone(), allow.clone()])),
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
    match &filter.programs {
        None => {
            // SAFETY: prctl only, between fork and exec.
            unsafe { command.pre_exec(no_new_privs) };
        }
        Some(programs) => {
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
    }
    let start = Instant::now();
    let status = command.status().unwrap();
    let elapsed = start.elapsed();
    assert!(
        status.success(),
        "{argv:?} under {} failed: {status}",
        filter.name
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
        Filter {
            name: "no filter".into(),
            programs: None,
        },
        Filter {
            name: "deny list (v1)".into(),
            programs: Some(Arc::new(deny_programs)),
        },
        shipped(),
        variant("allow list, seccompiler's linear chain", |_| {}),
        variant(
            "allow list, linear chain, argument checks dropped",
            |rules| {
                for rule in rules.iter_mut() {
                    if let Some(map) = rule.as_object_mut() {
                        map.remove("args");
                    }
                }
                rules.dedup_by(|a, b| a["syscall"] == b["syscall"]);
            },
        ),
    ];
    // The interpreter the sandbox runs (a pyenv shim first on the bench's PATH would time
    // a shell script).
    let python = ["/usr/local/bin/python3", "/usr/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .unwrap_or("python3");
    let programs: [&[&str]; 2] = [&["true"], &[python, "-c", "pass"]];
    let mut report = String::from(
        "# seccomp cost per call\n\n\
         Median wall-clock time from spawn to reaped exit, same run, rounds interleaved; \
         the ratio is against the shipped allow list (search tree).\n\n\
         | program | variant | median | ÷ allow list |\n\
         |---|---|---:|---:|\n",
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
        for (f, d) in filters.iter().zip(&m) {
            report.push_str(&format!(
                "| `{}` | {} | {:.3} ms | {:.2} |\n",
                argv.join(" "),
                f.name,
                d.as_secs_f64() * 1e3,
                d.as_secs_f64() / m[2].as_secs_f64(),
            ));
        }
    }
    report.push_str(&format!("\n{n} runs per variant and program.\n"));
    print!("{report}");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let _ = std::fs::write(target.join("seccomp-bench.md"), &report);
}
