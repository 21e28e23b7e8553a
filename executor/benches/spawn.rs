//! Spawn latency of a trivial tool, four ways in one run: bare `std::process`, skillbox's
//! full sandbox, bubblewrap with a comparable policy, and `docker run`.
//!
//! Each sample is wall-clock time from spawn to the tool's exit, reaped; for skillbox it
//! also includes `Sandbox::prepare` before and `CallGuard::finish` after, because a call
//! pays for both. Methods are interleaved round by round so background load (other builds
//! on the machine) falls on all of them alike. A benchmark, not a test: it asserts nothing
//! about time, only that every tool run exits 0.
//!
//! `SPAWN_BENCH_N` sets the runs per method (default 200), `SPAWN_BENCH_DOCKER_N` those of
//! docker (default 20). The Markdown report goes to `target/spawn-bench.md` and stdout.
//! `executor/benches/run-spawn-bench.sh` installs bubblewrap first.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use skillbox_executor::sandbox::env;
use skillbox_executor::sandbox::{ArgsFile, LaunchSpec, PreparedCall, Sandbox, SandboxConfig};

#[path = "spawn/calls.rs"]
mod calls;
#[path = "spawn/pieces.rs"]
mod pieces;
#[path = "spawn/report.rs"]
mod report;
#[path = "spawn/setup.rs"]
mod setup;
use setup::{build_tiny, bwrap_prefix, docker_image, find_on_sandbox_path, tool_version};

const DEFAULT_N: usize = 200;
const DEFAULT_DOCKER_N: usize = 20;
/// Uncounted runs per method before measuring (page cache, lazy init).
const WARMUP: usize = 5;
/// Per-call user ids of this bench. Away from the default pool (2,000,000) on purpose:
/// pools with different lock dirs do not see each other's locks, and releasing a uid kills
/// every process it owns, so sharing ids with tests running beside us would kill theirs.
const UID_BASE: u32 = 2_900_000;

/// A uid of the bench's own range just past the pool: no process runs under it.
fn idle_uid(sandbox: &Sandbox) -> Result<u32> {
    let pool = u32::try_from(sandbox.config().user_ids())?;
    Ok(UID_BASE + pool + 1)
}
const DOCKER_IMAGE: &str = "skillbox-spawn-bench:tiny";
/// Reads stdin to its end (at once for bare runs, whose stdin is null), exits 0.
const TINY_C: &str =
    "#include <unistd.h>\nint main(void) { char b[256]; while (read(0, b, sizeof b) > 0) {} return 0; }\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Bare,
    Skillbox,
    Bwrap,
    Docker,
    /// A whole call through `call::execute`, started cold.
    Call,
    /// A whole call through `call::execute`, started cold, its user id and scratch dir
    /// made ahead (`Sandbox::keep_ready`).
    CallReady,
    /// A whole call through `call::execute`, taking a prestarted process.
    Warm,
}

impl Method {
    const ALL: [Method; 7] = [
        Method::Bare,
        Method::Skillbox,
        Method::Bwrap,
        Method::Docker,
        Method::Call,
        Method::CallReady,
        Method::Warm,
    ];

    fn name(self) -> &'static str {
        match self {
            Method::Bare => "bare",
            Method::Skillbox => "skillbox",
            Method::Bwrap => "bwrap",
            Method::Docker => "docker",
            Method::Call => "skillbox call, cold",
            Method::CallReady => "skillbox call, cold, uid + scratch made ahead",
            Method::Warm => "skillbox call, warm start",
        }
    }
}

/// One tool as each method launches it.
#[derive(Debug)]
struct Tool {
    label: String,
    /// argv on the host (absolute program path), also used by bwrap, which binds the
    /// same paths.
    host_argv: Vec<String>,
    /// argv given to `Sandbox::prepare`.
    sandbox_argv: Vec<String>,
    /// argv inside the docker image, when the tool can run there.
    docker_argv: Option<Vec<String>>,
    /// The tool's name in the bench skills of `calls`.
    call_tool: &'static str,
}

/// The samples (or the skip reason) of one tool under one method.
#[derive(Debug)]
struct Series {
    tool: usize,
    method: Method,
    target: usize,
    skipped: Option<String>,
    total: Vec<Duration>,
    /// skillbox only: the [`STAGES`].
    phases: [Vec<Duration>; STAGES.len()],
}

/// What the host offers, found at start.
#[derive(Debug)]
struct Host {
    tiny_note: String,
    bwrap: Result<Vec<String>, String>,
    docker: Result<String, String>,
    bwrap_version: String,
}

fn main() -> Result<()> {
    let n = env_count("SPAWN_BENCH_N", DEFAULT_N)?;
    let docker_n = env_count("SPAWN_BENCH_DOCKER_N", DEFAULT_DOCKER_N)?.min(n);

    let skill = tempfile::Builder::new()
        .prefix("skillbox-bench-skill-")
        .tempdir()?;
    std::fs::set_permissions(skill.path(), std::fs::Permissions::from_mode(0o755))?;
    let scratch_root = tempfile::Builder::new()
        .prefix("skillbox-bench-scratch-")
        .tempdir()?;
    std::fs::set_permissions(scratch_root.path(), std::fs::Permissions::from_mode(0o711))?;

    let mut tools = Vec::new();
    let mut notes = Vec::new();
    let mut tiny_static = false;
    let tiny_note = match build_tiny(skill.path()) {
        Ok((path, is_static, note)) => {
            tiny_static = is_static;
            tools.push(Tool {
                label: "tiny C".into(),
                host_argv: vec![path.to_string_lossy().into_owned()],
                sandbox_argv: vec!["./tiny".into()],
                docker_argv: Some(vec!["/tiny".into()]),
                call_tool: "tiny",
            });
            note
        }
        Err(why) => {
            notes.push(format!("tiny C tool skipped: {why}"));
            "unavailable".into()
        }
    };
    match find_on_sandbox_path("python3") {
        Some(python) => tools.push(Tool {
            label: "python3 -c pass".into(),
            host_argv: vec![python, "-c".into(), "pass".into()],
            sandbox_argv: vec!["python3".into(), "-c".into(), "pass".into()],
            docker_argv: None,
            call_tool: "py",
        }),
        None => notes.push(format!(
            "python3 tool skipped: no python3 on the sandbox PATH ({})",
            env::SANDBOX_PATH
        )),
    }

    let host = Host {
        tiny_note,
        bwrap: bwrap_prefix(skill.path()),
        bwrap_version: tool_version("bwrap", &["--version"]),
        docker: if tiny_static {
            docker_image(skill.path())
        } else {
            Err(
                "the tiny tool is not a static binary, so a FROM scratch image cannot run it"
                    .into(),
            )
        },
    };

    let sandbox = Sandbox::new(SandboxConfig {
        scratch_root: scratch_root.path().to_path_buf(),
        uid_base: UID_BASE,
        ..SandboxConfig::default()
    })
    .context("Sandbox::new")?;
    let mut ready_sandbox = sandbox.clone();
    ready_sandbox.keep_ready(2);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;

    let mut series = Vec::new();
    for (t, tool) in tools.iter().enumerate() {
        for method in Method::ALL {
            let skipped = match method {
                Method::Bare
                | Method::Skillbox
                | Method::Call
                | Method::CallReady
                | Method::Warm => None,
                Method::Bwrap => host.bwrap.as_ref().err().cloned(),
                Method::Docker => match (&tool.docker_argv, &host.docker) {
                    (None, _) => Some("not run under docker (the image is FROM scratch)".into()),
                    (Some(_), Err(why)) => Some(why.clone()),
                    (Some(_), Ok(_)) => None,
                },
            };
            series.push(Series {
                tool: t,
                method,
                target: if method == Method::Docker {
                    docker_n
                } else {
                    n
                },
                skipped,
                total: Vec::new(),
                phases: Default::default(),
            });
        }
    }

    let tiny_path = skill.path().join("tiny");
    let skills = calls::skills(tiny_path.is_file().then_some(tiny_path.as_path()))?;
    let bench = Bench {
        registry: &skills.registry,
        ready_sandbox: &ready_sandbox,
        sandbox: &sandbox,
        skill_dir: skill.path(),
        bwrap: host.bwrap.as_ref().ok(),
    };
    runtime.block_on(async {
        // Warm-up, also a check that every method really runs the tool.
        for s in series.iter_mut().filter(|s| s.skipped.is_none()) {
            let warmup = if s.method == Method::Docker {
                1
            } else {
                WARMUP
            };
            for _ in 0..warmup {
                if let Err(e) = bench.once(&tools[s.tool], s.method).await {
                    s.skipped = Some(format!("failed at warm-up: {e:#}"));
                    break;
                }
            }
        }
        for round in 0..n {
            for s in series.iter_mut().filter(|s| s.skipped.is_none()) {
                // Spread a shorter series (docker) evenly over the rounds.
                if (round * s.target) / n == ((round + 1) * s.target) / n {
                    continue;
                }
                let sample = bench.once(&tools[s.tool], s.method).await?;
                s.total.push(sample.total);
                if let Some(phases) = sample.phases {
                    for (v, d) in s.phases.iter_mut().zip(phases) {
                        v.push(d);
                    }
                }
            }
        }
        anyhow::Ok(())
    })?;
    ready_sandbox.stop_ready();
    skills.registry.warm().clear();
    skillbox_executor::sandbox::wait_idle();
    let components = runtime.block_on(pieces::components(&sandbox, skill.path(), n))?;
    let (child_steps, filters) = pieces::child_steps(&sandbox, skill.path(), n)?;
    let kill_answer = if sandbox.kernel().user_switch {
        Some(pieces::one_kill(idle_uid(&sandbox)?)?)
    } else {
        None
    };

    if host.docker.is_ok() {
        let _ = Command::new("docker")
            .args(["rmi", "-f", DOCKER_IMAGE])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    let report = report::report(&report::Report {
        n,
        docker_n,
        tools: &tools,
        series: &series,
        host: &host,
        notes: &notes,
        components: &components,
        child_steps: &child_steps,
        filters: &filters,
        kill_answer,
        landlock_abi: sandbox.kernel().landlock_abi,
        user_switch: sandbox.kernel().user_switch,
    });
    std::fs::create_dir_all(target_dir())?;
    let out = target_dir().join("spawn-bench.md");
    std::fs::write(&out, &report).with_context(|| format!("writing {}", out.display()))?;
    println!("{report}");
    println!("(written to {})", out.display());
    Ok(())
}

fn env_count(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => bail!("{name}={v:?} is not a positive count"),
        },
        Err(_) => Ok(default),
    }
}

fn target_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    dir.canonicalize().unwrap_or(dir)
}

struct Bench<'a> {
    registry: &'a skillbox_executor::registry::Registry,
    ready_sandbox: &'a Sandbox,
    sandbox: &'a Sandbox,
    skill_dir: &'a Path,
    bwrap: Option<&'a Vec<String>>,
}

struct Sample {
    total: Duration,
    phases: Option<[Duration; STAGES.len()]>,
}

/// The stages of a skillbox call the bench times; the last one runs after the call's
/// answer, on the releaser and sweeper threads, and is not part of the call's time.
pub const STAGES: [&str; 11] = [
    "prepare: uid lock",
    "prepare: scratch dir",
    "prepare: args file",
    "prepare: Landlock ruleset",
    "prepare: command",
    "spawn (fork, child setup, exec)",
    "run (to exit, stdout read)",
    "finish: kill group",
    "finish: hand-off",
    "result JSON",
    "release (off the call's path)",
];

impl Bench<'_> {
    /// One spawn of `tool` under `method`, timed.
    async fn once(&self, tool: &Tool, method: Method) -> Result<Sample> {
        let plain = |program: &str, args: &[String]| -> Result<Sample> {
            let start = Instant::now();
            let status = Command::new(program)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .with_context(|| format!("spawning {program}"))?;
            let total = start.elapsed();
            if !status.success() {
                bail!("{program} {args:?} exited with {status}");
            }
            Ok(Sample {
                total,
                phases: None,
            })
        };
        match method {
            Method::Bare => plain(&tool.host_argv[0], &tool.host_argv[1..]),
            Method::Bwrap => {
                let mut args = self.bwrap.context("bwrap is not available")?.clone();
                args.extend(tool.host_argv.iter().cloned());
                plain("bwrap", &args)
            }
            Method::Docker => {
                let argv = tool.docker_argv.as_ref().context("no docker argv")?;
                let mut args: Vec<String> = [
                    "run",
                    "--rm",
                    "--network",
                    "none",
                    "--read-only",
                    "--cap-drop",
                    "ALL",
                    "--entrypoint",
                ]
                .map(String::from)
                .to_vec();
                args.push(argv[0].clone());
                args.push(DOCKER_IMAGE.into());
                args.extend(argv[1..].iter().cloned());
                plain("docker", &args)
            }
            Method::Skillbox => self.skillbox(tool).await,
            Method::Call => Ok(Sample {
                total: calls::timed_call(self.sandbox, self.registry, "cold", tool.call_tool)
                    .await?,
                phases: None,
            }),
            Method::CallReady => Ok(Sample {
                total: calls::timed_call(self.ready_sandbox, self.registry, "cold", tool.call_tool)
                    .await?,
                phases: None,
            }),
            Method::Warm => {
                calls::settle(self.sandbox, self.registry, tool.call_tool).await?;
                let total =
                    calls::timed_call(self.sandbox, self.registry, "warm", tool.call_tool).await?;
                skillbox_executor::sandbox::wait_idle();
                calls::settle(self.sandbox, self.registry, tool.call_tool).await?;
                Ok(Sample {
                    total,
                    phases: None,
                })
            }
        }
    }

    async fn skillbox(&self, tool: &Tool) -> Result<Sample> {
        use tokio::io::AsyncReadExt;
        let start = Instant::now();
        let PreparedCall {
            launch,
            guard,
            timings,
        } = self.sandbox.prepare(LaunchSpec {
            deps: None,
            trust_pem: None,
            skill_dir: Some(self.skill_dir),
            work: None,
            argv: &tool.sandbox_argv,
            env: Vec::new(),
            memory_mb: 512,
            max_file_mb: 1024,
            timeout_ms: 10_000,
            args_file: ArgsFile::Write(b"{}"),
            network: None,
            unix_sockets: false,
        })?;
        let prepared = Instant::now();
        let mut child = self
            .sandbox
            .spawn(launch)
            .context("spawning in the sandbox")?;
        let spawned = Instant::now();
        let pid = child.id();
        drop(child.stdin.take());
        let mut out = Vec::new();
        if let Some(mut stdout) = child.stdout.take() {
            stdout.read_to_end(&mut out).await?;
        }
        let status = child.wait().await?;
        let exited = Instant::now();
        let finish = guard.finish(pid);
        let finished = Instant::now();
        let result = serde_json::to_string(&serde_json::json!({
            "stdout": String::from_utf8_lossy(&out),
            "stderr": "",
            "exit_code": status.code(),
        }))?;
        let answered = Instant::now();
        std::hint::black_box(result);
        skillbox_executor::sandbox::wait_idle();
        let released = answered.elapsed();
        if !status.success() {
            bail!(
                "{:?} exited with {status} in the sandbox",
                tool.sandbox_argv
            );
        }
        Ok(Sample {
            total: answered - start,
            phases: Some([
                timings.user,
                timings.scratch,
                timings.args_file,
                timings.landlock,
                timings.command,
                spawned - prepared,
                exited - spawned,
                finish.kill,
                finish.hand_off,
                answered - finished,
                released,
            ]),
        })
    }
}
