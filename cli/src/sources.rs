//! `skillbox skill add|outdated|update`: skills from git sources (docs/cli-verbs.md,
//! "getting skills"). `add` goes through the core running on the workspace when one
//! answers (`POST /v1/skills/install`: the core fetches, installs and reloads, in its
//! container in a compose deployment); otherwise it fetches and installs on disk like
//! `skill install`, and a core started later picks the skill up.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use clap::Args;
use serde_json::json;

use super::client::{self, ClientError, CoreClient};
use super::{up, EXIT_FAILED};
use skillbox_core::skills::install::{PublisherChange, TrustPolicy};
use skillbox_core::skills::sources::{
    AddRequest, PreparedUpdate, SourceError, Sources, UpdateCheck,
};
use skillbox_core::state::config::Config;
use skillbox_core::state::Workspace;

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
    /// Wait until the added skills' dependencies are built (the running core builds them
    /// on load), with a progress line, and say how each build ended.
    #[arg(long)]
    wait: bool,
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
fn sources(workspace: Option<&Path>) -> anyhow::Result<Sources> {
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

/// `skillbox skill add SOURCE [--skill NAME]... [--ref REF]`: through the running core
/// when one answers on the workspace, else on disk.
pub fn add(a: AddArgs) -> anyhow::Result<u8> {
    let ws = up::workspace(a.workspace.as_deref())?;
    if let Some(core) = running_core(&ws)? {
        return add_through(&core, a);
    }
    let s = sources(Some(ws.root()))?;
    let req = AddRequest {
        source: source_from_here(&a.source, &std::env::current_dir()?),
        skills: a.skills,
        reference: a.reference,
        all: a.all,
        publisher_change: PublisherChange::allowed(a.allow_publisher_change),
    };
    let done = match s.add(&req, SystemTime::now()) {
        Ok(d) => serde_json::to_value(d)?,
        Err(e) => return refused(a.json, "add", &e),
    };
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"ok": true, "added": done}))?
        );
        return Ok(0);
    }
    print_added(&done);
    println!("no core is running on this workspace; it loads the skill when it starts");
    Ok(0)
}

/// The core running on `ws`, when one answers there.
fn running_core(ws: &Workspace) -> anyhow::Result<Option<CoreClient>> {
    match CoreClient::for_workspace(ws) {
        Ok(core) if std::net::TcpStream::connect(core.addr()).is_ok() => Ok(Some(core)),
        Ok(_) | Err(ClientError::NoAddress { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// SOURCE with a path given relative to `here` (where the command runs) made absolute:
/// the core reads a relative path from its workspace, which need not be where the operator
/// stands. A path is what the core would read as one: it starts with `.`, or names
/// something that exists here; URLs, absolute paths and `owner/repo` are left as given.
fn source_from_here(source: &str, here: &Path) -> String {
    let text = source.trim();
    if text.is_empty() || text.contains("://") || text.starts_with('/') || text.starts_with('-') {
        return source.to_string();
    }
    let rel: PathBuf = Path::new(text)
        .components()
        .filter(|c| *c != std::path::Component::CurDir)
        .collect();
    let path = here.join(rel);
    if !(text.starts_with('.') || path.exists()) {
        return source.to_string();
    }
    path.canonicalize().unwrap_or(path).display().to_string()
}

/// `skill add` as `POST /v1/skills/install` on the running core: the core fetches (with
/// its git), installs into its skills folder and reloads. A source that names a path from
/// here is sent as an absolute path ([`source_from_here`]).
fn add_through(core: &CoreClient, a: AddArgs) -> anyhow::Result<u8> {
    let source = source_from_here(&a.source, &std::env::current_dir()?);
    let body = json!({
        "source": source,
        "skills": a.skills,
        "all": a.all,
        "ref": a.reference,
        "allow_publisher_change": a.allow_publisher_change,
    });
    let (status, answer) =
        client::runtime()?.block_on(core.send("POST", "/v1/skills/install", Some(&body)))?;
    if !status.is_success() {
        let check = answer["check"].as_str().unwrap_or("-");
        let error = answer["error"]
            .as_str()
            .map_or_else(|| format!("HTTP {status}"), str::to_string);
        if a.json {
            let out = json!({"ok": false, "check": check, "error": error});
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            eprintln!("skillbox: add refused by the running core (check {check}): {error}");
        }
        return Ok(EXIT_FAILED);
    }
    // A git source answers what it added; a local folder or package, the one installed.
    let added = match &answer["added"] {
        serde_json::Value::Object(_) => answer["added"].clone(),
        _ => json!({"url": source, "installed": [answer["installed"]]}),
    };
    if a.json {
        let out = json!({"ok": true, "added": added, "reload": answer["reload"]});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    print_added(&added);
    if answer["reload"] == "ok" {
        println!("the running core at {} reloaded its skills", core.addr());
        let names: Vec<String> = (added["installed"].as_array().into_iter().flatten())
            .filter_map(|i| i["name"].as_str().map(str::to_string))
            .collect();
        return super::deps_wait::after_add(core, &names, a.wait);
    } else {
        println!(
            "the running core at {} did not reload: {}",
            core.addr(),
            answer["reload"]["error"]
        );
    }
    Ok(0)
}

/// What `skill add` fetched and installed, as lines.
fn print_added(done: &serde_json::Value) {
    let url = done["url"].as_str().unwrap_or("?");
    match done["commit"].as_str() {
        Some(c) => println!("fetched {url} at {c}"),
        None => println!("read {url}"),
    }
    for i in done["installed"].as_array().into_iter().flatten() {
        // The lock entry is flattened into each installed skill.
        let entry = i;
        let trust = match entry["publisher"].as_str() {
            Some(p) => format!("signed by {p}"),
            None => "local (NOT signed)".into(),
        };
        let folder = match entry["origin"]["subfolder"].as_str() {
            Some("") => ".",
            Some(sub) => sub,
            None => "",
        };
        println!(
            "installed {} from {folder} in {} ({trust}, {})",
            i["name"].as_str().unwrap_or("?"),
            i["dir"].as_str().unwrap_or("?"),
            entry["digest"].as_str().unwrap_or("?")
        );
    }
    for s in done["skipped"].as_array().into_iter().flatten() {
        println!(
            "skipped {}: {}",
            s["folder"].as_str().unwrap_or("?"),
            s["reason"].as_str().unwrap_or("?")
        );
    }
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
    for e in &list {
        let latest = e.latest.as_deref().map(short).unwrap_or("?");
        // Up to date past the installed commit: the ref moved, the skill's folder did not.
        let unchanged = e.status == "up_to_date" && e.latest.as_deref() != Some(&e.installed);
        println!(
            "{:<24} {:<11} {} -> {}  {}{}{}",
            e.name,
            e.status,
            short(&e.installed),
            latest,
            e.source,
            e.reference
                .as_deref()
                .map(|r| format!("@{r}"))
                .unwrap_or_default(),
            if unchanged {
                "  (folder unchanged)"
            } else {
                ""
            }
        );
        if let Some(err) = &e.error {
            println!("    {err}");
        }
    }
    Ok(0)
}

/// A commit id shortened for a line of output.
fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
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

/// The update when the skill's folder changed; else the report of a skill with nothing
/// to apply (its ref did not move, or moved without changing its folder: the new commit
/// is recorded and nothing asks for `--yes`).
fn changed(
    json: bool,
    name: &str,
    check: UpdateCheck,
) -> Result<PreparedUpdate, serde_json::Value> {
    match check {
        UpdateCheck::Changed(update) => Ok(*update),
        UpdateCheck::UpToDate => {
            if !json {
                println!("{name}: up to date");
            }
            Err(json!({"name": name, "status": "up_to_date"}))
        }
        UpdateCheck::FolderUnchanged {
            from_commit,
            to_commit,
        } => {
            if !json {
                println!(
                    "{name}: no change in {name}'s folder; now at {}",
                    short(&to_commit)
                );
            }
            Err(
                json!({"name": name, "status": "folder_unchanged", "from": from_commit, "to": to_commit}),
            )
        }
    }
}

/// `skillbox skill update [NAME] [--yes]`
pub fn update(a: UpdateArgs) -> anyhow::Result<u8> {
    let ws = up::workspace(a.workspace.as_deref())?;
    let s = sources(Some(ws.root()))?;
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
        let update = match changed(a.json, &name, prepared) {
            Ok(update) => update,
            Err(quiet) => {
                report.push(quiet);
                continue;
            }
        };
        let widens = update.diff.widens();
        if !a.json {
            println!(
                "{name}: {} -> {}{}",
                short(&update.from_commit),
                short(&update.to_commit),
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
    // The files changed on disk: a core running on the workspace serves them after a
    // reload (a compose deployment: run this in the core's container).
    let applied = report.iter().any(|r| r["status"] == "updated");
    let reload = match (applied, running_core(&ws)?) {
        (true, Some(core)) => {
            let done = client::runtime()?.block_on(core.send("POST", "/v1/skills/reload", None));
            Some(match done {
                Ok((st, _)) if st.is_success() => {
                    "the running core reloaded its skills".to_string()
                }
                Ok((st, body)) => format!(
                    "the running core did not reload (HTTP {st}): {}",
                    body["error"]
                ),
                Err(e) => format!("the running core did not reload: {e}"),
            })
        }
        _ => None,
    };
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"updates": report, "reload": reload}))?
        );
    } else if let Some(reload) = reload {
        println!("{reload}");
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_from_here_makes_relative_paths_absolute_and_leaves_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(here.join("repos/tools")).unwrap();
        let abs = |p: &str| here.join(p).display().to_string();
        assert_eq!(source_from_here("./repos/tools", &here), abs("repos/tools"));
        assert_eq!(source_from_here("repos/tools", &here), abs("repos/tools"));
        assert_eq!(source_from_here("./missing", &here), abs("missing"));
        assert_eq!(source_from_here(".", &here), here.display().to_string());
        let sub = here.join("repos");
        assert_eq!(source_from_here("../repos/tools", &sub), abs("repos/tools"));
        for kept in [
            "acme/tools",
            "https://github.com/acme/tools",
            "file:///srv/repo",
            "git@example.com:o/r.git",
            "/srv/repo",
        ] {
            assert_eq!(source_from_here(kept, &here), kept);
        }
    }
}
