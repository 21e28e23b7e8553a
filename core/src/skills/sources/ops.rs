//! The three operations on git sources: [`Sources::add`], [`Sources::outdated`] and
//! [`Sources::prepare_update`] / [`Sources::apply_update`]. Each fetch goes to a private
//! folder under `<state>/fetch`, removed when the operation ends, whatever happens.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use skillbox_protocol::skill::{load_skill, LoadOutcome, Skill, SkillOrigin};

use super::diff::UpdateDiff;
use super::git::{FetchDir, GitRunner};
use super::policy::InstallPolicy;
use super::spec::Source;
use super::tree::FetchedTree;
use super::SourceError;
use crate::skills::install::{self, lock, Installed, Limits, PublisherChange, TrustPolicy};
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

/// What to add.
#[derive(Debug, Clone, Default)]
pub struct AddRequest {
    /// SOURCE as given.
    pub source: String,
    /// The skills chosen (folder names or paths); empty: the only one, or all with `all`.
    pub skills: Vec<String>,
    /// `--ref`.
    pub reference: Option<String>,
    /// `--all`.
    pub all: bool,
    /// `--allow-publisher-change`.
    pub publisher_change: PublisherChange,
}

/// What an add did.
#[derive(Debug, Clone, Serialize)]
pub struct AddOutcome {
    /// The URL fetched (or the local folder installed).
    pub url: String,
    /// The commit the ref resolved to (none for a local folder).
    pub commit: Option<String>,
    /// Every skill folder the source holds.
    pub found: Vec<String>,
    /// What was installed.
    pub installed: Vec<Installed>,
}

/// One git-added skill and where its source points now.
#[derive(Debug, Clone, Serialize)]
pub struct OutdatedEntry {
    /// The skill.
    pub name: String,
    /// Its source as given.
    pub source: String,
    /// The ref followed (none: the default branch).
    pub reference: Option<String>,
    /// The commit installed.
    pub installed: String,
    /// The commit the ref points at now (none when it could not be asked).
    pub latest: Option<String>,
    /// `up_to_date`, `outdated`, `pinned` (the ref is a commit) or `error`.
    pub status: &'static str,
    /// Why the source could not be asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A fetched update, checked and compared, waiting to be applied. Its fetch folder lives
/// as long as it does.
#[derive(Debug)]
pub struct PreparedUpdate {
    /// The skill.
    pub name: String,
    /// The commit installed now.
    pub from_commit: String,
    /// The commit fetched.
    pub to_commit: String,
    /// What changes.
    pub diff: UpdateDiff,
    origin: SkillOrigin,
    folder: PathBuf,
    _fetch: FetchDir,
}

impl PreparedUpdate {
    /// Whether the update may apply without `--yes`: only with `auto_update` and only
    /// when it widens nothing.
    pub fn needs_confirmation(&self, auto_update: bool) -> bool {
        !auto_update || self.diff.widens()
    }
}

/// A git source resolved: what the operator wrote, the URL, the folder and the ref.
struct GitSource {
    text: String,
    url: String,
    subfolder: Option<String>,
    reference: Option<String>,
}

/// One fetched commit of a repository.
struct Fetched {
    dir: FetchDir,
    repo: PathBuf,
    commit: String,
    tree: FetchedTree,
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

    fn fetch(&self, url: &str, reference: Option<&str>) -> Result<Fetched, SourceError> {
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
    fn stage(
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

    /// `skill add`: fetches the source, chooses its skills and installs each.
    pub fn add(&self, req: &AddRequest, now: SystemTime) -> Result<AddOutcome, SourceError> {
        match Source::parse(&req.source, &self.git_host, &self.base)? {
            Source::Local(path) => self.add_local(req, &path, now),
            Source::Index(location) => self.add_from_index(req, &location, now),
            Source::Git {
                url,
                subfolder,
                reference,
            } => {
                let git = GitSource {
                    text: req.source.clone(),
                    url,
                    subfolder,
                    reference: req.reference.clone().or(reference),
                };
                self.add_git(&git, &req.skills, req.all, req.publisher_change, now)
            }
        }
    }

    /// `skill add INDEX --skill NAME`: each chosen entry of a collection index, added from
    /// the source, folder and ref it names.
    fn add_from_index(
        &self,
        req: &AddRequest,
        location: &str,
        now: SystemTime,
    ) -> Result<AddOutcome, SourceError> {
        let index = crate::skills::find::load_index(location, &self.base).map_err(|e| {
            SourceError::Index {
                location: location.into(),
                reason: e.to_string(),
            }
        })?;
        let names: Vec<String> = index.skills.iter().map(|e| e.name.clone()).collect();
        let chosen = choose(location, &names, &req.skills, req.all)?;
        let mut outcome = AddOutcome {
            url: location.into(),
            commit: None,
            found: names.clone(),
            installed: Vec::new(),
        };
        // Each entry is its own source: a refusal stops the entries after it.
        for name in chosen {
            let Some(entry) = index.skills.iter().find(|e| e.name == name) else {
                continue;
            };
            let Source::Git {
                url,
                subfolder,
                reference,
            } = Source::parse(&entry.source, &self.git_host, &self.base)?
            else {
                return Err(SourceError::Index {
                    location: location.into(),
                    reason: format!(
                        "entry {} names {:?}, which is not a git source",
                        entry.name, entry.source
                    ),
                });
            };
            let git = GitSource {
                text: entry.source.clone(),
                url,
                subfolder: entry.path.clone().or(subfolder),
                reference: req
                    .reference
                    .clone()
                    .or_else(|| entry.git_ref.clone())
                    .or(reference),
            };
            let wanted = if entry.path.is_some() {
                Vec::new()
            } else {
                vec![entry.name.clone()]
            };
            let done = self.add_git(&git, &wanted, false, req.publisher_change, now)?;
            outcome.commit = outcome.commit.or(done.commit);
            outcome.installed.extend(done.installed);
        }
        Ok(outcome)
    }

    /// Fetches one git source and installs the chosen skills of it.
    fn add_git(
        &self,
        src: &GitSource,
        wanted: &[String],
        all: bool,
        publisher_change: PublisherChange,
        now: SystemTime,
    ) -> Result<AddOutcome, SourceError> {
        self.policy.check_source(&src.text, &src.url)?;
        let fetched = self.fetch(&src.url, src.reference.as_deref())?;
        let within = src.subfolder.clone().unwrap_or_default();
        if !within.is_empty() && !fetched.tree.has_folder(&within) {
            return Err(SourceError::NoSkills {
                source_text: src.text.clone(),
                folder: Some(within),
            });
        }
        let found = fetched.tree.skill_folders(&within);
        if found.is_empty() {
            return Err(SourceError::NoSkills {
                source_text: src.text.clone(),
                folder: src.subfolder.clone(),
            });
        }
        let chosen = choose(&src.text, &found, wanted, all)?;
        // Every chosen skill is written out and checked before the first is installed.
        let mut staged = Vec::new();
        for (n, folder) in chosen.iter().enumerate() {
            staged.push((folder.clone(), self.stage(&fetched, folder, n, now)?));
        }
        let mut installed = Vec::new();
        for (folder, (dir, _skill)) in staged {
            let origin = SkillOrigin {
                source: src.text.clone(),
                url: src.url.clone(),
                reference: src.reference.clone(),
                commit: fetched.commit.clone(),
                subfolder: folder,
            };
            installed.push(install::install_with_origin(
                &dir,
                &self.trust,
                Limits::default(),
                now,
                publisher_change,
                Some(origin),
            )?);
        }
        Ok(AddOutcome {
            url: src.url.clone(),
            commit: Some(fetched.commit),
            found,
            installed,
        })
    }

    /// `skill add ./folder`: a local skill folder or archive, checked against the policy.
    fn add_local(
        &self,
        req: &AddRequest,
        path: &Path,
        now: SystemTime,
    ) -> Result<AddOutcome, SourceError> {
        let url = path.display().to_string();
        self.policy.check_source(&req.source, &url)?;
        if path.is_dir() {
            let skill = load(path, &url)?;
            self.policy
                .check_skill(&skill, path, &self.trust.trust_dir, now)?;
        } else if self.policy_limits_skills() {
            return Err(super::PolicyRefusal {
                reason: "an archive cannot be checked against max_permissions, signed_only or publishers before it is unpacked; install it with `skillbox skill install`, or add its folder".into(),
            }
            .into());
        }
        let done = install::install(
            path,
            &self.trust,
            Limits::default(),
            now,
            req.publisher_change,
        )?;
        Ok(AddOutcome {
            url,
            commit: None,
            found: vec![done.name.clone()],
            installed: vec![done],
        })
    }

    fn policy_limits_skills(&self) -> bool {
        let r = &self.policy.rule;
        r.signed_only || !r.publishers.is_empty() || r.max_permissions != Default::default()
    }

    /// `skill outdated`: every skill added from git, and where its ref points now.
    pub fn outdated(&self) -> Result<Vec<OutdatedEntry>, SourceError> {
        let locked = lock::read(&self.trust.skills_root)
            .map_err(|e| SourceError::Install(install::InstallError::Lock(e)))?;
        let mut out = Vec::new();
        for (name, entry) in &locked.skills {
            let Some(o) = &entry.origin else { continue };
            let pinned = o.reference.as_deref().is_some_and(super::git::is_commit_id);
            let (latest, status, error) = if pinned {
                (Some(o.commit.clone()), "pinned", None)
            } else {
                match self.git.ls_remote(&o.url, o.reference.as_deref()) {
                    Ok(c) if c == o.commit => (Some(c), "up_to_date", None),
                    Ok(c) => (Some(c), "outdated", None),
                    Err(e) => (None, "error", Some(e.to_string())),
                }
            };
            out.push(OutdatedEntry {
                name: name.clone(),
                source: o.source.clone(),
                reference: o.reference.clone(),
                installed: o.commit.clone(),
                latest,
                status,
                error,
            });
        }
        Ok(out)
    }

    /// `skill update NAME`, first half: fetches the skill's source again and compares.
    /// `None` when the source has not moved.
    pub fn prepare_update(
        &self,
        name: &str,
        now: SystemTime,
    ) -> Result<Option<PreparedUpdate>, SourceError> {
        let locked = lock::read(&self.trust.skills_root)
            .map_err(|e| SourceError::Install(install::InstallError::Lock(e)))?;
        let entry = locked
            .get(name)
            .ok_or_else(|| SourceError::NotInstalled { name: name.into() })?;
        let origin = entry
            .origin
            .clone()
            .ok_or_else(|| SourceError::NotFromGit { name: name.into() })?;
        self.policy.check_source(&origin.source, &origin.url)?;
        let fetched = self.fetch(&origin.url, origin.reference.as_deref())?;
        if fetched.commit == origin.commit {
            return Ok(None);
        }
        if !fetched
            .tree
            .entries
            .contains_key(&sub_path(&origin.subfolder, "SKILL.md"))
        {
            return Err(SourceError::Moved {
                name: name.into(),
                reason: format!("{} holds no SKILL.md at commit {}; the skill moved or was removed from its source", display_folder(&origin.subfolder), fetched.commit),
            });
        }
        let (dir, skill) = self.stage(&fetched, &origin.subfolder, 0, now)?;
        if skill.name != name {
            return Err(SourceError::Moved {
                name: name.into(),
                reason: format!(
                    "{} now holds the skill {}; add it under its new name",
                    display_folder(&origin.subfolder),
                    skill.name
                ),
            });
        }
        let installed_dir = self.trust.skills_root.join(name);
        let installed = load(&installed_dir, name)?;
        let diff = UpdateDiff::between(&installed, &installed_dir, &skill, &dir);
        Ok(Some(PreparedUpdate {
            name: name.into(),
            from_commit: origin.commit.clone(),
            to_commit: fetched.commit.clone(),
            diff,
            origin: SkillOrigin {
                commit: fetched.commit.clone(),
                ..origin
            },
            folder: dir,
            _fetch: fetched.dir,
        }))
    }

    /// `skill update NAME`, second half: installs the prepared update (confirmed).
    pub fn apply_update(
        &self,
        update: PreparedUpdate,
        now: SystemTime,
    ) -> Result<Installed, SourceError> {
        Ok(install::install_with_origin(
            &update.folder,
            &self.trust,
            Limits::default(),
            now,
            PublisherChange::Refuse,
            Some(update.origin.clone()),
        )?)
    }

    /// Every installed skill that came from git, by name.
    pub fn git_added(&self) -> Result<Vec<String>, SourceError> {
        let locked = lock::read(&self.trust.skills_root)
            .map_err(|e| SourceError::Install(install::InstallError::Lock(e)))?;
        Ok(locked
            .skills
            .iter()
            .filter(|(_, e)| e.origin.is_some())
            .map(|(n, _)| n.clone())
            .collect())
    }
}

fn sub_path(folder: &str, file: &str) -> String {
    if folder.is_empty() {
        file.to_string()
    } else {
        format!("{folder}/{file}")
    }
}

fn display_folder(folder: &str) -> String {
    if folder.is_empty() {
        "the repository's top".into()
    } else {
        folder.to_string()
    }
}

/// The folders chosen: by name (a folder's last part) or path, the only one, or all.
fn choose(
    source: &str,
    found: &[String],
    wanted: &[String],
    all: bool,
) -> Result<Vec<String>, SourceError> {
    if all {
        return Ok(found.to_vec());
    }
    if wanted.is_empty() {
        if found.len() == 1 {
            return Ok(found.to_vec());
        }
        return Err(SourceError::Choose {
            source_text: source.into(),
            found: found.to_vec(),
        });
    }
    wanted
        .iter()
        .map(|w| {
            found
                .iter()
                .find(|f| *f == w || f.rsplit('/').next() == Some(w.as_str()))
                .cloned()
                .ok_or_else(|| SourceError::UnknownSkill {
                    source_text: source.into(),
                    name: w.clone(),
                    found: found.to_vec(),
                })
        })
        .collect()
}

fn load(dir: &Path, folder: &str) -> Result<Skill, SourceError> {
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
