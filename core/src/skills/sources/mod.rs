//! Skills from where people publish them (docs/cli-verbs.md, "getting skills"): `skill add`
//! fetches a git source and installs the skills it holds through the verified install,
//! recording the source, ref, commit, folder and the folder's git tree id in the lock;
//! `skill outdated` asks each source where its ref points now and whether the skill's
//! folder changed there; `skill update` fetches again and shows what the update changes
//! before it is applied (a folder whose tree did not change has only its commit recorded).
//!
//! - [`spec`]: what a SOURCE names.
//! - [`git`]: the `git` program, run so that nothing in a repository can act.
//! - [`tree`]: a fetched tree's skill folders, its checks, and writing a folder out.
//! - [`policy`]: the operator's install policy (`[skills.install_policy]`).
//! - [`diff`]: what an update changes and whether it widens permissions.
//! - [`ops`]: what the operations share ([`Sources`], one commit fetched, one folder staged);
//!   `add.rs`: add; `update.rs`: outdated and update.

mod add;
pub mod diff;
pub mod git;
pub mod ops;
pub mod policy;
pub mod spec;
pub mod tree;
mod update;

use std::path::PathBuf;

use skillbox_protocol::result::ErrorKind;

pub use add::{AddOutcome, AddRequest};
pub use ops::Sources;
pub use policy::{InstallPolicy, PolicyRefusal};
pub use spec::Source;
pub use update::{OutdatedEntry, PreparedUpdate, UpdateCheck};

use super::install::InstallError;

/// Why a source could not be fetched or its skills installed. Nothing is left behind.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// SOURCE names nothing skillbox can fetch.
    #[error("source {source_text:?}: {reason}")]
    Spec {
        /// The source as given.
        source_text: String,
        /// What is wrong.
        reason: String,
    },
    /// The URL's transport is not allowed.
    #[error("source {url}: {reason}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The ref is not a ref name.
    #[error("ref {reference:?} is not a branch, tag or commit name (letters, digits, / . _ -)")]
    Ref {
        /// The ref.
        reference: String,
    },
    /// An abbreviated commit names no commit of the source's branches and tags.
    #[error("ref {reference:?} is neither a branch or tag of {url} nor the start of a commit id on one of them; give a branch, a tag or the full 40-hex commit id")]
    CommitNotFound {
        /// The abbreviated commit.
        reference: String,
        /// The source.
        url: String,
    },
    /// An abbreviated commit starts several commits.
    #[error("ref {reference:?} starts several commits ({}); give more digits or the full 40-hex commit id", commits.join(", "))]
    CommitAmbiguous {
        /// The abbreviated commit.
        reference: String,
        /// Commits it starts (the first few).
        commits: Vec<String>,
    },
    /// No `git` on PATH.
    #[error("the git program is not on PATH; install git (apt-get install git) to add skills from git sources")]
    NoGit,
    /// git failed.
    #[error("git {step}: {message}")]
    Git {
        /// The git step.
        step: &'static str,
        /// Its last words.
        message: String,
    },
    /// A fetch ran past its time.
    #[error("the fetch ran over {secs} s and was stopped; raise [skills.fetch] timeout_secs for a slow host")]
    Timeout {
        /// The limit.
        secs: u64,
    },
    /// A limit was passed.
    #[error("{what}; raise {limit} if this source is trusted to be this large")]
    TooLarge {
        /// What was too large.
        what: String,
        /// The config key.
        limit: &'static str,
    },
    /// The skill's folder holds a submodule.
    #[error("{path} is a git submodule; submodules are never fetched, so the skill would be incomplete: ask its publisher to vendor the files")]
    Submodule {
        /// The submodule's path.
        path: String,
    },
    /// A link leaves the repository.
    #[error("{path} is a link to {target:?}, outside the repository; links may only name files inside it")]
    LinkOut {
        /// The link.
        path: String,
        /// Its target.
        target: String,
    },
    /// A link names no file in the repository (a folder, another link, nothing).
    #[error("{path} is a link to {target:?}, which is not a file in the repository")]
    LinkTarget {
        /// The link.
        path: String,
        /// Its target.
        target: String,
    },
    /// A file could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The source holds no skill.
    #[error("{source_text} holds no skill (no folder with a SKILL.md{})", folder.as_deref().map(|f| format!(" under {f}")).unwrap_or_default())]
    NoSkills {
        /// The source.
        source_text: String,
        /// The folder looked in.
        folder: Option<String>,
    },
    /// Several skills and none chosen.
    #[error("{source_text} holds {} skills: {}; choose with --skill NAME (repeat it) or --all (\"skills\": [...] over HTTP)", found.len(), found.join(", "))]
    Choose {
        /// The source.
        source_text: String,
        /// The skills found (folder paths).
        found: Vec<String>,
    },
    /// A chosen skill is not in the source.
    #[error("{source_text} has no skill {name}; it holds: {}", found.join(", "))]
    UnknownSkill {
        /// The source.
        source_text: String,
        /// The name asked for.
        name: String,
        /// The skills found.
        found: Vec<String>,
    },
    /// A fetched skill folder does not load.
    #[error("{folder}: {reason}")]
    Load {
        /// The folder in the repository.
        folder: String,
        /// Why.
        reason: String,
    },
    /// The install policy refused.
    #[error(transparent)]
    Policy(#[from] PolicyRefusal),
    /// The verified install refused.
    #[error(transparent)]
    Install(#[from] InstallError),
    /// The skill is not installed.
    #[error("{name} is not installed (see `skillbox skill list`)")]
    NotInstalled {
        /// The skill.
        name: String,
    },
    /// The skill was not added from a git source.
    #[error("{name} was not added from a git source, so there is nothing to update it from; add it with `skillbox skill add SOURCE`")]
    NotFromGit {
        /// The skill.
        name: String,
    },
    /// The skill's folder is gone from its source, or holds another skill now.
    #[error("{name}: {reason}")]
    Moved {
        /// The skill.
        name: String,
        /// What happened.
        reason: String,
    },
    /// A collection index could not be used.
    #[error("index {location}: {reason}")]
    Index {
        /// The index.
        location: String,
        /// Why.
        reason: String,
    },
}

impl SourceError {
    /// The name of the check that refused, as installs name theirs.
    pub fn check(&self) -> &'static str {
        match self {
            SourceError::Spec { .. }
            | SourceError::Url { .. }
            | SourceError::Ref { .. }
            | SourceError::CommitNotFound { .. }
            | SourceError::CommitAmbiguous { .. } => "source",
            SourceError::NoGit | SourceError::Git { .. } | SourceError::Timeout { .. } => "fetch",
            SourceError::TooLarge { .. } => "size",
            SourceError::Submodule { .. } => "submodule",
            SourceError::LinkOut { .. } | SourceError::LinkTarget { .. } => "link",
            SourceError::Io { .. } => "io",
            SourceError::NoSkills { .. }
            | SourceError::Choose { .. }
            | SourceError::UnknownSkill { .. } => "choose",
            SourceError::Load { .. } => "manifest",
            SourceError::Policy(_) => "install_policy",
            SourceError::Install(e) => e.check(),
            SourceError::NotInstalled { .. } | SourceError::NotFromGit { .. } => "not_found",
            SourceError::Moved { .. } => "moved",
            SourceError::Index { .. } => "index",
        }
    }

    /// The contract `error_kind` of the refusal.
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            SourceError::Install(e) => e.error_kind(),
            SourceError::Policy(_)
            | SourceError::Submodule { .. }
            | SourceError::LinkOut { .. }
            | SourceError::LinkTarget { .. }
            | SourceError::TooLarge { .. } => ErrorKind::PermissionDenied,
            SourceError::NotInstalled { .. } | SourceError::NotFromGit { .. } => {
                ErrorKind::NotFound
            }
            SourceError::NoGit
            | SourceError::Git { .. }
            | SourceError::Timeout { .. }
            | SourceError::Io { .. } => ErrorKind::Unavailable,
            _ => ErrorKind::InvalidArgs,
        }
    }
}
