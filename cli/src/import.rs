//! `skillbox skill import --from AGENT`: the skills another agent keeps, copied through
//! the verified install or linked as a skills root ([`skillbox_core::skills::import`]
//! decides and explains both); this file reads the arguments and prints the report.

use std::path::PathBuf;
use std::time::SystemTime;

use clap::{Args, ValueEnum};
use serde_json::json;

use super::{up, EXIT_FAILED};
use skillbox_core::skills::import::{self, Agent, ImportMode, ImportReport, Outcome};
use skillbox_core::skills::install::TrustPolicy;
use skillbox_core::skills::roots::{self, RootAdded};
use skillbox_core::skills::sources::InstallPolicy;
use skillbox_core::state::config::Config;

/// The agents `--from` names.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum From {
    /// Claude Code: ~/.claude/skills
    Claude,
    /// Codex: ~/.codex/skills
    Codex,
    /// OpenClaw: ~/.openclaw/skills
    Openclaw,
    /// The shared folder: ~/.agents/skills
    Agents,
}

impl From {
    fn agent(self) -> Agent {
        match self {
            From::Claude => Agent::Claude,
            From::Codex => Agent::Codex,
            From::Openclaw => Agent::Openclaw,
            From::Agents => Agent::Agents,
        }
    }
}

/// `skill import` arguments.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The agent whose skills folder is read.
    #[arg(long, value_enum)]
    from: From,
    /// Do not copy: add the agent's folder to `[skills] roots` in the workspace's
    /// skillbox.toml, so the skills stay where they are (refused under [trust]
    /// require_signed = true).
    #[arg(long)]
    link: bool,
    /// The workspace: skills are installed in DIR/skills (default, as for `skillbox up`:
    /// examples/workspace when it exists, else the current folder).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// The home folder the agent's folder is under (default: $HOME).
    #[arg(long, value_name = "DIR")]
    home: Option<PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// `skillbox skill import --from AGENT [--link]`: exits 0 when no candidate failed for a
/// reason other than the package's (skips are listed, not failures).
pub fn import(a: ImportArgs) -> anyhow::Result<u8> {
    let ws = up::workspace(a.workspace.as_deref())?;
    let home = a
        .home
        .or_else(roots::home)
        .ok_or_else(|| anyhow::anyhow!("HOME is not set; pass --home DIR"))?;
    let home = std::path::absolute(&home)?;
    let config = Config::load(ws.root())?;
    let roots = config.skills.resolve(ws.root(), Some(&home))?;
    ws.ensure_state_dir()?;
    let policy =
        TrustPolicy::for_workspace(&ws, config.trust.require_signed).with_roots(roots.clone());
    let mode = if a.link {
        ImportMode::Link
    } else {
        ImportMode::Copy
    };
    let agent = a.from.agent();
    let report = import::import(
        &agent.folder(&home),
        &ws,
        &policy,
        mode,
        Some(&home),
        &InstallPolicy {
            rule: config.skills.install_policy.clone(),
            git_host: config.skills.git_host.clone(),
        },
        SystemTime::now(),
    )?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&report)?)?);
    } else {
        print_report(&report, agent, &ws.config_file());
    }
    Ok(if report.failed() { EXIT_FAILED } else { 0 })
}

/// The report with each skip's sentence beside its reason.
fn to_json(report: &ImportReport) -> anyhow::Result<serde_json::Value> {
    let mut value = serde_json::to_value(report)?;
    if let Some(list) = value["candidates"].as_array_mut() {
        for (c, v) in report.candidates.iter().zip(list) {
            if let Outcome::Skipped { reason } = &c.outcome {
                v["message"] = json!(reason.message());
            }
        }
    }
    Ok(value)
}

fn print_report(report: &ImportReport, agent: Agent, config_file: &std::path::Path) {
    let how = match report.mode {
        ImportMode::Copy => "copied through the verified install",
        ImportMode::Link => "linked as a skills root",
    };
    println!(
        "{} skills in {} ({how})",
        agent.name(),
        report.agent_folder.display()
    );
    let (mut imported, mut skipped, mut failed) = (0, 0, 0);
    for c in &report.candidates {
        let name = c.name.as_deref().unwrap_or("-");
        match &c.outcome {
            Outcome::Imported { dir, trust } => {
                imported += 1;
                println!("  imported {name}: {} (trust {trust})", dir.display());
            }
            Outcome::Skipped { reason } => {
                skipped += 1;
                println!(
                    "  skipped  {name} ({}): {}",
                    c.folder.display(),
                    reason.message()
                );
            }
            Outcome::Failed { check, error } => {
                failed += 1;
                println!(
                    "  FAILED   {name} ({}): install check {check}: {error}",
                    c.folder.display()
                );
            }
        }
    }
    match report.root {
        Some(RootAdded::Added) => println!(
            "added {} to [skills] roots in {}",
            report.agent_folder.display(),
            config_file.display()
        ),
        Some(RootAdded::AlreadyThere) => println!(
            "[skills] roots in {} already names {}",
            config_file.display(),
            report.agent_folder.display()
        ),
        None => {}
    }
    println!("{imported} imported, {skipped} skipped, {failed} failed");
    match (report.root, imported) {
        // The core reads its roots when it starts; a reload rereads the skills in them.
        (Some(RootAdded::Added), _) => {
            println!("A running core reads the new root when it is started again.")
        }
        (_, 0) => {}
        _ => println!("A running core picks them up on POST /v1/skills/reload."),
    }
}
