//! `skillbox skill add|outdated|update`: skills from git sources (docs/cli-verbs.md,
//! "getting skills"), fetched and installed on disk like `skill install`; a running core
//! picks the change up with its skills watch or `POST /v1/skills/reload`.

use std::path::PathBuf;
use std::time::SystemTime;

use clap::Args;
use serde_json::json;

use super::{up, EXIT_FAILED};
use skillbox_core::skills::install::{PublisherChange, TrustPolicy};
use skillbox_core::skills::sources::{AddRequest, SourceError, Sources};
use skillbox_core::state::config::Config;

/// Exit status of an update shown but not applied (it needs `--yes`).
pub const EXIT_NOT_CONFIRMED: u8 = 3;

/// `skill add` arguments.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// `owner/repo[/folder]` (on `[skills] git_host`), a git URL (https, ssh,
    /// user@host:path, file://), `https://host/owner/repo/tree/REF/folder`, a local
    /// repository, or a local skill folder.
    source: String,
    /// A skill to install from a repository holding several (its folder name or path);
    /// repeat for more.
    #[arg(long = "skill", value_name = "NAME")]
    skills: Vec<String>,
    /// Install every skill the repository holds.
    #[arg(long, conflicts_with = "skills")]
    all: bool,
    /// A branch, tag or commit (default: the repository's default branch).
    #[arg(long = "ref", value_name = "REF")]
    reference: Option<String>,
    /// Let a package replace an installed signed skill from another publisher.
    #[arg(long)]
    allow_publisher_change: bool,
    /// The workspace (default, as for `skillbox up`).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// `skill outdated` arguments.
#[derive(Debug, Args)]
pub struct OutdatedArgs {
    /// The workspace.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// `skill update` arguments.
#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// The skill to update (default: every skill added from git).
    name: Option<String>,
    /// Apply the update after showing it (without it, an update is applied only under
    /// `[skills] auto_update = true` and only when it widens no permission).
    #[arg(long)]
    yes: bool,
    /// The workspace.
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// The workspace's sources from `--workspace` and its `skillbox.toml`.
fn sources(workspace: Option<&std::path::Path>) -> anyhow::Result<Sources> {
    let ws = up::workspace(workspace)?;
    ws.ensure_state_dir()?;
    let config = Config::load(ws.root())?;
    let roots = config.skills_roots(ws.root())?;
    let trust = TrustPolicy::for_workspace(&ws, config.trust.require_signed).with_roots(roots);
    Ok(Sources::for_workspace(&ws, &config, trust))
}

fn refused(json: bool, what: &str, e: &SourceError) -> anyhow::Result<u8> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"ok": false, "check": e.check(), "error": e.to_string()})
            )?
        );
    } else {
        eprintln!("skillbox: {what} refused (check {}): {e}", e.check());
    }
    Ok(EXIT_FAILED)
}

/// `skillbox skill add SOURCE [--skill NAME]... [--ref REF]`
pub fn add(a: AddArgs) -> anyhow::Result<u8> {
    let s = sources(a.workspace.as_deref())?;
    let req = AddRequest {
        source: a.source.clone(),
        skills: a.skills,
        reference: a.reference,
        all: a.all,
        publisher_change: PublisherChange::allowed(a.allow_publisher_change),
    };
    let done = match s.add(&req, SystemTime::now()) {
        Ok(d) => d,
        Err(e) => return refused(a.json, "add", &e),
    };
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"ok": true, "added": done}))?
        );
        return Ok(0);
    }
    match &done.commit {
        Some(c) => println!("fetched {} at {c}", done.url),
        None => println!("read {}", done.url),
    }
    for i in &done.installed {
        let trust = match &i.entry.publisher {
            Some(p) => format!("signed by {p}"),
            None => "local (NOT signed)".into(),
        };
        let folder = i
            .entry
            .origin
            .as_ref()
            .map(|o| {
                if o.subfolder.is_empty() {
                    ".".to_string()
                } else {
                    o.subfolder.clone()
                }
            })
            .unwrap_or_default();
        println!(
            "installed {} from {folder} in {} ({trust}, {})",
            i.name,
            i.dir.display(),
            i.entry.digest
        );
    }
    Ok(0)
}

/// `skillbox skill outdated`
pub fn outdated(a: OutdatedArgs) -> anyhow::Result<u8> {
    let s = sources(a.workspace.as_deref())?;
    let list = match s.outdated() {
        Ok(l) => l,
        Err(e) => return refused(a.json, "outdated", &e),
    };
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"skills": list}))?
        );
        return Ok(0);
    }
    if list.is_empty() {
        println!("no skill was added from a git source (`skillbox skill add SOURCE`)");
    }
    let short = |c: &str| c.get(..12).unwrap_or(c).to_string();
    for e in &list {
        let latest = e.latest.as_deref().map(short).unwrap_or_else(|| "?".into());
        println!(
            "{:<24} {:<11} {} -> {}  {}{}",
            e.name,
            e.status,
            short(&e.installed),
            latest,
            e.source,
            e.reference
                .as_deref()
                .map(|r| format!("@{r}"))
                .unwrap_or_default()
        );
        if let Some(err) = &e.error {
            println!("    {err}");
        }
    }
    Ok(0)
}

/// Reports a refused update (on stderr unless `json`) and returns its report line.
fn update_refused(json: bool, name: &str, e: &SourceError) -> serde_json::Value {
    if !json {
        eprintln!(
            "skillbox: update of {name} refused (check {}): {e}",
            e.check()
        );
    }
    json!({"name": name, "status": "refused", "check": e.check(), "error": e.to_string()})
}

/// `skillbox skill update [NAME] [--yes]`
pub fn update(a: UpdateArgs) -> anyhow::Result<u8> {
    let s = sources(a.workspace.as_deref())?;
    let names = match &a.name {
        Some(n) => vec![n.clone()],
        None => match s.git_added() {
            Ok(n) => n,
            Err(e) => return refused(a.json, "update", &e),
        },
    };
    let mut status = 0;
    let mut report = Vec::new();
    for name in names {
        let prepared = match s.prepare_update(&name, SystemTime::now()) {
            Ok(p) => p,
            Err(e) => {
                report.push(update_refused(a.json, &name, &e));
                status = EXIT_FAILED;
                continue;
            }
        };
        let Some(update) = prepared else {
            if !a.json {
                println!("{name}: up to date");
            }
            report.push(json!({"name": name, "status": "up_to_date"}));
            continue;
        };
        let widens = update.diff.widens();
        if !a.json {
            println!(
                "{name}: {} -> {}{}",
                &update.from_commit[..12.min(update.from_commit.len())],
                &update.to_commit[..12.min(update.to_commit.len())],
                if widens { "  (WIDENS PERMISSIONS)" } else { "" }
            );
            print!("{}", update.diff.render());
        }
        let diff = serde_json::to_value(&update.diff)?;
        let (from, to) = (update.from_commit.clone(), update.to_commit.clone());
        if update.needs_confirmation(s.auto_update) && !a.yes {
            if !a.json {
                println!(
                    "{name}: not applied; run `skillbox skill update {name} --yes` to apply it{}",
                    if widens && s.auto_update {
                        " (it widens permissions, so auto_update does not apply it)"
                    } else {
                        ""
                    }
                );
            }
            report.push(json!({"name": name, "status": "needs_confirmation", "widens": widens, "from": from, "to": to, "diff": diff}));
            if status == 0 {
                status = EXIT_NOT_CONFIRMED;
            }
            continue;
        }
        match s.apply_update(update, SystemTime::now()) {
            Ok(done) => {
                if !a.json {
                    println!("{name}: updated to {to} ({})", done.entry.digest);
                }
                report.push(json!({"name": name, "status": "updated", "widens": widens, "from": from, "to": to, "diff": diff}));
            }
            Err(e) => {
                report.push(update_refused(a.json, &name, &e));
                status = EXIT_FAILED;
            }
        }
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"updates": report}))?
        );
    }
    Ok(status)
}
