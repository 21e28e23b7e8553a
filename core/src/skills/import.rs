//! Importing the skills another agent keeps in its own folder (`skillbox skill import`):
//! Claude Code `~/.claude/skills`, Codex `~/.codex/skills`, OpenClaw `~/.openclaw/skills`
//! and the shared `~/.agents/skills`.
//!
//! Candidates: every folder directly in the agent folder that holds a `SKILL.md`, and one
//! level of groups: a folder without `SKILL.md` but with a `skills/` folder (a clone of a
//! collection such as `anthropics/skills`, or a Claude Code plugin, which keeps its skills
//! in `<plugin>/skills/<name>/SKILL.md`) offers each `skills/<name>` in it. Hidden folders
//! (Codex's bundled `.system`) and loose files are not looked at; any other folder is
//! reported as not a skill.
//!
//! Two modes:
//! - [`ImportMode::Copy`] (the default) sends each candidate through the verified
//!   install ([`install::install`]): names, links, sizes and special files are checked, the
//!   install lock is written, and the skill is `local` unless signed (`[trust]
//!   require_signed = true` skips unsigned ones). A candidate whose name is installed with
//!   the same digest is skipped, not reinstalled.
//! - [`ImportMode::Link`] leaves the skills where they are and makes the agent folder a
//!   skills root of the workspace: its absolute path is appended to `[skills] roots` in
//!   `skillbox.toml` ([`roots::add_root`], comments kept), after the install root. A
//!   symlink in `<workspace>/skills` would not do: discovery refuses a link that leaves
//!   its root, and so does every install check. Linked skills are not in the install lock,
//!   so they run as `local` only while `require_signed` is off; under `require_signed` the
//!   link is refused. Only the top-level folders of the agent folder are found this way:
//!   a link there that points elsewhere is skipped (discovery refuses it too).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;
use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::skill::digest::digest_hex;
use skillbox_protocol::skill::{
    discover, load_skill, package_digest, DiscoveryOptions, InstallLock, LoadOutcome, Skill,
};

use crate::skills::install::{self, InstallError, Limits, PublisherChange, TrustPolicy};
use crate::skills::roots::{self, AddRootError};
use crate::skills::sources::InstallPolicy;
use crate::state::Workspace;

mod report;

pub use self::report::{Candidate, ImportReport, Outcome, SkipReason};

/// The manifest a candidate must hold.
pub const SKILL_MD: &str = "SKILL.md";

/// An agent whose skills folder can be imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Agent {
    /// Claude Code: `~/.claude/skills`.
    Claude,
    /// Codex: `~/.codex/skills`.
    Codex,
    /// OpenClaw: `~/.openclaw/skills`.
    Openclaw,
    /// The shared agent skills folder: `~/.agents/skills`.
    Agents,
}

impl Agent {
    /// Every agent, in the order the docs list them.
    pub const ALL: [Agent; 4] = [Agent::Claude, Agent::Codex, Agent::Openclaw, Agent::Agents];

    /// The agent's name as `--from` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Openclaw => "openclaw",
            Agent::Agents => "agents",
        }
    }

    /// The agent's skills folder under the home folder `home`.
    pub fn folder(self, home: &Path) -> PathBuf {
        let dot = match self {
            Agent::Claude => ".claude",
            Agent::Codex => ".codex",
            Agent::Openclaw => ".openclaw",
            Agent::Agents => ".agents",
        };
        home.join(dot).join("skills")
    }
}

/// How the candidates reach the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImportMode {
    /// A verified copy in the workspace's skills root.
    Copy,
    /// The agent folder becomes a skills root of the workspace (`[skills] roots`).
    Link,
}

/// Why a whole import was refused. Nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The agent folder is missing or not a folder.
    #[error("agent folder {}: {reason}; check that the agent keeps its skills there, or pass --home DIR", path.display())]
    AgentFolder {
        /// The folder.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A folder of the agent folder could not be listed.
    #[error("listing {}: {source}; check its permissions", path.display())]
    List {
        /// The folder.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// `--link` under `[trust] require_signed = true`.
    #[error("link_unsigned: [trust] require_signed = true withholds every skill not installed by skillbox, so linked skills would never run; import without --link to install the signed ones")]
    LinkUnderRequireSigned,
    /// The workspace's `skillbox.toml` could not take the new root.
    #[error(transparent)]
    AddRoot(#[from] AddRootError),
}

/// Imports the skills of `agent_folder` into `workspace` under `policy` (its roots are the
/// workspace's `[skills] roots`) at `now`. `home` resolves `~` in the configured roots
/// when `--link` edits them.
pub fn import(
    agent_folder: &Path,
    workspace: &Workspace,
    policy: &TrustPolicy,
    mode: ImportMode,
    home: Option<&Path>,
    install_policy: &InstallPolicy,
    now: SystemTime,
) -> Result<ImportReport, ImportError> {
    let meta = std::fs::metadata(agent_folder).map_err(|e| ImportError::AgentFolder {
        path: agent_folder.to_path_buf(),
        reason: match e.kind() {
            std::io::ErrorKind::NotFound => "does not exist".into(),
            _ => e.to_string(),
        },
    })?;
    if !meta.is_dir() {
        return Err(ImportError::AgentFolder {
            path: agent_folder.to_path_buf(),
            reason: "not a folder".into(),
        });
    }
    if mode == ImportMode::Link && policy.require_signed {
        return Err(ImportError::LinkUnderRequireSigned);
    }
    let found = candidates(agent_folder)?;
    let mut report = ImportReport {
        agent_folder: agent_folder.to_path_buf(),
        mode,
        root: None,
        candidates: Vec::with_capacity(found.len()),
    };
    match mode {
        ImportMode::Copy => {
            for folder in found {
                let one = match policy_skip(install_policy, &folder, policy, now) {
                    Some((name, reason)) => skipped(folder, name, reason),
                    None => copy_one(folder, policy, now, &report.candidates),
                };
                report.candidates.push(one);
            }
        }
        ImportMode::Link => {
            let catalog = discover(&policy.roots, DiscoveryOptions::default());
            let real_agent = agent_folder
                .canonicalize()
                .unwrap_or_else(|_| agent_folder.to_path_buf());
            for folder in found {
                let one = match policy_skip(install_policy, &folder, policy, now) {
                    Some((name, reason)) => skipped(folder, name, reason),
                    None => link_one(folder, &real_agent, &catalog.skills, &report.candidates),
                };
                report.candidates.push(one);
            }
            if report.imported().next().is_some() {
                report.root = Some(roots::add_root(workspace, home, &real_agent)?);
            }
        }
    }
    Ok(report)
}

/// The candidate folders of `agent_folder`, sorted, groups expanded one level.
pub fn candidates(agent_folder: &Path) -> Result<Vec<PathBuf>, ImportError> {
    let mut out = Vec::new();
    for child in subfolders(agent_folder)? {
        if child.join(SKILL_MD).is_file() {
            out.push(child);
            continue;
        }
        let group = child.join("skills");
        let members = if group.is_dir() {
            subfolders(&group)?
                .into_iter()
                .filter(|m| m.join(SKILL_MD).is_file())
                .collect()
        } else {
            Vec::new()
        };
        if members.is_empty() {
            // Reported as not a skill.
            out.push(child);
        } else {
            out.extend(members);
        }
    }
    Ok(out)
}

/// The folders (or links to folders) directly in `dir` whose names do not start with a
/// dot, sorted.
fn subfolders(dir: &Path) -> Result<Vec<PathBuf>, ImportError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ImportError::List {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    Ok(out)
}

/// The candidate's name, or why it is left out.
fn load_name(folder: &Path) -> Result<String, SkipReason> {
    if !folder.join(SKILL_MD).is_file() {
        return Err(SkipReason::NotASkill);
    }
    match load_skill(folder) {
        LoadOutcome::Loaded(skill) => Ok(skill.name),
        LoadOutcome::Skipped(s) => Err(SkipReason::DoesNotLoad { detail: s.reason() }),
        LoadOutcome::NotASkill => Err(SkipReason::NotASkill),
    }
}

fn skipped(folder: PathBuf, name: Option<String>, reason: SkipReason) -> Candidate {
    Candidate {
        folder,
        name,
        outcome: Outcome::Skipped { reason },
    }
}

/// Copy mode: one candidate through the verified install.
fn copy_one(
    folder: PathBuf,
    policy: &TrustPolicy,
    now: SystemTime,
    earlier: &[Candidate],
) -> Candidate {
    let name = match load_name(&folder) {
        Ok(name) => name,
        Err(reason) => return skipped(folder, None, reason),
    };
    if let Some(reason) = taken_by(&name, earlier) {
        return skipped(folder, Some(name), reason);
    }
    if let Some(digest) = installed_digest(&policy.skills_root, &name) {
        let same = package_digest(&folder).is_ok_and(|d| d.hex == digest_hex(&digest));
        if same {
            return skipped(folder, Some(name), SkipReason::AlreadyInstalled { digest });
        }
    }
    match install::install(
        &folder,
        policy,
        Limits::default(),
        now,
        PublisherChange::Refuse,
    ) {
        Ok(done) => Candidate {
            folder,
            name: Some(done.name),
            outcome: Outcome::Imported {
                dir: done.dir,
                trust: done.entry.trust.label().to_string(),
            },
        },
        Err(e) => {
            let outcome = refusal(e);
            Candidate {
                folder,
                name: Some(name),
                outcome,
            }
        }
    }
}

/// The digest the install lock records for `name`, if it is installed.
fn installed_digest(skills_root: &Path, name: &str) -> Option<String> {
    let lock = InstallLock::read(skills_root).ok()??;
    lock.get(name).map(|e| e.digest.clone())
}

/// An install refusal as an outcome: the package's fault is a skip, anything else (the
/// lock, the disk, the trust store) a failure.
fn refusal(e: InstallError) -> Outcome {
    let reason = match &e {
        InstallError::Unsigned { .. } => SkipReason::Unsigned,
        InstallError::Unmanaged { path } => SkipReason::NameTaken { path: path.clone() },
        _ if e.error_kind() == ErrorKind::Unavailable => {
            return Outcome::Failed {
                check: e.check().to_string(),
                error: e.to_string(),
            }
        }
        _ => SkipReason::Refused {
            check: e.check().to_string(),
            detail: e.to_string(),
        },
    };
    Outcome::Skipped { reason }
}

/// Link mode: whether discovery will find this candidate once the agent folder is a root.
fn link_one(
    folder: PathBuf,
    real_agent: &Path,
    found: &[Skill],
    earlier: &[Candidate],
) -> Candidate {
    // Discovery enters only the top-level folders of a root, and refuses links out of it.
    let real = folder.canonicalize().unwrap_or_else(|_| folder.clone());
    if !real.starts_with(real_agent) {
        return skipped(folder, None, SkipReason::LinkLeavesFolder { target: real });
    }
    let name = match load_name(&folder) {
        Ok(name) => name,
        Err(reason) => return skipped(folder, None, reason),
    };
    if let Some(reason) = taken_by(&name, earlier) {
        return skipped(folder, Some(name), reason);
    }
    if let Some(skill) = found.iter().find(|s| s.name == name) {
        let reason = if skill.dir.canonicalize().is_ok_and(|d| d == real) {
            SkipReason::AlreadyLinked
        } else {
            SkipReason::Shadowed {
                by: skill.dir.clone(),
            }
        };
        return skipped(folder, Some(name), reason);
    }
    Candidate {
        folder,
        name: Some(name),
        outcome: Outcome::Imported {
            dir: real,
            trust: "local".into(),
        },
    }
}

/// Why `[skills.install_policy]` leaves this candidate out, if it does: its folder is
/// the source the policy's `sources` judge, its manifest what `max_permissions`,
/// `signed_only` and `publishers` judge.
fn policy_skip(
    install_policy: &InstallPolicy,
    folder: &Path,
    policy: &TrustPolicy,
    now: SystemTime,
) -> Option<(Option<String>, SkipReason)> {
    let LoadOutcome::Loaded(skill) = load_skill(folder) else {
        return None;
    };
    let text = folder.display().to_string();
    let verdict = install_policy
        .check_source(&text, &text)
        .and_then(|()| install_policy.check_skill(&skill, folder, &policy.trust_dir, now));
    verdict.err().map(|refusal| {
        (
            Some(skill.name.clone()),
            SkipReason::Policy {
                detail: refusal.to_string(),
            },
        )
    })
}

/// The folder of an earlier candidate of this import that took `name`.
fn taken_by(name: &str, earlier: &[Candidate]) -> Option<SkipReason> {
    earlier
        .iter()
        .find(|c| c.name.as_deref() == Some(name) && matches!(c.outcome, Outcome::Imported { .. }))
        .map(|c| SkipReason::Duplicate {
            first: c.folder.clone(),
        })
}
