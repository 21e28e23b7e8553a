//! `skillbox doctor [--workspace DIR]`: what is wrong with this machine and workspace, and
//! what to do about each problem. It checks, in order:
//! - the configuration (`skillbox.toml`) and the skills roots;
//! - what the kernel enforces (`skillbox-executor probe --json`, the executor found as
//!   `skillbox up` finds it);
//! - whether the running core answers `/healthz`, and whether its executor does;
//! - which skills the core offers as unavailable, and why (`GET /v1/skills`).
//!
//! Exit 0 when nothing is wrong, 1 otherwise.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;
use serde_json::Value;

use super::client::{self, CoreClient};
use super::{up, EXIT_FAILED};
use skillbox_core::state::config::Config;
use skillbox_core::state::Workspace;

/// `doctor` arguments.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The workspace (default, as for `skillbox up`: examples/workspace when it exists,
    /// else the current folder).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// One finding.
#[derive(Debug, Serialize)]
struct Check {
    /// What was looked at: `config`, `kernel`, `core`, `executor`, `skill NAME`, ...
    what: String,
    /// Whether it is fine.
    ok: bool,
    /// What was found.
    detail: String,
    /// What to do, when not fine.
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

impl Check {
    fn ok(what: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            ok: true,
            detail: detail.into(),
            fix: None,
        }
    }

    fn problem(what: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Runs `skillbox doctor`.
pub fn run(a: DoctorArgs) -> anyhow::Result<u8> {
    let ws = up::workspace(a.workspace.as_deref())?;
    let mut checks = Vec::new();
    let config = match Config::load(ws.root()) {
        Ok(c) => {
            checks.push(Check::ok("config", format!("{} read", config_name(&ws))));
            c
        }
        Err(e) => {
            checks.push(Check::problem(
                "config",
                e.to_string(),
                "fix the key named above (unknown keys are errors; every key and its default is in the configuration reference under docs/)",
            ));
            Config::default()
        }
    };
    checks.extend(roots(ws.root(), &config));
    checks.push(kernel(&config));
    checks.extend(client::runtime()?.block_on(core(&ws)));
    let failed = checks.iter().filter(|c| !c.ok).count();
    if a.json {
        let out = serde_json::json!({"workspace": ws.root(), "ok": failed == 0, "checks": checks});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("workspace: {}", ws.root().display());
        for c in &checks {
            println!(
                "{} {}: {}",
                if c.ok { "ok  " } else { "FAIL" },
                c.what,
                c.detail
            );
            if let Some(fix) = &c.fix {
                println!("     fix: {fix}");
            }
        }
        println!(
            "\n{}",
            if failed == 0 {
                "nothing wrong found".to_string()
            } else {
                format!("{failed} problem(s)")
            }
        );
    }
    Ok(if failed == 0 { 0 } else { EXIT_FAILED })
}

fn config_name(ws: &Workspace) -> String {
    let path = ws.config_file();
    if path.is_file() {
        path.display().to_string()
    } else {
        format!("no {} (defaults)", path.display())
    }
}

fn roots(ws: &Path, config: &Config) -> Vec<Check> {
    match config.skills_roots(ws) {
        Err(e) => vec![Check::problem(
            "skills roots",
            e.to_string(),
            "fix [skills] roots in skillbox.toml",
        )],
        Ok(roots) => {
            let (found, missing): (Vec<&PathBuf>, Vec<&PathBuf>) =
                roots.iter().partition(|r| r.is_dir());
            let show = |v: &[&PathBuf]| {
                v.iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut out = vec![Check::ok(
                "skills roots",
                format!("{} (first wins)", show(&found)),
            )];
            if found.is_empty() {
                out = vec![Check::problem(
                    "skills roots",
                    format!("none of {} exists", show(&missing)),
                    format!(
                        "create {} and put skill folders in it, or pass --workspace DIR",
                        ws.join(skillbox_core::skills::roots::INSTALL_ROOT)
                            .display()
                    ),
                )];
            } else if !missing.is_empty() {
                out.push(Check::ok(
                    "skills roots",
                    format!("{} missing (skipped until created)", show(&missing)),
                ));
            }
            out
        }
    }
}

fn kernel(config: &Config) -> Check {
    let binary = match skillbox_core::app::executor_child::executor_binary(&config.executor.binary)
    {
        Ok(b) => b,
        Err(e) => {
            return Check::problem(
                "kernel",
                format!("cannot probe: {e}"),
                "build the executor: cargo build -p skillbox-executor",
            )
        }
    };
    let out = match std::process::Command::new(&binary)
        .args(["probe", "--json"])
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            return Check::problem(
                "kernel",
                format!("cannot run {}: {e}", binary.display()),
                "check the file is an executable skillbox-executor, or set [executor] binary",
            )
        }
    };
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let detail = format!(
        "Linux {}, Landlock ABI {} (needs {}), seccomp {}, per-call user ids {}",
        v["kernel"].as_str().unwrap_or("?"),
        v["landlock_abi"],
        v["min_landlock_abi"],
        if v["seccomp"] == true { "yes" } else { "no" },
        if v["user_switch"] == true {
            "yes (root)"
        } else {
            "no (not root)"
        },
    );
    if out.status.success() && v["enforceable"] == true {
        return Check::ok("kernel", format!("the sandbox is enforced: {detail}"));
    }
    let problems: Vec<String> = v["problems"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    Check::problem(
        "kernel",
        format!("the sandbox cannot be fully applied: {detail}; {}", problems.join("; ")),
        "run on Linux 6.7+ with landlock in the lsm= boot list and seccomp filters, or in Docker on such a host; tools do not run otherwise (--insecure-no-sandbox is for trying things only)",
    )
}

async fn core(ws: &Workspace) -> Vec<Check> {
    let start = format!("start it: skillbox up --workspace {}", ws.root().display());
    let client = match CoreClient::for_workspace(ws) {
        Ok(c) => c,
        Err(e) => return vec![Check::problem("core", e.to_string(), start)],
    };
    let health = match client.send("GET", "/healthz", None).await {
        Ok((status, v)) if status.is_success() => v,
        Ok((status, _)) => {
            return vec![Check::problem(
                "core",
                format!("{} answers /healthz with HTTP {status}", client.addr()),
                "check that the address in .skillbox/gateway.addr is skillbox's gateway",
            )]
        }
        Err(e) => return vec![Check::problem("core", e.to_string(), start)],
    };
    let mut out = vec![Check::ok(
        "core",
        format!("answers at http://{}", client.addr()),
    )];
    out.push(if health["executor"] == "ok" {
        Check::ok(
            "executor",
            format!(
                "answers (Landlock ABI {}, seccomp {})",
                health["sandbox"]["landlock_abi"], health["sandbox"]["seccomp"]
            ),
        )
    } else {
        let why: Vec<String> = health["executors"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                format!(
                    "{}: {}",
                    e["address"].as_str().unwrap_or("?"),
                    e["error"].as_str().unwrap_or("no answer")
                )
            })
            .collect();
        Check::problem(
            "executor",
            format!("down ({})", why.join("; ")),
            "read the log of `skillbox up` (the executor's errors are there); `up` restarts it; with Docker, `docker compose logs executor`",
        )
    });
    match client.json("GET", "/v1/skills", None).await {
        Err(e) => out.push(Check::problem(
            "skills",
            e.to_string(),
            "check the API token in .skillbox/api-token",
        )),
        Ok(v) => {
            let skills = v["skills"].as_array().cloned().unwrap_or_default();
            let (available, unavailable): (Vec<&Value>, Vec<&Value>) =
                skills.iter().partition(|s| s["available"] == true);
            out.push(Check::ok(
                "skills",
                format!(
                    "{} available, {} unavailable",
                    available.len(),
                    unavailable.len()
                ),
            ));
            for s in unavailable {
                let name = s["name"].as_str().unwrap_or("?");
                let reason = s["reason"].as_str().unwrap_or("no reason given");
                out.push(Check::problem(
                    format!("skill {name}"),
                    reason.to_string(),
                    fix_for(s, reason),
                ));
            }
        }
    }
    out
}

/// What to do about an unavailable skill, from its reason.
fn fix_for(skill: &Value, reason: &str) -> String {
    let name = skill["name"].as_str().unwrap_or("?");
    if skill["disabled"] == true {
        return format!("reinstall {name} from a package that verifies (`skillbox skill install PACKAGE`), or remove it (`skillbox skill remove {name}`)");
    }
    if reason.contains("holds no value for") {
        return "put NAME=VALUE in .skillbox/secrets.env (mode 0600), then reload (`kill -HUP` the core or POST /v1/skills/reload); a value in the core's environment needs a restart of `skillbox up`".into();
    }
    if reason.contains("dependencies") {
        return format!("`skillbox skill deps {name}` builds them (with --rebuild after fixing a requirement or [deps] index_url); `skillbox skill deps {name} --json` shows the whole build log's tail");
    }
    if reason.contains("PATH") || reason.contains("program") {
        return "install the program on the executor's PATH (/usr/local/bin:/usr/bin:/bin), or in the executor image".into();
    }
    format!("see `skillbox skill info {name}` and the reason above")
}
