//! The self-repair framework of the routing spec (§11–13). The patch itself comes from
//! outside (an agent) through `POST /v1/skills/{name}/repairs`; skillbox decides whether
//! it may be applied and applies it, all or nothing, recording every proposal.
//!
//! A proposal passes, in order:
//! 1. eligibility (§11.3): the run made progress (`task_progress` ≥ `[repair]
//!    min_task_progress`), the failure has one identified root cause (`root_cause_count`
//!    between 1 and `max_root_causes`), and the change stays inside the skill (step 3);
//! 2. trust: only a `local` (unsigned) skill is repaired, never a signed one;
//! 3. scope (§12, [`scope`]): only `SKILL.md` (not its frontmatter, which declares tools
//!    and permissions), `scripts/**` and `references/**`, by relative paths through no
//!    symbolic link;
//! 4. budget (§13, [`RepairBudget`]): attempts per run, files and hunks per attempt, and
//!    words added to the documentation (`SKILL.md`, `references/**`);
//! 5. the patch applies ([`patch`]: unified diffs, strictly, or whole new contents).
//!
//! It is then written by temporary file and rename ([`apply`]); any failure restores the
//! originals. An installed local skill gets its new digest in the install lock, so the
//! next reload does not disable it as changed. Each proposal leaves a [`RepairRecord`] in
//! the store: `applied`, `rolled_back` or `refused` with the check and the reason.

pub mod apply;
mod error;
pub mod patch;
pub mod scope;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use skillbox_protocol::skill::{package_digest, Catalog, Trust, SIGNATURE_FILE};

use crate::random::{self, RandomError, RandomSource, SystemSource};
use crate::skills::install::lock;
use crate::state::store::{unix_ms_now, Store};

pub use crate::state::config::repair::RepairConfig;
pub use crate::state::store::{RepairOutcome, RepairRecord};
pub use apply::{ApplyError, Change};
pub use error::RepairError;
pub use patch::PatchError;
pub use scope::Area;

impl RepairConfig {
    /// The budget part.
    pub fn budget(&self) -> RepairBudget {
        RepairBudget {
            attempts_per_run: self.attempts_per_run,
            files_per_attempt: self.files_per_attempt,
            hunks_per_attempt: self.hunks_per_attempt,
            added_doc_tokens: self.added_doc_tokens,
        }
    }
}

/// How much repairing one run may do (routing spec §13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RepairBudget {
    /// Attempts per run and skill.
    pub attempts_per_run: u32,
    /// Files per attempt.
    pub files_per_attempt: usize,
    /// Hunks per attempt.
    pub hunks_per_attempt: usize,
    /// Words added to the documentation per attempt.
    pub added_doc_tokens: usize,
}

impl Default for RepairBudget {
    fn default() -> Self {
        Self {
            attempts_per_run: 2,
            files_per_attempt: 3,
            hunks_per_attempt: 8,
            added_doc_tokens: 300,
        }
    }
}

/// One file of a proposal: a unified diff against it or its whole new content.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileChange {
    /// Relative to the skill folder.
    pub path: String,
    /// A unified diff (`@@ -l,s +l,s @@` hunks).
    #[serde(default)]
    pub diff: Option<String>,
    /// The whole new content.
    #[serde(default)]
    pub content: Option<String>,
}

/// The body of `POST /v1/skills/{name}/repairs`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepairProposal {
    /// The run being repaired (the `route_id` of the execution).
    pub run_id: String,
    /// The failure, as a stable signature (`error_kind` + message pattern).
    pub error_signature: String,
    /// Its root cause.
    pub root_cause: String,
    /// What the patch should change in the next run.
    pub expected_effect: String,
    /// Share of the task the failed run completed (0–1).
    pub task_progress: f64,
    /// Root causes identified.
    pub root_cause_count: u32,
    /// The files to change.
    pub patch: Vec<FileChange>,
}

/// What a repair works on.
#[derive(Debug, Clone, Copy)]
pub struct RepairTarget<'a> {
    /// The skills root (install lock, flock).
    pub skills_root: &'a Path,
    /// The loaded skills.
    pub catalog: &'a Catalog,
    /// Where records go.
    pub store: &'a Store,
    /// `[repair]`.
    pub config: &'a RepairConfig,
}

/// One repair at a time in this process (the flock on the skills root covers others).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Judges `proposal` for skill `name` and applies it when it passes. Blocking (files,
/// SQLite). Every judged proposal is recorded, refusals too.
pub fn propose(
    target: &RepairTarget<'_>,
    name: &str,
    proposal: &RepairProposal,
) -> Result<RepairRecord, RepairError> {
    check_shape(proposal)?;
    let skill = target
        .catalog
        .get(name)
        .ok_or_else(|| RepairError::UnknownSkill {
            name: name.to_string(),
        })?;
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let _root = lock::lock_root(target.skills_root).map_err(|e| RepairError::Lock {
        reason: e.to_string(),
    })?;
    let mut record = RepairRecord {
        id: record_id(&SystemSource::default())?,
        skill: skill.name.clone(),
        run_id: proposal.run_id.clone(),
        attempt: 0,
        error_signature: proposal.error_signature.clone(),
        root_cause: proposal.root_cause.clone(),
        patched_files: proposal.patch.iter().map(|c| c.path.clone()).collect(),
        expected_effect: proposal.expected_effect.clone(),
        outcome: RepairOutcome::Refused,
        check: None,
        reason: None,
        at: unix_ms_now(),
    };
    let result = judge_and_apply(target, &skill.name, &skill.dir, proposal, &mut record);
    match result {
        Ok(()) => Ok(record),
        Err(e) => {
            if let Some(outcome) = e.outcome() {
                record.outcome = outcome;
                record.check = Some(e.check().to_string());
                record.reason = Some(e.to_string());
                if outcome == RepairOutcome::RolledBack {
                    record.attempt = target
                        .store
                        .repair_attempts(&skill.name, &proposal.run_id)
                        .unwrap_or(0)
                        + 1;
                }
                if let Err(se) = target.store.record_repair(&record) {
                    tracing::warn!(error = %se, "could not record a repair that was not applied");
                }
            }
            tracing::info!(skill = %record.skill, run_id = %record.run_id, check = e.check(), reason = %e, "repair not applied");
            Err(e)
        }
    }
}

/// The run a proposal names must be one this core executed, and it must have run `name`:
/// a made-up run id would otherwise get a fresh attempts budget.
fn check_run(target: &RepairTarget<'_>, name: &str, run_id: &str) -> Result<(), RepairError> {
    let refused = |reason: String| Err(RepairError::Proposal { reason });
    if target.store.get_route(run_id)?.is_none() {
        return refused(format!(
            "run_id {run_id:?} is not a run of this core: give the route_id of the failed run \
             (POST /v1/route/execute answers it)"
        ));
    }
    let events = target.store.route_events(run_id)?;
    if events.is_empty() {
        return refused(format!(
            "run {run_id:?} was only planned, never executed: repairs answer a failed run"
        ));
    }
    if !events.iter().any(|e| e.skill.as_deref() == Some(name)) {
        return refused(format!("run {run_id:?} did not run skill {name:?}"));
    }
    Ok(())
}

fn check_shape(p: &RepairProposal) -> Result<(), RepairError> {
    let bad = |reason: &str| {
        Err(RepairError::Proposal {
            reason: reason.to_string(),
        })
    };
    if p.run_id.trim().is_empty() {
        return bad("run_id is empty: give the route_id of the failed run");
    }
    if p.error_signature.trim().is_empty() || p.root_cause.trim().is_empty() {
        return bad("error_signature and root_cause are required");
    }
    if p.patch.is_empty() {
        return bad("the patch names no file");
    }
    if !(0.0..=1.0).contains(&p.task_progress) {
        return bad("task_progress must be between 0 and 1");
    }
    for (i, c) in p.patch.iter().enumerate() {
        if c.diff.is_some() == c.content.is_some() {
            return bad(&format!("{}: give exactly one of diff and content", c.path));
        }
        if p.patch.iter().skip(i + 1).any(|o| o.path == c.path) {
            return bad(&format!("{}: named twice", c.path));
        }
    }
    Ok(())
}

/// Refuses a proposal that is not "near success" (routing spec §11.3).
pub fn check_eligibility(config: &RepairConfig, p: &RepairProposal) -> Result<(), RepairError> {
    let reason = if p.task_progress < config.min_task_progress {
        format!(
            "task_progress {} is under {} (too far from success)",
            p.task_progress, config.min_task_progress
        )
    } else if p.root_cause_count == 0 {
        "no root cause was identified".to_string()
    } else if p.root_cause_count > config.max_root_causes {
        format!(
            "{} root causes, more than {}",
            p.root_cause_count, config.max_root_causes
        )
    } else {
        return Ok(());
    };
    Err(RepairError::Ineligible { reason })
}

fn judge_and_apply(
    target: &RepairTarget<'_>,
    name: &str,
    dir: &Path,
    proposal: &RepairProposal,
    record: &mut RepairRecord,
) -> Result<(), RepairError> {
    let config = target.config;
    let budget = config.budget();
    check_eligibility(config, proposal)?;
    // Trust: signed in the lock, or carrying a signature, is not ours to change.
    let locked = lock::read(target.skills_root).map_err(|e| RepairError::Lock {
        reason: e.to_string(),
    })?;
    let entry = locked.get(name).cloned();
    if entry.as_ref().is_some_and(|e| e.trust != Trust::Local)
        || std::fs::symlink_metadata(dir.join(SIGNATURE_FILE)).is_ok()
    {
        return Err(RepairError::Signed {
            name: name.to_string(),
        });
    }
    if std::fs::symlink_metadata(dir).map_or(true, |m| !m.is_dir()) {
        return Err(RepairError::OutOfScope {
            path: dir.display().to_string(),
            reason: "the skill folder is not a plain folder".into(),
        });
    }
    check_run(target, name, &proposal.run_id)?;
    let used = target.store.repair_attempts(name, &proposal.run_id)?;
    if used >= budget.attempts_per_run {
        return Err(RepairError::Attempts {
            run_id: proposal.run_id.clone(),
            used,
            max: budget.attempts_per_run,
        });
    }
    let places = proposal
        .patch
        .iter()
        .map(|c| scope::check_path(dir, &c.path))
        .collect::<Result<Vec<_>, _>>()?;
    over("files", proposal.patch.len(), budget.files_per_attempt)?;
    let (mut hunks, mut doc_words, mut changes) = (0, 0, Vec::new());
    for (c, (area, path)) in proposal.patch.iter().zip(places) {
        let (change, h, words) = prepare(c, area, path)?;
        hunks += h;
        doc_words += if area.is_doc() { words } else { 0 };
        changes.push(change);
    }
    over("hunks", hunks, budget.hunks_per_attempt)?;
    over("added doc words", doc_words, budget.added_doc_tokens)?;

    apply::apply(&changes)?;
    let relocked = entry.is_some();
    if let Some(mut entry) = entry {
        let relock = || -> Result<(), String> {
            entry.digest = package_digest(dir).map_err(|e| e.to_string())?.prefixed();
            let mut l = locked.clone();
            l.skills.insert(name.to_string(), entry);
            lock::write(target.skills_root, &l).map_err(|e| e.to_string())
        };
        if let Err(reason) = relock() {
            apply::restore(&changes);
            return Err(RepairError::Relock { reason });
        }
    }
    record.attempt = used + 1;
    record.outcome = RepairOutcome::Applied;
    if let Err(e) = target.store.record_repair(record) {
        // All or nothing: without its record the repair is undone, lock entry included.
        apply::restore(&changes);
        if relocked {
            let _ = lock::write(target.skills_root, &locked);
        }
        return Err(e.into());
    }
    tracing::info!(skill = %name, run_id = %record.run_id, attempt = record.attempt, files = ?record.patched_files, "repair applied");
    Ok(())
}

fn over(what: &'static str, count: usize, max: usize) -> Result<(), RepairError> {
    if count > max {
        return Err(RepairError::Budget { what, count, max });
    }
    Ok(())
}

/// The write for one file, its hunks and the words it adds.
fn prepare(
    c: &FileChange,
    area: Area,
    path: PathBuf,
) -> Result<(Change, usize, usize), RepairError> {
    let patch_err = |reason: String| RepairError::Patch {
        path: c.path.clone(),
        reason,
    };
    let (old, mode) = match std::fs::read(&path) {
        Ok(bytes) => {
            let mode = std::fs::metadata(&path).map_or(0o644, |m| {
                std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777
            });
            (Some(bytes), mode)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, 0o644),
        Err(source) => return Err(RepairError::Read { path, source }),
    };
    let old_text = match &old {
        Some(b) if b.len() > patch::MAX_FILE_BYTES => {
            return Err(patch_err(format!(
                "over {} bytes; repair a smaller file",
                patch::MAX_FILE_BYTES
            )))
        }
        Some(b) => String::from_utf8(b.clone())
            .map_err(|_| patch_err("not UTF-8 text; a repair changes text files only".into()))?,
        None => String::new(),
    };
    let (new, hunks, words) = match (&c.diff, &c.content) {
        (Some(diff), _) => {
            let d = patch::Diff::parse(diff).map_err(|e| patch_err(e.to_string()))?;
            let new = d.apply(&old_text).map_err(|e| patch_err(e.to_string()))?;
            (new, d.hunks(), d.added_words())
        }
        (None, Some(content)) => {
            let (h, w) = patch::measure(&old_text, content)
                .ok_or_else(|| patch_err("too large to compare; send a unified diff".into()))?;
            (content.clone(), h, w)
        }
        (None, None) => return Err(patch_err("no diff and no content".into())),
    };
    if new.len() > patch::MAX_FILE_BYTES {
        return Err(patch_err(format!(
            "the new file is over {} bytes",
            patch::MAX_FILE_BYTES
        )));
    }
    if area == Area::SkillDoc {
        scope::check_frontmatter(&old_text, &new)?;
    }
    let change = Change {
        target: path,
        new: new.into_bytes(),
        old,
        mode,
    };
    Ok((change, hunks, words))
}

fn record_id(source: &dyn RandomSource) -> Result<String, RandomError> {
    random::hex(source, 8, "repair record id").map(|hex| format!("rp_{hex}"))
}

#[cfg(test)]
mod tests;
