//! The first call of a skill that imports its dependency from the environment skillbox
//! built for it, against the same script importing the same package installed
//! system-wide, both in skillbox's sandbox (docs/sandbox.md, "Dependencies"; goal: within
//! 10 %). Each sample is a whole sandboxed run of `python3 -c "import skbbench"`: prepare,
//! spawn, exit, finish. The package is pure Python, 40 modules of 60 functions each,
//! compiled to `.pyc` in both places as pip leaves it. The two ways alternate round by
//! round, so the machine's noise falls on both.
//!
//! Needs root (the system-wide copy goes to the interpreter's site folder, and is removed
//! at the end). `DEPS_BENCH_N` sets the rounds (default 100). The report goes to
//! `target/deps-bench.md` and stdout. A benchmark: it asserts only that every run exits 0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use skillbox_executor::sandbox::{ArgsFile, LaunchSpec, PreparedCall, Sandbox, SandboxConfig};

const PACKAGE: &str = "skbbench";
const UID_BASE: u32 = 2_950_000;
const DEFAULT_N: usize = 100;

/// Writes the package under `site` and compiles it.
fn write_package(site: &Path) -> Result<()> {
    let dir = site.join(PACKAGE);
    std::fs::create_dir_all(&dir)?;
    let mut init = String::new();
    for m in 0..40 {
        let mut text = String::new();
        for f in 0..60 {
            text.push_str(&format!(
                "def f{f}(x, y=1):\n    \"\"\"Adds.\"\"\"\n    return [x + y + {f} for _ in range(2)]\n\n"
            ));
        }
        std::fs::write(dir.join(format!("m{m}.py")), text)?;
        init.push_str(&format!("from . import m{m}\n"));
    }
    std::fs::write(dir.join("__init__.py"), init)?;
    let ok = Command::new("/usr/bin/python3")
        .args(["-m", "compileall", "-q"])
        .arg(&dir)
        .status()?
        .success();
    if !ok {
        bail!("compileall failed");
    }
    for entry in walk(site)? {
        let mode = if entry.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

fn walk(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if out[i].is_dir() {
            for e in std::fs::read_dir(&out[i])? {
                out.push(e?.path());
            }
        }
        i += 1;
    }
    Ok(out)
}

/// The system interpreter's site folder for packages installed by hand.
fn system_site() -> Result<PathBuf> {
    let out = Command::new("/usr/bin/python3")
        .args(["-c", "import site; print(site.getsitepackages()[0])"])
        .output()?;
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

async fn run(sandbox: &Sandbox, deps: Option<&Path>) -> Result<Duration> {
    let argv: Vec<String> = ["python3", "-c", "import skbbench"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let start = Instant::now();
    let PreparedCall { launch, guard, .. } = sandbox.prepare(LaunchSpec {
        skill_dir: None,
        work: None,
        argv: &argv,
        env: Vec::new(),
        memory_mb: 512,
        max_file_mb: 1024,
        timeout_ms: 10_000,
        args_file: ArgsFile::None,
        network: None,
        unix_sockets: false,
        trust_pem: None,
        deps,
    })?;
    let mut child = sandbox.spawn(launch).context("spawning in the sandbox")?;
    let pid = child.id();
    drop(child.stdin.take());
    let status = child.wait().await?;
    guard.finish(pid);
    let took = start.elapsed();
    if !status.success() {
        bail!("the import failed ({status}) with deps {deps:?}");
    }
    skillbox_executor::sandbox::wait_idle();
    Ok(took)
}

fn percentile(sorted: &[Duration], pct: usize) -> Duration {
    sorted[(sorted.len() - 1) * pct / 100]
}

fn main() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("run as root: the system-wide copy goes to the interpreter's site folder");
    }
    let n: usize = std::env::var("DEPS_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_N);
    let scratch = tempfile::Builder::new()
        .prefix("skillbox-deps-bench-")
        .tempdir()?;
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755))?;
    let env = scratch.path().join(".deps").join("0".repeat(64));
    write_package(&env)?;
    let site = system_site()?;
    if site.join(PACKAGE).exists() {
        bail!(
            "{} already exists; remove it first",
            site.join(PACKAGE).display()
        );
    }
    std::fs::create_dir_all(&site)?;
    write_package(&site)?;
    let sandbox = Sandbox::new(SandboxConfig {
        scratch_root: scratch.path().to_path_buf(),
        uid_base: UID_BASE,
        ..SandboxConfig::default()
    })
    .context("Sandbox::new")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        for _ in 0..5 {
            run(&sandbox, Some(&env)).await?;
            run(&sandbox, None).await?;
        }
        let (mut built, mut system) = (Vec::new(), Vec::new());
        for round in 0..n {
            if round % 2 == 0 {
                built.push(run(&sandbox, Some(&env)).await?);
                system.push(run(&sandbox, None).await?);
            } else {
                system.push(run(&sandbox, None).await?);
                built.push(run(&sandbox, Some(&env)).await?);
            }
        }
        anyhow::Ok((built, system))
    });
    std::fs::remove_dir_all(site.join(PACKAGE))?;
    let (mut built, mut system) = result?;
    built.sort();
    system.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (b50, s50) = (percentile(&built, 50), percentile(&system, 50));
    let (b90, s90) = (percentile(&built, 90), percentile(&system, 90));
    let report = format!(
        "# Dependencies: first call importing from the built environment vs system-wide\n\n\
         {n} rounds, alternating; a sandboxed `python3 -c \"import {PACKAGE}\"` (40 modules, .pyc).\n\n\
         | where the package is | p50 ms | p90 ms |\n|---|---|---|\n\
         | skill's environment (PYTHONPATH, Landlock rule) | {:.2} | {:.2} |\n\
         | system-wide ({}) | {:.2} | {:.2} |\n\n\
         ratio built/system: p50 {:.3}, p90 {:.3} (goal: at most 1.10)\n",
        ms(b50),
        ms(b90),
        site.display(),
        ms(s50),
        ms(s90),
        ms(b50) / ms(s50),
        ms(b90) / ms(s90),
    );
    println!("{report}");
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/deps-bench.md");
    std::fs::write(out, report)?;
    Ok(())
}
