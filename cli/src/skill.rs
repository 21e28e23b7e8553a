//! `skillbox skill list|info|validate`: what is in a skills root and whether it is valid;
//! `skill pack|install|verify` (signed packages, docs/signing-runbook.md) are in
//! [`super::install`], `skill import` in [`super::import`], `skill find` in [`super::find`].

use skillbox_protocol::ToolRef;
use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;
use skillbox_protocol::skill::{
    discover, Catalog, Diagnostic, DiscoveryOptions, Severity, Skill, DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_FOLDERS,
};

use super::table;
use super::EXIT_FAILED;
use skillbox_core::state::config::Config;

/// `skillbox skill ...`
#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// List the skills found (in the workspace's skills roots, or --skills DIR), the folders
    /// skipped and why, and which skill shadows which.
    List(ListArgs),
    /// Show one skill: manifest fields, tools, body and files.
    Info(InfoArgs),
    /// Validate every skill; exits 1 when any fails.
    Validate(ValidateArgs),
    /// Pack a skill folder into a deterministic .tar.gz.
    Pack(super::install::PackArgs),
    /// Install a skill folder or .tar.gz after verifying it (signature, chain, rollback).
    Install(super::install::InstallArgs),
    /// Re-verify installed skills against the trust store; exits 1 when any fails.
    Verify(super::install::VerifyArgs),
    /// Remove an installed skill and its lock entry (through the running core when one
    /// answers, which then reloads; else on disk). Folders skillbox did not install are
    /// left to you.
    Remove(super::install::RemoveArgs),
    /// Build a skill's Python dependencies (requirements.txt, pyproject.toml, PEP 723,
    /// [grants.<skill>] requirements) through the running core, in the executors' sandbox;
    /// exits 1 when the build fails.
    Deps(super::deps::DepsArgs),
    /// Add skills from a git source (owner/repo, a git URL, a local repository) through the
    /// verified install; the lock records source, ref, commit and folder.
    Add(super::sources::AddArgs),
    /// List the skills added from git whose source moved since they were fetched.
    Outdated(super::sources::OutdatedArgs),
    /// Fetch a git-added skill again, show what changes (tools, security, hosts, env,
    /// dependencies, a diff of each file) and apply it with --yes; exits 3 when an update
    /// was shown but not applied.
    Update(super::sources::UpdateArgs),
    /// Import the skills another agent keeps (claude, codex, openclaw, agents): copied
    /// through the verified install, or with --link their folder added as a skills root.
    /// Skips are listed with their reason; exits 1 only when an install failed for a
    /// reason other than the package's.
    Import(super::import::ImportArgs),
    /// Search collection indexes ([skills] indexes, --index) and the installed skills.
    Find(super::find::FindArgs),
}

/// Where to look for skills.
#[derive(Debug, Args)]
pub struct RootArgs {
    /// A skills root; repeat for several, highest precedence first. Default: the roots of
    /// the workspace (its `[skills] roots`, and DIR/skills), as the running core reads them.
    #[arg(long = "skills", value_name = "DIR", conflicts_with = "workspace")]
    pub skills: Vec<PathBuf>,
    /// The workspace whose skills roots are read (default, as for `skillbox up`:
    /// examples/workspace when it exists, else the current folder).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// How deep below a root skill folders are looked for.
    #[arg(long, default_value_t = DEFAULT_MAX_DEPTH)]
    pub max_depth: usize,
    /// Cap on folders visited.
    #[arg(long, default_value_t = DEFAULT_MAX_FOLDERS)]
    pub max_folders: usize,
}

impl RootArgs {
    /// The roots: `--skills` as given, else the workspace's.
    pub fn roots(&self) -> anyhow::Result<Vec<PathBuf>> {
        if !self.skills.is_empty() {
            if let Some(missing) = self.skills.iter().find(|r| !r.is_dir()) {
                anyhow::bail!(
                    "skills root {} is not a folder; pass --skills DIR pointing at a folder of skill folders",
                    missing.display()
                );
            }
            return Ok(self.skills.clone());
        }
        let ws = super::up::workspace(self.workspace.as_deref())?;
        let roots = Config::load(ws.root())?.skills_roots(ws.root())?;
        if !roots.iter().any(|r| r.is_dir()) {
            anyhow::bail!(
                "no skills root of workspace {} exists ({}); create {} or pass --workspace DIR or --skills DIR",
                ws.root().display(),
                roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                ws.skills_dir().display()
            );
        }
        Ok(roots)
    }

    fn discover(&self) -> anyhow::Result<Catalog> {
        Ok(discover(
            &self.roots()?,
            DiscoveryOptions {
                max_depth: self.max_depth,
                max_folders: self.max_folders,
            },
        ))
    }
}

/// `skill list` arguments.
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    roots: RootArgs,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// `skill info` arguments.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The skill's name.
    name: String,
    #[command(flatten)]
    roots: RootArgs,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// `skill validate` arguments.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    roots: RootArgs,
    /// Reject what the Agent Skills spec rejects (warnings fail too).
    #[arg(long)]
    strict: bool,
    /// Print JSON for scripts.
    #[arg(long)]
    json: bool,
}

/// Runs a `skill` subcommand; returns the exit code.
pub fn run(cmd: SkillCommand) -> anyhow::Result<u8> {
    match cmd {
        SkillCommand::List(a) => list(a),
        SkillCommand::Info(a) => info(a),
        SkillCommand::Validate(a) => validate(a),
        SkillCommand::Pack(a) => super::install::pack(a),
        SkillCommand::Install(a) => super::install::install(a),
        SkillCommand::Verify(a) => super::install::verify(a),
        SkillCommand::Remove(a) => super::install::remove(a),
        SkillCommand::Deps(a) => super::deps::deps(a),
        SkillCommand::Add(a) => super::sources::add(a),
        SkillCommand::Outdated(a) => super::sources::outdated(a),
        SkillCommand::Update(a) => super::sources::update(a),
        SkillCommand::Import(a) => super::import::import(a),
        SkillCommand::Find(a) => super::find::find(a),
    }
}

fn summary(s: &Skill) -> serde_json::Value {
    json!({
        "name": s.name,
        "version": s.version,
        "description": s.description,
        "dir": s.dir,
        "formats": s.formats,
        "tools": s.tools.iter().map(|t| ToolRef::new(&s.name, &t.name).to_string()).collect::<Vec<_>>(),
        "triggers": s.routing.triggers,
        "prerequisites": s.prerequisites,
        "permissions": s.permissions,
        "warnings": s.warnings,
    })
}

fn list(a: ListArgs) -> anyhow::Result<u8> {
    let catalog = a.roots.discover()?;
    if a.json {
        let out = json!({
            "skills": catalog.skills.iter().map(summary).collect::<Vec<_>>(),
            "skipped": catalog.skipped.iter().map(|s| json!({
                "dir": s.dir, "reason": s.reason(), "diagnostics": s.diagnostics,
            })).collect::<Vec<_>>(),
            "shadowed": catalog.shadowed,
            "refused": catalog.refused,
            "truncated": catalog.truncated,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    let rows: Vec<Vec<String>> = catalog
        .skills
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                s.version.clone().unwrap_or_else(|| "-".into()),
                s.tools.len().to_string(),
                s.warnings.len().to_string(),
                table::truncate(&s.description, 60),
            ]
        })
        .collect();
    print!(
        "{}",
        table::render(
            &["NAME", "VERSION", "TOOLS", "WARNINGS", "DESCRIPTION"],
            &rows
        )
    );
    println!(
        "\n{} skill(s) loaded, {} skipped",
        catalog.skills.len(),
        catalog.skipped.len()
    );
    for s in &catalog.skipped {
        println!("skipped {}: {}", s.dir.display(), s.reason());
    }
    for s in &catalog.shadowed {
        println!(
            "shadowed {}: {} is used instead of {}",
            s.name,
            s.kept.display(),
            s.hidden.display()
        );
    }
    for r in &catalog.refused {
        println!("refused {}: {}", r.dir.display(), r.reason);
    }
    for s in catalog.skills.iter().filter(|s| !s.warnings.is_empty()) {
        for w in &s.warnings {
            println!("{w}");
        }
    }
    if catalog.truncated {
        println!("discovery stopped at --max-folders {}", a.roots.max_folders);
    }
    Ok(0)
}

fn info(a: InfoArgs) -> anyhow::Result<u8> {
    let catalog = a.roots.discover()?;
    let Some(skill) = catalog.get(&a.name) else {
        let names: Vec<_> = catalog.skills.iter().map(|s| s.name.as_str()).collect();
        eprintln!(
            "skillbox: no skill named {:?}; found: {}",
            a.name,
            names.join(", ")
        );
        return Ok(EXIT_FAILED);
    };
    let body = skill
        .read_body()
        .with_context(|| format!("reading the body of {}", skill.name))?;
    let files = skill
        .list_files()
        .with_context(|| format!("listing {}", skill.dir.display()))?;
    if a.json {
        let mut v = serde_json::to_value(skill)?;
        v["body"] = body.into();
        v["files"] = serde_json::to_value(&files)?;
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    println!("name:        {}", skill.name);
    println!("version:     {}", skill.version.as_deref().unwrap_or("-"));
    println!("folder:      {}", skill.dir.display());
    println!("description: {}", skill.description.trim());
    if !skill.routing.triggers.is_empty() {
        println!("triggers:    {}", skill.routing.triggers.join(", "));
    }
    let p = &skill.prerequisites;
    if !(p.bins.is_empty() && p.any_bins.is_empty() && p.env.is_empty() && p.os.is_empty()) {
        println!(
            "requires:    bins [{}] any of [{}] env [{}] os [{}]",
            p.bins.join(", "),
            p.any_bins.join(", "),
            p.env.join(", "),
            p.os.join(", ")
        );
    }
    let perm = &skill.permissions;
    println!(
        "permissions: env [{}] network [{}] workspace.read [{}]",
        perm.env.join(", "),
        perm.network.join(", "),
        perm.workspace.read.join(", ")
    );
    for s in &perm.secrets {
        println!(
            "secret:      {} (a placeholder; the value goes to {} only)",
            s.name,
            s.hosts.join(", ")
        );
    }
    for r in &skill.dependencies.requirements {
        println!("requires:    {} (from {})", r.spec, r.source);
    }
    for (name, range) in (skill.dependencies.node.iter()).flat_map(|n| &n.dependencies) {
        println!("requires:    {name}@{range} (from package.json)");
    }
    for p in &skill.dependencies.problems {
        println!("not taken:   {p}");
    }
    for line in skillbox_protocol::skill::validate::advice(skill) {
        println!("advice:      {line}");
    }
    // Only a workspace's own core judges (an explicit --skills folder has none).
    let ask_core = a.roots.skills.is_empty();
    super::script_uses::print(skill, a.roots.workspace.as_deref(), ask_core);
    let e = &skill.execution;
    println!(
        "limits:      timeout {} ms, memory {} MiB, output {} bytes",
        e.timeout_ms, e.memory_mb, e.max_output_bytes
    );
    for t in &skill.tools {
        println!(
            "tool:        {}:{} ({:?}) {}",
            skill.name, t.name, t.security, t.description
        );
    }
    for w in &skill.warnings {
        println!("{w}");
    }
    println!(
        "files:       {}",
        files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("\n{}", body.trim_end());
    Ok(0)
}

fn validate(a: ValidateArgs) -> anyhow::Result<u8> {
    let catalog = a.roots.discover()?;
    let mut results: Vec<(PathBuf, Option<String>, bool, Vec<Diagnostic>)> = Vec::new();
    let mut advice: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for s in &catalog.skills {
        let mut lines = skillbox_protocol::skill::validate::advice(s);
        lines.extend((s.dependencies.requirements.iter()).map(|r| {
            format!(
                "requires {} (from {}); built on install or by `skillbox skill deps {}`",
                r.spec, r.source, s.name
            )
        }));
        lines.extend(
            (s.dependencies.problems.iter()).map(|p| format!("requirement not taken: {p}")),
        );
        advice.insert(s.dir.clone(), lines);
        let passed = !a.strict || s.warnings.is_empty();
        results.push((
            s.dir.clone(),
            Some(s.name.clone()),
            passed,
            s.warnings.clone(),
        ));
    }
    for s in &catalog.skipped {
        results.push((s.dir.clone(), None, false, s.diagnostics.clone()));
    }
    for r in &catalog.refused {
        results.push((
            r.dir.clone(),
            None,
            false,
            vec![Diagnostic::error(&r.dir, "-", r.reason.clone())],
        ));
    }
    results.sort_by(|x, y| x.0.cmp(&y.0));
    let failed = results.iter().filter(|r| !r.2).count();
    if a.json {
        let out = json!({
            "strict": a.strict,
            "passed": failed == 0,
            "results": results.iter().map(|(dir, name, passed, diags)| json!({
                "dir": dir, "name": name, "passed": passed, "diagnostics": diags,
                "advice": advice.get(dir).cloned().unwrap_or_default(),
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for (dir, name, passed, diags) in &results {
            let label = name.clone().unwrap_or_else(|| dir.display().to_string());
            println!("{} {label}", if *passed { "ok  " } else { "FAIL" });
            for d in diags {
                let shown = a.strict || d.severity == Severity::Error || *passed;
                if shown {
                    println!("     {d}");
                }
            }
            for line in advice.get(dir).into_iter().flatten() {
                println!("     advice: {line}");
            }
        }
        let mode = if a.strict { "strict" } else { "lenient" };
        println!("\n{} checked ({mode}), {failed} failed", results.len());
    }
    Ok(if failed == 0 { 0 } else { EXIT_FAILED })
}
