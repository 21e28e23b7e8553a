//! Why a repair was refused or failed: [`RepairError`], with the check that refused it,
//! its `error_kind`, and how the proposal is recorded.

use std::path::PathBuf;

use skillbox_protocol::result::ErrorKind;

use super::{ApplyError, RepairOutcome};
use crate::random::RandomError;
use crate::state::store::StoreError;

/// Why a repair was refused or failed. Each variant names its check ([`RepairError::check`]).
#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    /// The proposal is malformed.
    #[error("invalid proposal: {reason}")]
    Proposal {
        /// What is wrong.
        reason: String,
    },
    /// No such skill is loaded.
    #[error("no skill named {name:?} is loaded; list them with GET /v1/skills")]
    UnknownSkill {
        /// The name asked for.
        name: String,
    },
    /// Not "near success" (routing spec §11.3): take the fallback instead.
    #[error("not eligible for repair: {reason}; take the fallback path instead")]
    Ineligible {
        /// Which condition failed.
        reason: String,
    },
    /// The skill is signed (or otherwise not `local`).
    #[error("skill {name} is signed; only local, unsigned skills are repaired: ask its publisher for a fixed release")]
    Signed {
        /// The skill.
        name: String,
    },
    /// A path is outside what a repair may touch.
    #[error("{path}: {reason}; a repair may change only SKILL.md, scripts/** and references/** of the skill")]
    OutOfScope {
        /// The path as proposed.
        path: String,
        /// Why.
        reason: String,
    },
    /// The patch changes the frontmatter of `SKILL.md`.
    #[error("the patch changes the frontmatter of SKILL.md (tools, permissions, prerequisites); a repair may change its body only")]
    Manifest,
    /// The run used its repair attempts.
    #[error("run {run_id} already made {used} repair attempts on this skill (budget {max}); take the fallback path")]
    Attempts {
        /// The run.
        run_id: String,
        /// Attempts made.
        used: u32,
        /// The budget.
        max: u32,
    },
    /// Too many files, hunks or added words.
    #[error(
        "the patch has {count} {what}, over the budget of {max} per attempt; make a smaller repair"
    )]
    Budget {
        /// `files`, `hunks` or `added doc words`.
        what: &'static str,
        /// What the patch has.
        count: usize,
        /// The budget.
        max: usize,
    },
    /// A diff does not apply, or a file is too large.
    #[error("{path}: {reason}")]
    Patch {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// Reading a file before the change failed (nothing was written).
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Writing failed; the originals were restored (unless the error says otherwise).
    #[error("the repair was not applied: {0}")]
    Apply(#[from] ApplyError),
    /// Reading or locking the install lock failed (nothing was written).
    #[error("the install lock of the skills root: {reason}; retry once other installs are done")]
    Lock {
        /// Why.
        reason: String,
    },
    /// Recording the new digest in the install lock failed; the originals were restored.
    #[error("the repair was undone: updating the install lock failed: {reason}")]
    Relock {
        /// Why.
        reason: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No record id could be drawn (nothing was judged or written).
    #[error(transparent)]
    Random(#[from] RandomError),
}

impl RepairError {
    /// The check that refused it (`proposal`, `eligibility`, `trust`, `scope`, `budget`,
    /// `patch`, `apply`, `store`).
    pub fn check(&self) -> &'static str {
        match self {
            Self::Proposal { .. } | Self::UnknownSkill { .. } => "proposal",
            Self::Ineligible { .. } => "eligibility",
            Self::Signed { .. } => "trust",
            Self::OutOfScope { .. } | Self::Manifest => "scope",
            Self::Attempts { .. } | Self::Budget { .. } => "budget",
            Self::Patch { .. } => "patch",
            Self::Read { .. } | Self::Apply(_) | Self::Lock { .. } | Self::Relock { .. } => "apply",
            Self::Store(_) | Self::Random(_) => "store",
        }
    }

    /// The contract `error_kind`.
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            Self::Proposal { .. } | Self::Ineligible { .. } | Self::Patch { .. } => {
                ErrorKind::InvalidArgs
            }
            Self::UnknownSkill { .. } => ErrorKind::NotFound,
            Self::Signed { .. } | Self::OutOfScope { .. } | Self::Manifest => {
                ErrorKind::PermissionDenied
            }
            Self::Attempts { .. } | Self::Budget { .. } => ErrorKind::ResourceLimit,
            Self::Read { .. }
            | Self::Apply(_)
            | Self::Lock { .. }
            | Self::Relock { .. }
            | Self::Store(_)
            | Self::Random(_) => ErrorKind::Unavailable,
        }
    }

    /// How the proposal is recorded: judged and refused, written and rolled back, or not
    /// at all (malformed, or the state could not be read).
    pub(super) fn outcome(&self) -> Option<RepairOutcome> {
        match self {
            Self::Ineligible { .. }
            | Self::Signed { .. }
            | Self::OutOfScope { .. }
            | Self::Manifest
            | Self::Attempts { .. }
            | Self::Budget { .. }
            | Self::Patch { .. } => Some(RepairOutcome::Refused),
            Self::Apply(_) | Self::Relock { .. } => Some(RepairOutcome::RolledBack),
            Self::Proposal { .. }
            | Self::UnknownSkill { .. }
            | Self::Read { .. }
            | Self::Lock { .. }
            | Self::Store(_)
            | Self::Random(_) => None,
        }
    }
}
