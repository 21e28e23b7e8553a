//! What an import came to: each candidate folder, what became of it ([`Outcome`]) and why
//! one was skipped ([`SkipReason`], said to the operator), and the whole report.

use std::path::PathBuf;

use serde::Serialize;

use super::{ImportMode, SKILL_MD};
use crate::skills::roots::RootAdded;

/// One candidate folder and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// The folder in the agent folder.
    pub folder: PathBuf,
    /// The skill's name, when its manifest loaded.
    pub name: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// What became of one candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// Installed (copy) or found through the new root (link).
    Imported {
        /// Where discovery finds it now.
        dir: PathBuf,
        /// `signed` or `local`.
        trust: String,
    },
    /// Left out, as expected for this folder.
    Skipped {
        /// Why.
        #[serde(flatten)]
        reason: SkipReason,
    },
    /// The install failed for a reason that is not the package's (lock, disk, trust
    /// store): the import as a whole failed.
    Failed {
        /// The install check that failed.
        check: String,
        /// The error.
        error: String,
    },
}

/// Why a candidate was left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum SkipReason {
    /// No `SKILL.md` in the folder (nor a `skills/` group of skills).
    NotASkill,
    /// The manifest does not load.
    DoesNotLoad {
        /// What the loader said.
        detail: String,
    },
    /// Installed already with the same digest.
    AlreadyInstalled {
        /// The digest.
        digest: String,
    },
    /// The name is taken by a folder in the skills root that skillbox did not install.
    NameTaken {
        /// That folder.
        path: PathBuf,
    },
    /// Not signed, and `[trust] require_signed = true`.
    Unsigned,
    /// The verified install refused the package.
    Refused {
        /// The install check that refused it.
        check: String,
        /// The refusal.
        detail: String,
    },
    /// `--link`: a skill of that name in a root of higher precedence hides it.
    Shadowed {
        /// The skill that is used instead.
        by: PathBuf,
    },
    /// `--link`: the folder is a symlink out of the agent folder, which discovery refuses.
    LinkLeavesFolder {
        /// Where it points.
        target: PathBuf,
    },
    /// `--link`: the agent folder is a root already and this skill is found there.
    AlreadyLinked,
    /// `[skills.install_policy]` does not let it in.
    Policy {
        /// The policy's refusal.
        detail: String,
    },
    /// An earlier candidate of this import has the same name.
    Duplicate {
        /// That candidate's folder.
        first: PathBuf,
    },
}

impl SkipReason {
    /// The reason as a sentence that says what to do.
    pub fn message(&self) -> String {
        match self {
            SkipReason::NotASkill => format!("not a skill: no {SKILL_MD} in it"),
            SkipReason::DoesNotLoad { detail } => {
                format!("does not load: {detail}; fix it, then import again")
            }
            SkipReason::AlreadyInstalled { digest } => {
                format!("already installed with the same digest {digest}")
            }
            SkipReason::NameTaken { path } => format!(
                "name taken: {} exists but skillbox did not install it; move it out of the skills root to import this one",
                path.display()
            ),
            SkipReason::Unsigned => "unsigned, and [trust] require_signed = true; ask its publisher for a signed package or sign it with `skillbox certs sign`".into(),
            SkipReason::Refused { check, detail } => {
                format!("refused by the install check {check}: {detail}")
            }
            SkipReason::Shadowed { by } => format!(
                "shadowed: {} has the same name in a root of higher precedence",
                by.display()
            ),
            SkipReason::LinkLeavesFolder { target } => format!(
                "a symlink to {}, outside the agent folder, which discovery refuses; import without --link to copy it",
                target.display()
            ),
            SkipReason::AlreadyLinked => "already linked: the agent folder is a skills root".into(),
            SkipReason::Policy { detail } => format!("refused by the {detail}"),
            SkipReason::Duplicate { first } => format!(
                "duplicate: {} of this import has the same name and was taken; rename one of them",
                first.display()
            ),
        }
    }
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportReport {
    /// The agent folder read.
    pub agent_folder: PathBuf,
    /// The mode.
    pub mode: ImportMode,
    /// `--link`: whether `[skills] roots` was changed (`None` when nothing was linked).
    pub root: Option<RootAdded>,
    /// Every candidate, in the order found.
    pub candidates: Vec<Candidate>,
}

impl ImportReport {
    /// The candidates imported.
    pub fn imported(&self) -> impl Iterator<Item = &Candidate> {
        self.candidates
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Imported { .. }))
    }

    /// Whether some candidate failed for a reason that is not the package's.
    pub fn failed(&self) -> bool {
        self.candidates
            .iter()
            .any(|c| matches!(c.outcome, Outcome::Failed { .. }))
    }
}
