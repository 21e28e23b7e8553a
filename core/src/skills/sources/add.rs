//! `skill add`: a SOURCE (a git repository, a local folder or a collection index) fetched,
//! its skills chosen, each staged, checked against the policy and installed.

use std::path::Path;
use std::time::SystemTime;

use serde::Serialize;
use skillbox_protocol::skill::SkillOrigin;

use super::ops::{load, Fetched, GitSource, Sources};
use super::spec::Source;
use super::SourceError;
use crate::skills::install::{self, Installed, Limits, PublisherChange};

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
    /// Folders `--all` left out, and why (a template's placeholder is no skill).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
}

/// A skill folder `--all` did not install.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// The folder in the repository.
    pub folder: String,
    /// Why.
    pub reason: String,
}

impl Sources {
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
            skipped: Vec::new(),
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
            outcome.skipped.extend(done.skipped);
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
        let mut chosen = choose(&src.text, &found, wanted, all)?;
        let mut skipped = Vec::new();
        if all {
            chosen.retain(|folder| match self.template_reason(&fetched, folder) {
                Some(reason) => {
                    skipped.push(Skipped {
                        folder: folder.clone(),
                        reason,
                    });
                    false
                }
                None => true,
            });
        }
        // Every chosen skill is written out and checked before the first is installed.
        let mut staged = Vec::new();
        for (n, folder) in chosen.iter().enumerate() {
            let (dir, _skill) = self.stage(&fetched, folder, n, now)?;
            let tree = self
                .git
                .folder_tree(&fetched.repo, &fetched.commit, folder)?;
            staged.push((folder.clone(), dir, tree));
        }
        // An abbreviated commit is recorded as the commit it named.
        let reference = src.reference.clone().map(|r| {
            let short = super::git::is_short_commit(&r);
            if short && fetched.commit.starts_with(&r.to_ascii_lowercase()) {
                fetched.commit.clone()
            } else {
                r
            }
        });
        let mut installed = Vec::new();
        for (folder, dir, tree) in staged {
            let origin = SkillOrigin {
                source: src.text.clone(),
                url: src.url.clone(),
                reference: reference.clone(),
                commit: fetched.commit.clone(),
                subfolder: folder,
                tree,
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
            skipped,
        })
    }

    /// Why `folder` of a fetch is a template rather than a skill: a folder named
    /// `template`/`templates`, or a SKILL.md whose name is a placeholder.
    fn template_reason(&self, fetched: &Fetched, folder: &str) -> Option<String> {
        let base = folder.rsplit('/').next().unwrap_or(folder);
        if base.eq_ignore_ascii_case("template") || base.eq_ignore_ascii_case("templates") {
            return Some(format!(
                "a template folder ({base}/), not a skill; add it by name with --skill {folder} if it is one"
            ));
        }
        let path = if folder.is_empty() {
            "SKILL.md".to_string()
        } else {
            format!("{folder}/SKILL.md")
        };
        let entry = fetched.tree.entries.get(&path)?;
        let text = self
            .git
            .read_blobs(&fetched.repo, std::slice::from_ref(&entry.oid))
            .ok()?
            .pop()?;
        let name = skill_md_name(&String::from_utf8_lossy(&text))?;
        is_placeholder_name(&name).then(|| {
            format!(
                "its SKILL.md is named {name:?}, a template's placeholder; add it by name with --skill {folder} if it is a skill"
            )
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
            skipped: Vec::new(),
        })
    }

    fn policy_limits_skills(&self) -> bool {
        let r = &self.policy.rule;
        r.signed_only || !r.publishers.is_empty() || r.max_permissions != Default::default()
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

/// The `name:` of a SKILL.md's front matter.
fn skill_md_name(text: &str) -> Option<String> {
    let front = text.strip_prefix("---")?.split("\n---").next()?;
    front.lines().find_map(|l| {
        let v = l.strip_prefix("name:")?.trim();
        Some(v.trim_matches(|c| c == '"' || c == '\'').to_string())
    })
}

/// A name left for the author to fill in: `{{...}}`, `<...>`, or a template's name.
fn is_placeholder_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("{{")
        || n.starts_with('<')
        || matches!(
            n.as_str(),
            "template"
                | "templates"
                | "template-skill"
                | "skill-template"
                | "my-skill"
                | "skill-name"
                | "your-skill-name"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholder_names_are_recognised_and_real_ones_are_not() {
        let md = |n: &str| format!("---\nname: {n}\ndescription: d\n---\n# x\n");
        for n in [
            "template-skill",
            "{{ skill_name }}",
            "\"<your-skill>\"",
            "skill-template",
        ] {
            let name = skill_md_name(&md(n)).unwrap();
            assert!(is_placeholder_name(&name), "{n}");
        }
        for n in ["pdf", "docx", "template-engine"] {
            let name = skill_md_name(&md(n)).unwrap();
            assert!(!is_placeholder_name(&name), "{n}");
        }
    }
}
