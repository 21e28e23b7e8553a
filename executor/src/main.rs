//! `skillbox-executor`: `exec` runs one tool call in the full sandbox with no core;
//! `serve` is the daemon the core talks to over mutual TLS; `probe` prints what the kernel
//! enforces (docs/cli.md).
//!
//! `exec --stdio` runs one call for a core that attaches to the executor's stdin/stdout
//! (a one-off container with `network: none`): the core writes one `tool.execute` request
//! line on stdin (so env values and the capability token never appear on the command
//! line), the tool's capability requests are relayed as `core.fetch` / `core.sign` /
//! `core.readFile` request lines on stdout and answered on stdin, and the executor ends with
//! the result as the response line of id 0. A first request `session.exec` instead holds
//! one command session, serving the core's `session.write` / `session.close` until the
//! session is gone. See [`skillbox_executor::relay`].
#![forbid(unsafe_code)]

use skillbox_protocol::ToolRef;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use skillbox_executor::broker::OneShotBroker;
use skillbox_executor::call;
use skillbox_executor::registry::Registry;
use skillbox_executor::relay;
use skillbox_executor::sandbox::memcg::MemoryMode;
use skillbox_executor::sandbox::{probe, Sandbox, SandboxConfig};
use skillbox_protocol::methods::{Envelope, SecretValue, ToolExecuteParams};

mod self_filter;
mod serve_cmd;

const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;

/// skillbox executor: runs tool calls in a kernel sandbox; holds no secrets.
#[derive(Debug, Parser)]
#[command(name = "skillbox-executor", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one tool call in the full sandbox, with no core, and print its result as JSON
    /// (with --stdio: read the request from stdin and relay capabilities over stdin/stdout;
    /// a first request `session.exec` holds one command session instead).
    Exec(ExecArgs),
    /// Serve the core over mutual TLS (JSON-RPC on POST /rpc).
    Serve(ServeArgs),
    /// Print what the kernel enforces; exit 1 when the sandbox cannot be fully applied.
    Probe {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
struct ExecArgs {
    /// Skills root.
    #[arg(long, value_name = "DIR")]
    skills: PathBuf,
    /// The tool, as SKILL:TOOL.
    #[arg(long, value_name = "SKILL:TOOL", required_unless_present = "stdio")]
    tool: Option<String>,
    /// Arguments as a JSON object.
    #[arg(
        long,
        value_name = "JSON",
        default_value = "{}",
        conflicts_with = "args_file"
    )]
    args: String,
    /// Read the arguments (a JSON object) from FILE, or from stdin with `-` (for arguments
    /// larger than the kernel allows on a command line).
    #[arg(long, value_name = "FILE")]
    args_file: Option<PathBuf>,
    /// A declared env name whose value this process's own environment holds; repeatable.
    /// Values never go on the command line, where every process of the host can read them.
    #[arg(long = "env", value_name = "NAME")]
    env: Vec<String>,
    /// Read NAME=VALUE lines (`#` comments) for declared env names from FILE, or from stdin
    /// with `-`. Undeclared names are dropped.
    #[arg(long, value_name = "FILE")]
    env_file: Option<PathBuf>,
    /// Where per-call scratch dirs are made.
    #[arg(long, value_name = "DIR")]
    scratch_root: Option<PathBuf>,
    /// Run WITHOUT Landlock and seccomp (for kernels that lack them). Unsafe.
    #[arg(long)]
    insecure_no_sandbox: bool,
    /// Limit memory by rlimits per process even where a memory cgroup per call can be had
    /// (docs/sandbox.md, "Memory").
    #[arg(long)]
    no_memory_cgroups: bool,
    /// First user id of the per-call pool when running as root. Default: 2000000 in the
    /// host's PID namespace, 3000000 in one of its own (a container).
    #[arg(long, value_name = "UID",
          value_parser = clap::value_parser!(u32).range(100_000..=4_000_000_000))]
    uid_base: Option<u32>,
    /// Read one tool.execute request line from stdin and relay the tool's capability
    /// requests over stdout/stdin (JSON-RPC lines); the result is the last stdout line.
    #[arg(long, conflicts_with_all = ["tool", "args", "args_file", "env", "env_file"])]
    stdio: bool,
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// A skills root (read-only); repeat for several, highest precedence first (the first
    /// root holding a skill of a name wins).
    #[arg(long, value_name = "DIR", required = true)]
    skills: Vec<PathBuf>,
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7071")]
    listen: String,
    /// Folder with ca.pem, skillbox-executor.pem and skillbox-executor.key.
    #[arg(long, value_name = "DIR")]
    pki: PathBuf,
    /// The core's callback URL (https://host:port).
    #[arg(long, value_name = "URL")]
    core_url: String,
    /// Seconds to wait for the PKI files to appear (the core creates them).
    #[arg(long, default_value_t = 60)]
    wait_pki: u64,
    /// Calls run at once.
    #[arg(long, default_value_t = skillbox_executor::sandbox::DEFAULT_MAX_CONCURRENT_CALLS)]
    max_concurrent: usize,
    /// Calls waiting for a slot before new ones are refused with `unavailable`.
    #[arg(long, default_value_t = skillbox_executor::server::DEFAULT_MAX_QUEUE)]
    max_queue: usize,
    /// Prestarted tool processes (`execution.prestart`) held at once, over every skill.
    #[arg(long, default_value_t = skillbox_executor::sandbox::DEFAULT_MAX_PRESTARTED)]
    max_prestarted: usize,
    /// Per-call users with a fresh scratch dir kept ready ahead of calls (0: none).
    #[arg(long, default_value_t = skillbox_executor::sandbox::DEFAULT_READY_SLOTS)]
    ready_slots: usize,
    /// Where per-call scratch dirs are made.
    #[arg(long, value_name = "DIR", conflicts_with = "scratch_volume")]
    scratch_root: Option<PathBuf>,
    /// A folder that outlives the executor and may be shared by several (a named volume):
    /// the executor takes the first slot `DIR/<n>` no running executor holds (a lock held
    /// until it exits), removes what an earlier holder left there but the dependency
    /// environments, and makes it its scratch root. Built environments survive a restart.
    #[arg(long, value_name = "DIR")]
    scratch_volume: Option<PathBuf>,
    /// Put the scratch root on a tmpfs of this many MiB, private to the executor and its
    /// tools (needs root; without it the scratch stays on disk, with a warning). 0: on disk.
    #[arg(long, value_name = "MIB", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=1_048_576))]
    scratch_tmpfs_mb: u64,
    /// Most MiB of context files the executor keeps between calls, in its cache by
    /// SHA-256 and again in the work folders it keeps (docs/sessions.md), both in the
    /// scratch root. Default: 512, or a quarter of `--scratch-tmpfs-mb` when that is less.
    #[arg(long, value_name = "MIB",
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    blob_cache_mb: Option<u64>,
    /// Run WITHOUT Landlock and seccomp (for kernels that lack them). Unsafe.
    #[arg(long)]
    insecure_no_sandbox: bool,
    /// Limit memory by rlimits per process even where a memory cgroup per call can be had
    /// (docs/sandbox.md, "Memory").
    #[arg(long)]
    no_memory_cgroups: bool,
    /// First user id of the per-call pool when running as root. Default: 2000000 in the
    /// host's PID namespace, 3000000 in one of its own (a container): an executor in the
    /// host's PID namespace ends a call by killing every process of its id, which reaches
    /// into containers.
    #[arg(long, value_name = "UID",
          value_parser = clap::value_parser!(u32).range(100_000..=4_000_000_000))]
    uid_base: Option<u32>,
    /// On SIGTERM, how long the calls already held may take to finish before the executor
    /// exits anyway (keep it below the orchestrator's stop grace period).
    #[arg(long, value_name = "MS", default_value_t = duration_ms(skillbox_executor::drain::DEFAULT_DRAIN_GRACE))]
    drain_grace_ms: u64,
    /// On SIGTERM, how long an idle executor keeps refusing new calls as `draining` when
    /// the core has not asked `health` since (so the core learns it is going).
    #[arg(long, value_name = "MS", default_value_t = duration_ms(skillbox_executor::drain::DEFAULT_DRAIN_LINGER))]
    drain_linger_ms: u64,
}

fn duration_ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // `SKILLBOX_LOG_FORMAT=json` (set by `skillbox up` under `[log] format = "json"`): one
    // JSON object per line, never colour codes.
    let _ = if std::env::var("SKILLBOX_LOG_FORMAT").is_ok_and(|f| f == "json") {
        builder
            .json()
            .with_ansi(false)
            .with_current_span(true)
            .try_init()
    } else {
        // Colour codes only for a terminal: a log file gets plain text.
        builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init()
    };
    let cli = Cli::parse();
    match cli.command {
        Command::Probe { json } => run_probe(json),
        Command::Exec(args) => {
            skillbox_executor::sandbox::drop_own_bounding_set();
            skillbox_executor::sandbox::run_adopting_orphans(move || run_exec(args))
        }
        Command::Serve(args) => match serve_cmd::run_serve(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("skillbox-executor: {e:#}");
                ExitCode::from(EXIT_FAILED)
            }
        },
    }
}

fn run_probe(json: bool) -> ExitCode {
    let mut k = probe::probe();
    // A call's own /tmp is probed over a folder of the system's temporary one (serve
    // probes it over its scratch root).
    let over = std::env::temp_dir();
    k.probe_unix_sockets(&over);
    let problems = k.problems();
    if json {
        let mut v = serde_json::to_value(&k).unwrap_or_default();
        v["min_landlock_abi"] = probe::MIN_LANDLOCK_ABI.into();
        v["enforceable"] = problems.is_empty().into();
        v["problems"] = serde_json::to_value(&problems).unwrap_or_default();
        println!("{v}");
    } else {
        println!("kernel:        {}", k.kernel);
        println!(
            "landlock ABI:  {} (minimum {})",
            k.landlock_abi,
            probe::MIN_LANDLOCK_ABI
        );
        println!("seccomp:       {}", if k.seccomp { "yes" } else { "no" });
        println!(
            "per-call user: {}",
            if k.user_switch {
                "yes (running as root)"
            } else {
                "no (not root: process-tree kill only)"
            }
        );
        match skillbox_executor::sandbox::netns::probe() {
            Ok(true) => println!(
                "network ns:    yes (skills that declare network run behind the egress proxy; programs that ignore the proxy variables are taken to it too)"
            ),
            Ok(false) => println!(
                "network ns:    yes (skills that declare network run behind the egress proxy); {}",
                skillbox_executor::sandbox::netns::NO_TRANSPARENT
            ),
            Err(e) => println!(
                "network ns:    no ({e}): {}",
                skillbox_executor::sandbox::netns::UNAVAILABLE
            ),
        }
        println!(
            "unix sockets:  {}",
            if k.unix_sockets {
                "yes (a call that may use them gets a /tmp of its own)"
            } else {
                skillbox_executor::sandbox::mntns::UNAVAILABLE
            }
        );
        println!(
            "memory limit:  {}",
            match k.memory_limit {
                MemoryMode::CgroupV2 | MemoryMode::CgroupV1 => format!(
                    "{} (a memory cgroup per call: what its processes use)",
                    k.memory_limit.as_str()
                ),
                MemoryMode::Rlimit => format!(
                    "rlimit (RLIMIT_DATA per process, RLIMIT_AS with {} MiB more for runtimes' reservations; no writable cgroup with the memory controller: run as root, or give the container a delegated cgroup)",
                    skillbox_executor::sandbox::limits::RUNTIME_RESERVE_MB
                ),
            }
        );
        for p in &problems {
            println!("problem:       {p}");
        }
        println!(
            "sandbox:       {}",
            if problems.is_empty() {
                "enforceable"
            } else {
                "NOT enforceable"
            }
        );
    }
    ExitCode::from(if problems.is_empty() { 0 } else { EXIT_FAILED })
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("skillbox-executor: {msg}");
    ExitCode::from(EXIT_USAGE)
}

fn sandbox_config(a: &ExecArgs) -> SandboxConfig {
    let mut config = SandboxConfig {
        insecure_no_sandbox: a.insecure_no_sandbox,
        memory_cgroups: !a.no_memory_cgroups,
        ..SandboxConfig::default()
    };
    if let Some(root) = &a.scratch_root {
        config.scratch_root = root.clone();
    }
    if let Some(base) = a.uid_base {
        config.uid_base = base;
    }
    config
}

fn current_thread_runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("skillbox-executor: cannot start the runtime: {e}");
            None
        }
    }
}

fn run_exec_stdio(a: ExecArgs) -> ExitCode {
    if !a.skills.is_dir() {
        return usage(&format!("--skills {} is not a folder", a.skills.display()));
    }
    let config = sandbox_config(&a);
    let Some(runtime) = current_thread_runtime() else {
        return ExitCode::from(EXIT_FAILED);
    };
    let outcome = runtime.block_on(relay::run_stdio(
        tokio::io::stdin(),
        tokio::io::stdout(),
        &a.skills,
        config,
    ));
    // The stdin reader may be blocked in a read that cannot be cancelled: do not wait for it.
    runtime.shutdown_background();
    skillbox_executor::sandbox::wait_idle();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_usage() => usage(&format!("exec --stdio: {e}")),
        Err(e) => {
            eprintln!("skillbox-executor: exec --stdio: {e}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// The arguments and env values of `exec`, from the flags, the files they name, stdin and
/// this process's environment.
fn exec_input(a: &ExecArgs) -> Result<(serde_json::Value, BTreeMap<String, SecretValue>), String> {
    let stdin = PathBuf::from("-");
    if a.args_file.as_ref() == Some(&stdin) && a.env_file.as_ref() == Some(&stdin) {
        return Err("--args-file - and --env-file - cannot both read stdin".into());
    }
    let read = |flag: &str, path: &PathBuf| -> Result<String, String> {
        if *path == stdin {
            std::io::read_to_string(std::io::stdin())
                .map_err(|e| format!("{flag} -: cannot read stdin: {e}"))
        } else {
            std::fs::read_to_string(path).map_err(|e| format!("{flag} {}: {e}", path.display()))
        }
    };
    let args_text = match &a.args_file {
        Some(path) => read("--args-file", path)?,
        None => a.args.clone(),
    };
    let args =
        serde_json::from_str(&args_text).map_err(|e| format!("the arguments are not JSON: {e}"))?;
    let mut env = BTreeMap::new();
    for name in &a.env {
        if name.contains('=') {
            return Err(format!(
                "--env takes a NAME only: a value on the command line is readable by every \
                 process of the host (/proc/<pid>/cmdline); export it and pass --env {}, or \
                 put NAME=VALUE lines in a file for --env-file",
                name.split('=').next().unwrap_or_default()
            ));
        }
        let value = std::env::var(name)
            .map_err(|_| format!("--env {name}: this process's environment has no {name}"))?;
        env.insert(name.clone(), SecretValue(value));
    }
    if let Some(path) = &a.env_file {
        for (n, line) in read("--env-file", path)?.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                return Err(format!("--env-file line {}: expected NAME=VALUE", n + 1));
            };
            env.insert(k.trim().to_string(), SecretValue(v.to_string()));
        }
    }
    Ok((args, env))
}

/// Longest the one-shot `exec` waits for a prestarted process to block reading stdin.
const PRESTART_SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// When the skill asks for warm starts, starts one process of the tool the way a
/// long-running executor keeps them, and waits until it blocks reading its request, so
/// the call below takes a prestarted process.
async fn prestart_one(sandbox: &Sandbox, registry: &Registry, skill: &str, tool: &str) {
    let Some(registered) = registry.skill(skill) else {
        return;
    };
    let Some((tool, _)) = registered.tool(tool) else {
        return;
    };
    if registered.skill.execution.prestart == 0 {
        return;
    }
    if let Err(e) = registry.warm().start_one(sandbox, &registered.skill, tool) {
        tracing::warn!(error = %e, "cannot prestart the tool; the call starts it cold");
        return;
    }
    registry.warm().settled(PRESTART_SETTLE).await;
}

fn run_exec(a: ExecArgs) -> ExitCode {
    if a.stdio {
        return run_exec_stdio(a);
    }
    let Some(tool) = a.tool.as_deref() else {
        return usage("--tool SKILL:TOOL is required (or --stdio)");
    };
    let Ok(ToolRef { skill, tool }) = ToolRef::parse(tool) else {
        return usage("--tool must be SKILL:TOOL, e.g. echo:echo");
    };
    let (args, env) = match exec_input(&a) {
        Ok(input) => input,
        Err(message) => return usage(&message),
    };
    if !a.skills.is_dir() {
        return usage(&format!("--skills {} is not a folder", a.skills.display()));
    }
    let sandbox = match Sandbox::new(sandbox_config(&a)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skillbox-executor: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let registry = Registry::load(&a.skills);
    let params = ToolExecuteParams {
        call_id: format!("exec-{}", std::process::id()),
        capability_token: SecretValue(String::new()),
        skill: skill.to_string(),
        tool: tool.to_string(),
        args,
        envelope: Envelope {
            env,
            ..Envelope::default()
        },
        traceparent: None,
        workdir: None,
        script: None,
    };
    let Some(runtime) = current_thread_runtime() else {
        return ExitCode::from(EXIT_FAILED);
    };
    let result = runtime.block_on(async {
        prestart_one(&sandbox, &registry, &skill, &tool).await;
        call::execute(
            &sandbox,
            &registry,
            &OneShotBroker,
            params,
            std::time::Instant::now(),
        )
        .await
    });
    registry.warm().clear();
    // The scratch dir is removed on the sweeper's thread; let it finish before exiting.
    skillbox_executor::sandbox::wait_idle();
    match serde_json::to_string(&result) {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("skillbox-executor: cannot print the result: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    }
    ExitCode::SUCCESS
}
