//! `skillbox skill pack|install|verify`: package a skill, install a package with
//! verification (docs/signing-runbook.md), re-verify what is installed.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use clap::Args;
use serde_json::json;
use skillbox_certs::trust::TrustStore;
use skillbox_protocol::skill::validate::is_spec_skill_name;
use skillbox_protocol::skill::{load_skill, InstallLock, LoadOutcome};

use super::client::{self, ClientError, CoreClient};
use super::{table, up, EXIT_FAILED};
use skillbox_core::skills::install::verify::{verify_installed, Status};
use skillbox_core::skills::install::{self, pack, Limits, PublisherChange, TrustPolicy};
use skillbox_core::state::config::Config;
use skillbox_core::state::Workspace;

/// `skill pack` arguments.
#[derive(Debug, Args)]
pub struct PackArgs {
    /// The skill folder.
    dir: PathBuf,
    /// The archive to write (default: ./<name>-<version>.tar.gz).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// `skill install` arguments.
#[derive(Debug, Args)]
pub struct InstallArgs {
    /// A skill folder or a .tar.gz made by `skillbox skill pack`.
    source: PathBuf,
    /// The workspace: skills go to DIR/skills, the trust store is DIR/.skillbox/trust.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
    /// Let the package replace an installed signed skill although it comes from another
    /// publisher (another developer key, and not the same publisher name under the same
    /// root). Without it such a replacement is refused.
    #[arg(long)]
    allow_publisher_change: bool,
}

/// `skill remove` arguments.
#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The installed skill's name.
    name: String,
    /// The workspace: the skill is removed from DIR/skills (default, as for `skillbox up`:
    /// examples/workspace when it exists, else the current folder).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// `skill verify` arguments.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Re-verify every installed skill (the only mode for now).
    #[arg(long, required = true)]
    all: bool,
    /// The workspace.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// The workspace's trust policy from `--workspace` and its `skillbox.toml`.
pub fn policy(workspace: Option<&Path>) -> anyhow::Result<TrustPolicy> {
    let ws = up::workspace(workspace)?;
    ws.ensure_state_dir()?;
    let config = Config::load(ws.root())?;
    Ok(TrustPolicy::for_workspace(&ws, config.trust.require_signed))
}

/// `skillbox skill pack DIR [--out FILE]`
pub fn pack(a: PackArgs) -> anyhow::Result<u8> {
    let out = match a.out {
        Some(o) => o,
        None => {
            let base = match load_skill(&a.dir) {
                LoadOutcome::Loaded(s) => match &s.version {
                    Some(v) => format!("{}-{v}", s.name),
                    None => s.name.clone(),
                },
                LoadOutcome::Skipped(s) => {
                    anyhow::bail!("{} does not load: {}", a.dir.display(), s.reason())
                }
                LoadOutcome::NotASkill => anyhow::bail!(
                    "{} is not a skill folder (no SKILL.md, skill.yaml or package.json)",
                    a.dir.display()
                ),
            };
            PathBuf::from(format!("{base}.tar.gz"))
        }
    };
    let packed = pack::pack(&a.dir, &out)?;
    println!(
        "packed {} entries into {} ({} bytes)",
        packed.entries,
        packed.out.display(),
        packed.bytes
    );
    Ok(0)
}

/// `skillbox skill install SRC [--workspace DIR]`
pub fn install(a: InstallArgs) -> anyhow::Result<u8> {
    let policy = policy(a.workspace.as_deref())?;
    let publisher_change = PublisherChange::allowed(a.allow_publisher_change);
    match install::install(
        &a.source,
        &policy,
        Limits::default(),
        SystemTime::now(),
        publisher_change,
    ) {
        Ok(done) => {
            if a.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&json!({"installed": true, "skill": done}))?
                );
                return Ok(0);
            }
            let version = done.entry.version.as_deref().unwrap_or("(no version)");
            println!(
                "installed {} {version} in {}",
                done.name,
                done.dir.display()
            );
            match &done.entry.publisher {
                Some(p) => println!(
                    "  trust:  signed by {p} (certificate {}, root {})",
                    done.entry.leaf_fingerprint.as_deref().unwrap_or("-"),
                    done.entry.root_fingerprint.as_deref().unwrap_or("-")
                ),
                None => println!(
                    "  trust:  local — the package is NOT signed; installed because [trust] require_signed = false"
                ),
            }
            println!("  digest: {}", done.entry.digest);
            if let Some(old) = &done.replaced {
                println!("  replaced version {old}");
            }
            println!("A running core picks it up on POST /v1/skills/reload.");
            Ok(0)
        }
        Err(e) => {
            if a.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &json!({"installed": false, "check": e.check(), "error": e.to_string()})
                    )?
                );
            } else {
                eprintln!("skillbox: install refused (check {}): {e}", e.check());
            }
            Ok(EXIT_FAILED)
        }
    }
}

/// `skillbox skill remove NAME [--workspace DIR]`: through the running core when one
/// answers (`DELETE /v1/skills/{name}`, which also reloads it), else on disk with the same
/// checks ([`install::remove`]): only a skill installed by skillbox is removed.
pub fn remove(a: RemoveArgs) -> anyhow::Result<u8> {
    let ws = up::workspace(a.workspace.as_deref())?;
    // A name no skill can have is refused on disk below, with the route's message.
    let through_core = if is_spec_skill_name(&a.name) {
        ask_core_to_remove(&ws, &a.name)?
    } else {
        None
    };
    let (removed, error, reloaded) = match through_core {
        Some((status, body)) if status.is_success() => {
            let reloaded = if body["reload"] == "ok" {
                "the running core reloaded its skills".to_string()
            } else {
                format!(
                    "the running core did not reload: {}",
                    body["reload"]["error"]
                )
            };
            (Some(body["removed"].clone()), None, reloaded)
        }
        Some((_, body)) => (
            None,
            Some((
                body["check"].as_str().unwrap_or("-").to_string(),
                body["error"].as_str().unwrap_or("refused").to_string(),
            )),
            String::new(),
        ),
        None => {
            let policy = policy(Some(ws.root()))?;
            match install::remove::remove(&policy, &a.name) {
                Ok(r) => (
                    Some(serde_json::to_value(r)?),
                    None,
                    "no core is running on this workspace; it starts without the skill".into(),
                ),
                Err(e) => (
                    None,
                    Some((e.check().to_string(), e.to_string())),
                    String::new(),
                ),
            }
        }
    };
    match (removed, error) {
        (Some(r), _) => {
            if a.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&json!({"removed": r, "reload": reloaded}))?
                );
            } else {
                println!(
                    "removed {} {} from {}",
                    a.name,
                    r["version"].as_str().unwrap_or("(no version)"),
                    r["dir"].as_str().unwrap_or("?")
                );
                println!("{reloaded}");
            }
            Ok(0)
        }
        (None, Some((check, error))) => {
            if a.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(
                        &json!({"removed": false, "check": check, "error": error})
                    )?
                );
            } else {
                eprintln!("skillbox: remove refused (check {check}): {error}");
            }
            Ok(EXIT_FAILED)
        }
        (None, None) => anyhow::bail!("the removal of {} gave no answer", a.name),
    }
}

/// `DELETE /v1/skills/{name}` on the core running on `ws`; `None` when none answers.
fn ask_core_to_remove(
    ws: &Workspace,
    name: &str,
) -> anyhow::Result<Option<(http::StatusCode, serde_json::Value)>> {
    let core = match CoreClient::for_workspace(ws) {
        Ok(core) => core,
        Err(ClientError::NoAddress { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    match client::runtime()?.block_on(core.send("DELETE", &format!("/v1/skills/{name}"), None)) {
        Ok(answer) => Ok(Some(answer)),
        Err(ClientError::Connect { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `skillbox skill verify --all [--workspace DIR] [--json]`
pub fn verify(a: VerifyArgs) -> anyhow::Result<u8> {
    debug_assert!(a.all);
    let policy = policy(a.workspace.as_deref())?;
    let lock = InstallLock::read(&policy.skills_root)?.unwrap_or_default();
    let store = TrustStore::load(&policy.trust_dir);
    let store_err = store.as_ref().err().map(ToString::to_string);
    let store_ref = match (&store, &store_err) {
        (Ok(s), _) => Ok(s),
        (Err(_), Some(e)) => Err(e.as_str()),
        (Err(_), None) => Err("the trust store did not load"),
    };
    let reports = verify_installed(&policy, &lock, store_ref, SystemTime::now());
    let failed = reports
        .iter()
        .filter(|r| r.status == Status::Failed)
        .count();
    let at_risk = reports
        .iter()
        .filter(|r| r.status == Status::AtRisk)
        .count();
    if a.json {
        let out = json!({
            "skills": reports,
            "failed": failed,
            "at_risk": at_risk,
            "trust_store": store_err,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        if let Some(e) = &store_err {
            println!("trust store: {e}");
        }
        let rows: Vec<Vec<String>> = reports
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    r.version.clone().unwrap_or_else(|| "-".into()),
                    r.trust.label().to_string(),
                    match r.status {
                        Status::Ok => "ok".into(),
                        Status::AtRisk => "AT RISK".into(),
                        Status::Failed => "FAIL".into(),
                    },
                    r.check.clone().unwrap_or_default(),
                ]
            })
            .collect();
        print!(
            "{}",
            table::render(&["NAME", "VERSION", "TRUST", "STATUS", "CHECK"], &rows)
        );
        for r in reports.iter().filter(|r| r.status != Status::Ok) {
            println!("{}: {}", r.name, r.reason.as_deref().unwrap_or(""));
        }
        println!(
            "\n{} installed, {failed} failing, {at_risk} depending on a root being retired",
            reports.len()
        );
    }
    Ok(if failed == 0 { 0 } else { EXIT_FAILED })
}
