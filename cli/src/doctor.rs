//! `skillbox doctor [--workspace DIR]`: what is wrong with this machine and workspace, and
//! what to do about each problem. It checks, in order:
//! - the configuration (`skillbox.toml`) and the skills roots;
//! - what the kernel enforces (`skillbox-executor probe --json`, the executor found as
//!   `skillbox up` finds it);
//! - whether the executor can give network skills' programs a network namespace of their
//!   own (the running executor's health when it answers, else the probe): a warning, not a
//!   problem, when it cannot;
//! - whether the running core answers `/healthz`, and whether its executor does;
//! - which skills the core offers as unavailable, and why (`GET /v1/skills`).
//!
//! Exit 0 when nothing is wrong (warnings included), 1 otherwise.

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
    /// Whether it is fine (a warning is: something works less than it could).
    ok: bool,
    /// Whether it is fine only in part: works, but something is missing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    warning: bool,
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
            warning: false,
            detail: detail.into(),
            fix: None,
        }
    }

    fn problem(what: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            ok: false,
            warning: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    fn warning(what: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            ok: true,
            warning: true,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// The line's mark in the text output.
    fn mark(&self) -> &'static str {
        match (self.ok, self.warning) {
            (false, _) => "FAIL",
            (true, true) => "warn",
            (true, false) => "ok  ",
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
    let (kernel, probed) = kernel(&config);
    checks.push(kernel);
    checks.push(git());
    let network_at = checks.len();
    let mut running = None;
    checks.extend(client::runtime()?.block_on(core(&ws, &mut running)));
    if let Some(check) = network_namespaces(probed, running) {
        checks.insert(network_at, check);
    }
    let failed = checks.iter().filter(|c| !c.ok).count();
    let warned = checks.iter().filter(|c| c.warning).count();
    if a.json {
        let out = serde_json::json!({"workspace": ws.root(), "ok": failed == 0, "checks": checks});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("workspace: {}", ws.root().display());
        for c in &checks {
            println!("{} {}: {}", c.mark(), c.what, c.detail);
            if let Some(fix) = &c.fix {
                println!("     fix: {fix}");
            }
        }
        let warnings = match warned {
            0 => String::new(),
            n => format!(", {n} warning(s)"),
        };
        println!(
            "\n{}{warnings}",
            if failed == 0 {
                "nothing wrong found".to_string()
            } else {
                format!("{failed} problem(s)")
            }
        );
    }
    Ok(if failed == 0 { 0 } else { EXIT_FAILED })
}

/// Whether `skill add` can fetch: the `git` program on PATH.
fn git() -> Check {
    match std::process::Command::new("git").arg("--version").output() {
        Ok(out) if out.status.success() => Check::ok(
            "git",
            format!(
                "{} (skill add, outdated and update fetch with it)",
                String::from_utf8_lossy(&out.stdout).trim()
            ),
        ),
        _ => Check::warning(
            "git",
            "the git program is not on PATH: `skill add`, `outdated` and `update` cannot fetch git sources (folders and archives still install)",
            "install git (apt-get install git)",
        ),
    }
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

/// The kernel check, and whether the probe found network namespaces (`None`: it could not
/// run, or its executor predates the answer).
fn kernel(config: &Config) -> (Check, Option<bool>) {
    let binary = match skillbox_core::app::executor_child::executor_binary(&config.executor.binary)
    {
        Ok(b) => b,
        Err(e) => {
            let check = Check::problem(
                "kernel",
                format!("cannot probe: {e}"),
                "build the executor: cargo build -p skillbox-executor",
            );
            return (check, None);
        }
    };
    let out = match std::process::Command::new(&binary)
        .args(["probe", "--json"])
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            let check = Check::problem(
                "kernel",
                format!("cannot run {}: {e}", binary.display()),
                "check the file is an executable skillbox-executor, or set [executor] binary",
            );
            return (check, None);
        }
    };
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let network = v["network_namespaces"].as_bool();
    let detail = format!(
        "Linux {}, Landlock ABI {} (needs {}), seccomp {}, per-call user ids {}, memory limited by {}",
        v["kernel"].as_str().unwrap_or("?"),
        v["landlock_abi"],
        v["min_landlock_abi"],
        if v["seccomp"] == true { "yes" } else { "no" },
        if v["user_switch"] == true {
            "yes (root)"
        } else {
            "no (not root)"
        },
        match v["memory_limit"].as_str() {
            Some("cgroup_v2") | Some("cgroup_v1") => "a memory cgroup per call",
            Some("rlimit") => "rlimits per process (no writable cgroup; docs/sandbox.md#memory)",
            _ => "?",
        },
    );
    if out.status.success() && v["enforceable"] == true {
        let check = Check::ok("kernel", format!("the sandbox is enforced: {detail}"));
        return (check, network);
    }
    let problems: Vec<String> = v["problems"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    let check = Check::problem(
        "kernel",
        format!("the sandbox cannot be fully applied: {detail}; {}", problems.join("; ")),
        "run on Linux 6.7+ with landlock in the lsm= boot list and seccomp filters, or in Docker on such a host; tools do not run otherwise (--insecure-no-sandbox is for trying things only)",
    );
    (check, network)
}

/// Whether programs of skills that declare network get a network namespace of their own
/// (docs/sandbox.md): from the running executor's health when it said (`running`), else
/// from this machine's probe (`probed`); `None` when neither could tell (the kernel or
/// executor check already says why). Without namespaces such skills are unavailable
/// (saying so) while every other skill runs: a warning, not a problem.
fn network_namespaces(probed: Option<bool>, running: Option<bool>) -> Option<Check> {
    const WHAT: &str = "network namespaces";
    let (available, who) = match (running, probed) {
        (Some(r), _) => (r, "the running executor"),
        (None, Some(p)) => (p, "the executor (probe)"),
        (None, None) => return None,
    };
    Some(if available {
        Check::ok(
            WHAT,
            format!("{who} gives each call of a skill that declares network a namespace of its own: its programs reach the declared hosts through the egress proxy"),
        )
    } else {
        Check::warning(
            WHAT,
            format!("{who} cannot create network namespaces: skills with network (declared or granted) are unavailable, since their programs could reach nothing; the others run"),
            "run the executor with CAP_SYS_ADMIN and CAP_NET_ADMIN (the shipped compose.yaml gives them; elsewhere cap_add: [SYS_ADMIN, NET_ADMIN] on the executor service, and a seccomp profile that allows unshare), or as root on the host",
        )
    })
}

/// The core's checks; sets `running_netns` to what its executor's health says of network
/// namespaces, when it says.
async fn core(ws: &Workspace, running_netns: &mut Option<bool>) -> Vec<Check> {
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
    *running_netns = health["sandbox"]["sandbox"]["network_namespaces"].as_bool();
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
            out.extend(skills.iter().flat_map(script_warnings));
        }
    }
    out
}

/// A warning for each thing a skill's scripts use that the sandbox lacks (the core's
/// `script_warnings`): the skill may still run, and fail where its script needs it.
fn script_warnings(skill: &Value) -> Vec<Check> {
    let name = skill["name"].as_str().unwrap_or("?");
    (skill["script_warnings"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .map(|w| {
            let fix = if w.contains("import") {
                format!("add the package to the skill's requirements, or grant it: [grants.{name}] requirements = [\"PACKAGE\"] in skillbox.toml (a module's package may be named otherwise: yaml is pyyaml, PIL is pillow)")
            } else {
                "install the program where the executor runs (under `skillbox up`, on the host's /usr/local/bin:/usr/bin:/bin; in the executor image, SKILLBOX_EXTRA_DEBIAN_PACKAGES), or leave it if the skill does without".to_string()
            };
            Check::warning(format!("skill {name}"), w.to_string(), fix)
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_namespaces_missing_is_a_warning_saying_what_to_change() {
        let Some(c) = network_namespaces(Some(false), None) else {
            panic!("no check");
        };
        assert!(c.ok && c.warning, "{c:?}");
        assert_eq!(c.mark(), "warn");
        assert!(c
            .detail
            .starts_with("the executor (probe) cannot create network namespaces"));
        assert!(c.detail.contains("skills with network"), "{c:?}");
        assert!(c.detail.contains("are unavailable"), "{c:?}");
        let fix = c.fix.unwrap_or_default();
        assert!(fix.contains("CAP_SYS_ADMIN and CAP_NET_ADMIN"), "{fix}");
        assert!(fix.contains("as root on the host"), "{fix}");
    }

    #[test]
    fn network_namespaces_available_is_ok() {
        let Some(c) = network_namespaces(Some(true), None) else {
            panic!("no check");
        };
        assert!(c.ok && !c.warning && c.fix.is_none(), "{c:?}");
        assert_eq!(c.mark(), "ok  ");
        let json = serde_json::to_value(&c).unwrap_or_default();
        assert!(json.get("warning").is_none(), "{json}");
    }

    #[test]
    fn network_namespaces_of_the_running_executor_win_over_the_probe() {
        // `doctor` on the host says yes, the executor's container cannot.
        let Some(c) = network_namespaces(Some(true), Some(false)) else {
            panic!("no check");
        };
        assert!(c.warning, "{c:?}");
        assert!(c.detail.starts_with("the running executor cannot"), "{c:?}");
        let json = serde_json::to_value(&c).unwrap_or_default();
        assert_eq!(json["warning"], true, "{json}");
        assert_eq!(json["ok"], true, "{json}");
        // Neither could tell: the kernel or executor line already says why.
        assert!(network_namespaces(None, None).is_none());
    }
}
