//! `skill outdated` and `skill update`: where each git-added skill's ref points now and
//! whether its folder changed there (its git tree id, so a commit elsewhere in the
//! repository is no update), and an update fetched, checked and compared before it is
//! applied.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::SystemTime;

use serde::Serialize;
use skillbox_protocol::skill::SkillOrigin;

use super::diff::UpdateDiff;
use super::git::FetchDir;
use super::ops::{load, Fetched, Sources};
use super::SourceError;
use crate::skills::install::{self, lock, Installed, Limits, PublisherChange};

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

/// What `skill update` found for one skill.
#[derive(Debug)]
pub enum UpdateCheck {
    /// The ref still points at the installed commit.
    UpToDate,
    /// The ref moved, but the skill's folder is the tree installed: nothing to install or
    /// confirm. The new commit is recorded in the lock, so `skill outdated` stays quiet.
    FolderUnchanged {
        /// The commit installed before.
        from_commit: String,
        /// The commit recorded now.
        to_commit: String,
    },
    /// The folder changed: the update, compared and waiting to be applied.
    Changed(Box<PreparedUpdate>),
}

/// One fetch per source and ref in a `skill outdated`, shared by the skills it holds.
type Fetches = HashMap<(String, Option<String>), Result<Fetched, String>>;

impl Sources {
    /// `skill outdated`: every skill added from git, and whether its folder changed where
    /// its ref points now. A source whose ref moved is fetched (one commit deep) to
    /// compare the folder's tree id with the installed one.
    pub fn outdated(&self) -> Result<Vec<OutdatedEntry>, SourceError> {
        let locked = lock::read(&self.trust.skills_root)
            .map_err(|e| SourceError::Install(install::InstallError::Lock(e)))?;
        let mut fetches = Fetches::new();
        let mut out = Vec::new();
        for (name, entry) in &locked.skills {
            let Some(o) = &entry.origin else { continue };
            let (latest, status, error) = self.where_now(o, &mut fetches);
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

    /// Where one skill's ref points now, and whether its folder changed there.
    fn where_now(
        &self,
        o: &SkillOrigin,
        fetches: &mut Fetches,
    ) -> (Option<String>, &'static str, Option<String>) {
        if o.reference.as_deref().is_some_and(super::git::is_commit_id) {
            return (Some(o.commit.clone()), "pinned", None);
        }
        let latest = match self.git.ls_remote(&o.url, o.reference.as_deref()) {
            Ok(c) if c == o.commit => return (Some(c), "up_to_date", None),
            Ok(c) => c,
            Err(e) => return (None, "error", Some(e.to_string())),
        };
        let fetched = fetches
            .entry((o.url.clone(), o.reference.clone()))
            .or_insert_with(|| {
                self.fetch(&o.url, o.reference.as_deref())
                    .map_err(|e| e.to_string())
            });
        let f = match fetched {
            Ok(f) => f,
            Err(e) => return (Some(latest), "error", Some(e.clone())),
        };
        match self.folder_unchanged(f, o) {
            Ok((true, _)) => (Some(f.commit.clone()), "up_to_date", None),
            Ok((false, _)) => (Some(f.commit.clone()), "outdated", None),
            Err(e) => (Some(f.commit.clone()), "error", Some(e.to_string())),
        }
    }

    /// `skill update NAME`, first half: fetches the skill's source again and compares.
    pub fn prepare_update(&self, name: &str, now: SystemTime) -> Result<UpdateCheck, SourceError> {
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
            return Ok(UpdateCheck::UpToDate);
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
        let (unchanged, tree) = self.folder_unchanged(&fetched, &origin)?;
        if unchanged {
            self.record_commit(name, &origin, &fetched.commit, tree)?;
            return Ok(UpdateCheck::FolderUnchanged {
                from_commit: origin.commit,
                to_commit: fetched.commit,
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
        Ok(UpdateCheck::Changed(Box::new(PreparedUpdate {
            name: name.into(),
            from_commit: origin.commit.clone(),
            to_commit: fetched.commit.clone(),
            diff,
            origin: SkillOrigin {
                commit: fetched.commit.clone(),
                tree,
                ..origin
            },
            folder: dir,
            _fetch: fetched.dir,
        })))
    }

    /// Records that `name` is at `commit` (its folder's tree `tree`) without installing:
    /// the folder did not change. An install since `origin` was read is left as it is.
    fn record_commit(
        &self,
        name: &str,
        origin: &SkillOrigin,
        commit: &str,
        tree: Option<String>,
    ) -> Result<(), SourceError> {
        let root = &self.trust.skills_root;
        let lock_error = |e| SourceError::Install(install::InstallError::Lock(e));
        let _held = lock::lock_root(root).map_err(lock_error)?;
        let mut locked = lock::read(root).map_err(lock_error)?;
        let Some(entry) = locked.skills.get_mut(name) else {
            return Err(SourceError::NotInstalled { name: name.into() });
        };
        if entry.origin.as_ref() != Some(origin) {
            return Ok(());
        }
        entry.origin = Some(SkillOrigin {
            commit: commit.to_string(),
            tree,
            ..origin.clone()
        });
        lock::write(root, &locked).map_err(lock_error)
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
