//! Discovery of skills over several roots with precedence: the first root that holds a
//! skill of a given name wins, and a log line says which folder it shadowed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::diagnostics::Diagnostic;
use super::load::{load_skill, LoadOutcome, Skipped};
use super::model::Skill;

/// Default depth below a root at which skill folders are looked for.
pub const DEFAULT_MAX_DEPTH: usize = 3;
/// Default cap on folders visited per discovery.
pub const DEFAULT_MAX_FOLDERS: usize = 10_000;

/// Why a folder directly under a skills root that holds files is not a skill.
pub const NO_MANIFEST: &str =
    "no SKILL.md, skill.yaml or package.json with an owliabot/skillbox field";

/// Whether `dir` holds at least one regular file whose name does not start with a dot.
fn holds_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            !e.file_name().to_string_lossy().starts_with('.')
                && e.file_type().is_ok_and(|t| t.is_file())
        })
    })
}

/// Limits of one discovery.
#[derive(Debug, Clone, Copy)]
pub struct DiscoveryOptions {
    /// How deep below a root a skill folder may be (1: direct children only).
    pub max_depth: usize,
    /// Folders visited over all roots before discovery stops.
    pub max_folders: usize,
}

impl Default for DiscoveryOptions {
    fn default() -> Self {
        Self {
            max_depth: DEFAULT_MAX_DEPTH,
            max_folders: DEFAULT_MAX_FOLDERS,
        }
    }
}

/// A skill hidden by one of the same name in a root of higher precedence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shadowed {
    /// The name.
    pub name: String,
    /// The folder that is used.
    pub kept: PathBuf,
    /// The folder that is hidden.
    pub hidden: PathBuf,
}

/// A folder discovery refused to enter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    /// The folder.
    pub dir: PathBuf,
    /// Why.
    pub reason: String,
}

/// A skill that loaded but that the host's policy withholds: not offered, listed as
/// unavailable with the reason (the core's kill list of skills its trust policy disabled).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Withheld {
    /// The skill (its folder's name).
    pub name: String,
    /// Its folder.
    pub dir: PathBuf,
    /// Why, and what to do.
    pub reason: String,
}

/// Everything found over the roots.
#[derive(Debug, Default, Serialize)]
pub struct Catalog {
    /// Usable skills, sorted by name.
    pub skills: Vec<Skill>,
    /// Skill folders that could not be loaded.
    pub skipped: Vec<Skipped>,
    /// Skills hidden by a higher-precedence root.
    pub shadowed: Vec<Shadowed>,
    /// Folders not entered (symlink escapes, unreadable folders).
    pub refused: Vec<Refused>,
    /// Whether the folder cap stopped discovery early.
    pub truncated: bool,
    /// Skills that loaded but are withheld by the host's policy (discovery leaves this
    /// empty; the core's trust policy fills it).
    pub withheld: Vec<Withheld>,
}

impl Catalog {
    /// The skill with this name.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }
}

/// The standard roots, highest precedence first: the workspace's `skills/`, its
/// `.agents/skills`, the user's `~/.agents/skills`, then configured extra roots.
pub fn standard_roots(workspace: &Path, home: Option<&Path>, extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut roots = vec![
        workspace.join("skills"),
        workspace.join(".agents").join("skills"),
    ];
    if let Some(home) = home {
        roots.push(home.join(".agents").join("skills"));
    }
    roots.extend(extra.iter().cloned());
    roots
}

/// Discovers skills under `roots` (highest precedence first). Missing roots are skipped.
pub fn discover(roots: &[PathBuf], opts: DiscoveryOptions) -> Catalog {
    let mut walk = Walk {
        opts,
        visited: 0,
        catalog: Catalog::default(),
        index: HashMap::new(),
    };
    for root in roots {
        let Ok(real_root) = root.canonicalize() else {
            continue;
        };
        walk.dir(&real_root, root, 0);
    }
    let mut catalog = walk.catalog;
    catalog.skills.sort_by(|a, b| a.name.cmp(&b.name));
    catalog
}

struct Walk {
    opts: DiscoveryOptions,
    visited: usize,
    catalog: Catalog,
    index: HashMap<String, PathBuf>,
}

impl Walk {
    fn dir(&mut self, real_root: &Path, dir: &Path, depth: usize) {
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                self.refuse(dir, format!("cannot read: {e}"));
                return;
            }
        };
        let mut children: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        children.sort();
        for child in children {
            if self.visited >= self.opts.max_folders {
                if !self.catalog.truncated {
                    tracing::warn!(
                        cap = self.opts.max_folders,
                        "skill discovery stopped at the folder cap"
                    );
                }
                self.catalog.truncated = true;
                return;
            }
            let name = child
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if name.starts_with('.') || name == "node_modules" || !child.is_dir() {
                continue;
            }
            self.visited += 1;
            if child.is_symlink() {
                match child.canonicalize() {
                    Ok(real) if real.starts_with(real_root) => {}
                    Ok(real) => {
                        self.refuse(
                            &child,
                            format!("symlink to {} leaves the skills root", real.display()),
                        );
                        continue;
                    }
                    Err(e) => {
                        self.refuse(&child, format!("broken symlink: {e}"));
                        continue;
                    }
                }
            }
            match load_skill(&child) {
                LoadOutcome::Loaded(skill) => self.add(*skill),
                LoadOutcome::Skipped(s) => {
                    tracing::warn!(dir = %s.dir.display(), reason = %s.reason(), "skill skipped");
                    self.catalog.skipped.push(s);
                }
                LoadOutcome::NotASkill => {
                    let found_before = self.found();
                    if depth + 1 < self.opts.max_depth {
                        self.dir(real_root, &child, depth + 1);
                    }
                    // A direct child of the root holding files but no manifest, with no skill
                    // below it either, is a skill in a format skillbox does not read (a
                    // `skill.rb`, a `README.md` alone): listed, not silently ignored. Folders
                    // inside a skill (`scripts/`) are never looked at here.
                    if depth == 0 && self.found() == found_before && holds_files(&child) {
                        self.skip_unknown(&child);
                    }
                }
            }
        }
    }

    fn add(&mut self, skill: Skill) {
        if let Some(kept) = self.index.get(&skill.name) {
            tracing::info!(
                name = %skill.name,
                kept = %kept.display(),
                hidden = %skill.dir.display(),
                "skill shadowed by one of the same name in a root of higher precedence"
            );
            self.catalog.shadowed.push(Shadowed {
                name: skill.name,
                kept: kept.clone(),
                hidden: skill.dir,
            });
            return;
        }
        self.index.insert(skill.name.clone(), skill.dir.clone());
        self.catalog.skills.push(skill);
    }

    /// Skills and skipped skill folders found so far.
    fn found(&self) -> usize {
        self.catalog.skills.len() + self.catalog.shadowed.len() + self.catalog.skipped.len()
    }

    fn skip_unknown(&mut self, dir: &Path) {
        let skipped = Skipped {
            dir: dir.to_path_buf(),
            diagnostics: vec![Diagnostic::error(dir, "-", NO_MANIFEST)],
        };
        tracing::warn!(dir = %dir.display(), reason = %skipped.reason(), "skill skipped");
        self.catalog.skipped.push(skipped);
    }

    fn refuse(&mut self, dir: &Path, reason: String) {
        tracing::warn!(dir = %dir.display(), %reason, "skill folder refused");
        self.catalog.refused.push(Refused {
            dir: dir.to_path_buf(),
            reason,
        });
    }
}
