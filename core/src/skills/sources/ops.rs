//! What the operations on sources share: [`Sources`] (where skills go, how to fetch, what
//! is allowed), a fetch of one commit and the staging of one of its folders. The
//! operations are one file each: `add.rs` ([`Sources::add`]), `update.rs`
//! ([`Sources::outdated`], [`Sources::prepare_update`] / [`Sources::apply_update`]). Each
//! fetch goes to a private folder under `<state>/fetch`, removed when the operation ends,
//! whatever happens.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use skillbox_protocol::skill::{load_skill, LoadOutcome, Skill, SkillOrigin};

use super::git::{FetchDir, GitRunner};
use super::policy::InstallPolicy;
use super::tree::FetchedTree;
use super::SourceError;
use crate::skills::install::TrustPolicy;
use crate::state::config::Config;
use crate::state::Workspace;

/// Everything the operations need: where skills go, how to fetch, what is allowed.
#[derive(Debug, Clone)]
pub struct Sources {
    /// The install policy of the verified install.
    pub trust: TrustPolicy,
    /// The `git` runner with its transports and limits.
    pub git: GitRunner,
    /// `[skills.install_policy]`.
    pub policy: InstallPolicy,
    /// `[skills.fetch] max_files`.
    pub max_files: usize,
    /// `[skills.fetch] max_file_bytes`.
    pub max_file_bytes: u64,
    /// Where fetches are made (`<state>/fetch`).
    pub fetch_root: PathBuf,
    /// What relative local sources are read from (the workspace).
    pub base: PathBuf,
    /// `[skills] git_host`.
    pub git_host: String,
    /// `[skills] auto_update`.
    pub auto_update: bool,
}

/// A git source resolved: what the operator wrote, the URL, the folder and the ref.
pub(super) struct GitSource {
    pub(super) text: String,
    pub(super) url: String,
    pub(super) subfolder: Option<String>,
    pub(super) reference: Option<String>,
}

/// One fetched commit of a repository.
pub(super) struct Fetched {
    pub(super) dir: FetchDir,
    pub(super) repo: PathBuf,
    pub(super) commit: String,
    pub(super) tree: FetchedTree,
}

impl Sources {
    /// The sources of a workspace under its config.
    pub fn for_workspace(ws: &Workspace, config: &Config, trust: TrustPolicy) -> Self {
        let s = &config.skills;
        Self {
            trust,
            git: GitRunner {
                allow_http: s.fetch.allow_http,
                max_bytes: s.fetch.max_bytes,
                timeout: Duration::from_secs(s.fetch.timeout_secs),
            },
            policy: InstallPolicy {
                rule: s.install_policy.clone(),
                git_host: s.git_host.clone(),
            },
            max_files: s.fetch.max_files,
            max_file_bytes: s.fetch.max_file_bytes,
            fetch_root: ws.state_dir().join("fetch"),
            base: ws.root().to_path_buf(),
            git_host: s.git_host.clone(),
            auto_update: s.auto_update,
        }
    }

    pub(super) fn fetch(&self, url: &str, reference: Option<&str>) -> Result<Fetched, SourceError> {
        self.git.check_url(url)?;
        let dir = FetchDir::create(&self.fetch_root)?;
        let repo = dir.path().join("repo.git");
        self.git.init(&repo)?;
        let commit = self.git.fetch(&repo, url, reference)?;
        let tree = FetchedTree::new(self.git.ls_tree(&repo, &commit)?, self.max_files)?;
        Ok(Fetched {
            dir,
            repo,
            commit,
            tree,
        })
    }

    /// Writes `folder` of a fetch out, loads it and checks it against the policy.
    pub(super) fn stage(
        &self,
        f: &Fetched,
        folder: &str,
        n: usize,
        now: SystemTime,
    ) -> Result<(PathBuf, Skill), SourceError> {
        let base = folder
            .rsplit('/')
            .next()
            .filter(|b| !b.is_empty())
            .unwrap_or("skill");
        let dest = f.dir.path().join(format!("pkg-{n}"));
        std::fs::create_dir(&dest).map_err(|e| SourceError::Io {
            path: dest.clone(),
            source: e,
        })?;
        let dest = dest.join(base);
        f.tree
            .write_folder(&self.git, &f.repo, folder, &dest, self.max_file_bytes)?;
        let skill = load(&dest, folder)?;
        self.policy
            .check_skill(&skill, &dest, &self.trust.trust_dir, now)?;
        Ok((dest, skill))
    }
}

impl Sources {
    /// Whether the skill's folder at the fetched commit is the tree installed, and the
    /// fetched folder's tree id (to record). Tree ids, not commits, are compared: a commit
    /// elsewhere in the repository leaves the folder's tree id as it was.
    pub(super) fn folder_unchanged(
        &self,
        f: &Fetched,
        origin: &SkillOrigin,
    ) -> Result<(bool, Option<String>), SourceError> {
        let new = self
            .git
            .folder_tree(&f.repo, &f.commit, &origin.subfolder)?;
        let old = match &origin.tree {
            Some(t) => Some(t.clone()),
            // A lock written before the tree id was recorded: the installed commit is
            // fetched beside the new one to read its folder's tree. When that fails (a
            // host refusing a fetch by commit id, a commit gone after a force-push), the
            // answer is "changed", the commit comparison of those locks.
            None => self
                .git
                .fetch_commit(&f.repo, &origin.url, &origin.commit)
                .and_then(|()| {
                    self.git
                        .folder_tree(&f.repo, &origin.commit, &origin.subfolder)
                })
                .ok()
                .flatten(),
        };
        Ok((new.is_some() && new == old, new))
    }
}

pub(super) fn load(dir: &Path, folder: &str) -> Result<Skill, SourceError> {
    match load_skill(dir) {
        LoadOutcome::Loaded(s) => Ok(*s),
        LoadOutcome::Skipped(s) => Err(SourceError::Load {
            folder: folder.into(),
            reason: s.reason().to_string(),
        }),
        LoadOutcome::NotASkill => Err(SourceError::Load {
            folder: folder.into(),
            reason: "no SKILL.md".into(),
        }),
    }
}
