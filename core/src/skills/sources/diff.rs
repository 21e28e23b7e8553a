//! What an update changes, as an operator judges it: tools added, removed or moved to
//! another security level, network hosts, env names and secrets newly declared, new
//! dependencies, and every changed file with a line diff. [`UpdateDiff::widens`] says
//! whether the update asks for more than the installed skill had: such an update is never
//! applied without a confirmation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;
use skillbox_protocol::skill::{Security, Skill};

use super::policy::security_rank;

/// Most bytes of line diff kept per file.
const MAX_DIFF_BYTES_PER_FILE: usize = 8 * 1024;
/// Largest file shown as a line diff (bigger or binary: "changed", no lines).
const MAX_DIFFED_FILE_BYTES: u64 = 256 * 1024;

/// A tool whose security level changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecurityChange {
    /// The tool.
    pub tool: String,
    /// Before.
    pub from: Security,
    /// After.
    pub to: Security,
}

/// A changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    /// The path inside the skill.
    pub path: String,
    /// `added`, `removed` or `changed`.
    pub change: &'static str,
    /// A unified diff for text files (cut at a few KiB).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
}

/// The difference between an installed skill and its update.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpdateDiff {
    /// Version before → after.
    pub version: (Option<String>, Option<String>),
    /// New tools and their security levels.
    pub tools_added: Vec<(String, Security)>,
    /// Tools gone.
    pub tools_removed: Vec<String>,
    /// Tools whose security level changed.
    pub security_changed: Vec<SecurityChange>,
    /// Host patterns newly declared (network and secret hosts).
    pub hosts_added: Vec<String>,
    /// Env names newly declared.
    pub env_added: Vec<String>,
    /// Secrets newly bound.
    pub secrets_added: Vec<String>,
    /// Workspace read globs newly declared.
    pub workspace_read_added: Vec<String>,
    /// Dependencies newly declared (requirement lines).
    pub dependencies_added: Vec<String>,
    /// Skills or tools newly declared in `permissions.delegate`.
    pub delegate_added: Vec<String>,
    /// Files added, removed or changed.
    pub files: Vec<FileChange>,
}

impl UpdateDiff {
    /// Compares the installed skill (`old` in `old_dir`) with the fetched one.
    pub fn between(old: &Skill, old_dir: &Path, new: &Skill, new_dir: &Path) -> Self {
        let old_tools: BTreeMap<&str, Security> = old
            .tools
            .iter()
            .map(|t| (t.name.as_str(), t.security))
            .collect();
        let mut d = UpdateDiff {
            version: (old.version.clone(), new.version.clone()),
            ..Default::default()
        };
        for t in &new.tools {
            match old_tools.get(t.name.as_str()) {
                None => d.tools_added.push((t.name.clone(), t.security)),
                Some(&was) if was != t.security => d.security_changed.push(SecurityChange {
                    tool: t.name.clone(),
                    from: was,
                    to: t.security,
                }),
                Some(_) => {}
            }
        }
        d.tools_removed = old
            .tools
            .iter()
            .filter(|t| new.tool(&t.name).is_none())
            .map(|t| t.name.clone())
            .collect();
        d.hosts_added = added(&old.permissions.reachable(), &new.permissions.reachable());
        d.env_added = added(&old.permissions.env, &new.permissions.env);
        let secrets = |s: &Skill| {
            s.permissions
                .secret_names()
                .map(String::from)
                .collect::<Vec<_>>()
        };
        d.secrets_added = added(&secrets(old), &secrets(new));
        d.workspace_read_added = added(
            &old.permissions.workspace.read,
            &new.permissions.workspace.read,
        );
        // Python requirements as written, Node packages as `name@range (package.json)`.
        let reqs = |s: &Skill| {
            let node = (s.dependencies.node.iter()).flat_map(|n| n.dependencies.iter());
            (s.dependencies.requirements.iter())
                .map(|r| r.spec.clone())
                .chain(node.map(|(name, range)| format!("{name}@{range} (package.json)")))
                .collect::<Vec<_>>()
        };
        d.dependencies_added = added(&reqs(old), &reqs(new));
        d.delegate_added = added(&old.permissions.delegate, &new.permissions.delegate);
        d.files = file_changes(old_dir, new_dir);
        d
    }

    /// Whether the update asks for more than the installed skill had: a new tool, a
    /// higher security level, a new host, env name, secret, workspace glob or dependency.
    pub fn widens(&self) -> bool {
        !self.tools_added.is_empty()
            || self
                .security_changed
                .iter()
                .any(|c| security_rank(c.to) > security_rank(c.from))
            || !self.hosts_added.is_empty()
            || !self.env_added.is_empty()
            || !self.secrets_added.is_empty()
            || !self.workspace_read_added.is_empty()
            || !self.dependencies_added.is_empty()
            || !self.delegate_added.is_empty()
    }

    /// Whether nothing changed at all.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
            && !self.widens()
            && self.tools_removed.is_empty()
            && self.security_changed.is_empty()
    }

    /// The difference as lines for a terminal.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        let v = |v: &Option<String>| v.clone().unwrap_or_else(|| "(no version)".into());
        line(format!(
            "version: {} -> {}",
            v(&self.version.0),
            v(&self.version.1)
        ));
        for (t, s) in &self.tools_added {
            line(format!("+ tool {t} (security {})", label(*s)));
        }
        for t in &self.tools_removed {
            line(format!("- tool {t}"));
        }
        for c in &self.security_changed {
            line(format!(
                "~ tool {} security {} -> {}",
                c.tool,
                label(c.from),
                label(c.to)
            ));
        }
        for (what, list) in [
            ("network host", &self.hosts_added),
            ("env", &self.env_added),
            ("secret", &self.secrets_added),
            ("workspace read", &self.workspace_read_added),
            ("dependency", &self.dependencies_added),
            ("delegate", &self.delegate_added),
        ] {
            for item in list {
                line(format!("+ {what} {item}"));
            }
        }
        for f in &self.files {
            line(format!(
                "{} file {}",
                match f.change {
                    "added" => "+",
                    "removed" => "-",
                    _ => "~",
                },
                f.path
            ));
            if let Some(d) = &f.diff {
                for l in d.lines() {
                    line(format!("    {l}"));
                }
            }
        }
        out
    }
}

fn label(s: Security) -> &'static str {
    match s {
        Security::Read => "read",
        Security::Write => "write",
        Security::Sign => "sign",
    }
}

fn added(old: &[String], new: &[String]) -> Vec<String> {
    new.iter().filter(|n| !old.contains(n)).cloned().collect()
}

/// Files of a skill folder by path (regular files only; the install refuses the rest).
fn files_of(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(dir.join(&rel)) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t) if t.is_file() => {
                    out.insert(path);
                }
                _ => {}
            }
        }
    }
    out
}

fn file_changes(old_dir: &Path, new_dir: &Path) -> Vec<FileChange> {
    let (old, new) = (files_of(old_dir), files_of(new_dir));
    let mut out = Vec::new();
    for path in old.union(&new) {
        let (a, b) = (old_dir.join(path), new_dir.join(path));
        let change = match (old.contains(path), new.contains(path)) {
            (true, false) => "removed",
            (false, true) => "added",
            _ => {
                if std::fs::read(&a).ok() == std::fs::read(&b).ok() {
                    continue;
                }
                "changed"
            }
        };
        let diff = text_diff(path, &a, &b);
        out.push(FileChange {
            path: path.clone(),
            change,
            diff,
        });
    }
    out
}

/// A unified diff of two text files (either may be missing), cut at a few KiB.
fn text_diff(path: &str, a: &Path, b: &Path) -> Option<String> {
    let read = |p: &Path| -> Option<String> {
        match std::fs::metadata(p) {
            Err(_) => Some(String::new()),
            Ok(m) if m.len() > MAX_DIFFED_FILE_BYTES => None,
            Ok(_) => String::from_utf8(std::fs::read(p).ok()?).ok(),
        }
    };
    let (old, new) = (read(a)?, read(b)?);
    let diff = similar::TextDiff::from_lines(&old, &new);
    let mut text = diff
        .unified_diff()
        .context_radius(2)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    if text.len() > MAX_DIFF_BYTES_PER_FILE {
        let mut cut = MAX_DIFF_BYTES_PER_FILE;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n… (diff cut)\n");
    }
    Some(text)
}
