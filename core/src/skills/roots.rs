//! The skills roots of a workspace: `[skills] roots` in `skillbox.toml`, highest
//! precedence first (the first root holding a skill of a name wins; the others are listed
//! as shadowed). Relative roots are relative to the workspace, `~/` is the user's home.
//! Installs always go to `<workspace>/skills`, so that folder is always a root: when the
//! list does not name it, it comes last. Without the key the only root is
//! `<workspace>/skills`.
//!
//! ```toml
//! [skills]
//! roots = ["~/.agents/skills", ".agents/skills", "skills"]
//! ```
//!
//! [`add_root`] appends a root to that list in the file itself (`skill import --link`),
//! keeping the user's comments and layout, after the install root, so installed skills
//! keep their precedence over the added folder.

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

pub use crate::state::config::skills::SkillsSection;
use crate::state::config::Config;
use crate::state::pki::{write_atomic, PkiError};
pub use crate::state::workspace::SKILLS_DIR as INSTALL_ROOT;
use crate::state::Workspace;

/// Why a configured root cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RootsError {
    /// An empty string in `roots`.
    #[error("skillbox.toml: [skills] roots holds an empty path; remove it or name a folder")]
    Empty,
    /// `~/...` and no home folder is known.
    #[error("skillbox.toml: [skills] roots: {root:?} starts with ~ but HOME is not set; write the full path")]
    NoHome {
        /// The root as configured.
        root: String,
    },
}

impl SkillsSection {
    /// The roots of `workspace`, highest precedence first, with `<workspace>/skills` in
    /// them (last unless named); `home` resolves `~`.
    pub fn resolve(
        &self,
        workspace: &Path,
        home: Option<&Path>,
    ) -> Result<Vec<PathBuf>, RootsError> {
        let install = workspace.join(INSTALL_ROOT);
        let mut roots: Vec<PathBuf> = Vec::new();
        for raw in &self.roots {
            let path = resolve_one(raw, workspace, home)?;
            if !roots.contains(&path) {
                roots.push(path);
            }
        }
        if !roots.contains(&install) {
            roots.push(install);
        }
        Ok(roots)
    }
}

impl crate::state::config::Config {
    /// The skills roots of `workspace`, highest precedence first, `~` from `HOME`.
    pub fn skills_roots(&self, workspace: &Path) -> Result<Vec<PathBuf>, RootsError> {
        self.skills.resolve(workspace, home().as_deref())
    }
}

/// The home folder of this process (`HOME`), if set.
pub fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// What [`add_root`] did to `skillbox.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RootAdded {
    /// The folder was appended to `[skills] roots`.
    Added,
    /// `[skills] roots` already named the folder; the file was not written.
    AlreadyThere,
}

/// Why a root could not be added to `skillbox.toml`. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum AddRootError {
    /// The file exists but could not be read.
    #[error("reading {}: {source}; check its permissions", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is not TOML.
    #[error("{} is not valid TOML ({reason}); fix it, then try again", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
    /// `skills` or `skills.roots` is not a table / an array of strings.
    #[error("{}: {what}; write `[skills]` with `roots = [\"...\"]`, then try again", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: &'static str,
    },
    /// The folder's path cannot be written in TOML.
    #[error("the folder {} is not valid UTF-8 and cannot be written in skillbox.toml; copy its skills instead", root.display())]
    NotUtf8 {
        /// The folder.
        root: PathBuf,
    },
    /// The edited file would not load as a configuration.
    #[error("with the new root, {} would not load ({reason}); fix the file, then try again", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file could not be written.
    #[error(transparent)]
    Write(#[from] PkiError),
}

/// Appends `root` (an absolute folder) to `[skills] roots` of the workspace's
/// `skillbox.toml`, creating the file, the table or the key when missing. When the list
/// does not name the install root, `"skills"` is appended first: it was the implicit last
/// root, and must stay above the new one. Comments and layout of the file are kept; the
/// file is replaced atomically with its mode. `home` resolves `~` in existing entries.
pub fn add_root(
    workspace: &Workspace,
    home: Option<&Path>,
    root: &Path,
) -> Result<RootAdded, AddRootError> {
    let path = workspace.config_file();
    let (text, mode) = match std::fs::read_to_string(&path) {
        Ok(text) => {
            let mode = std::fs::metadata(&path).map_or(0o644, |m| {
                std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777
            });
            (text, mode)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), 0o644),
        Err(source) => return Err(AddRootError::Read { path, source }),
    };
    let raw_root = root.to_str().ok_or_else(|| AddRootError::NotUtf8 {
        root: root.to_path_buf(),
    })?;
    let mut doc: toml_edit::DocumentMut =
        text.parse()
            .map_err(|e: toml_edit::TomlError| AddRootError::Parse {
                path: path.clone(),
                reason: e.to_string().trim().to_string(),
            })?;
    let shape = |what| AddRootError::Shape {
        path: path.clone(),
        what,
    };
    let skills = doc
        .entry("skills")
        .or_insert(toml_edit::table())
        .as_table_like_mut()
        .ok_or_else(|| shape("`skills` is not a table"))?;
    let roots = skills
        .entry("roots")
        .or_insert(toml_edit::value(toml_edit::Array::new()))
        .as_array_mut()
        .ok_or_else(|| shape("`skills.roots` is not an array"))?;
    let mut named = Vec::new();
    for v in roots.iter() {
        let raw = v
            .as_str()
            .ok_or_else(|| shape("`skills.roots` holds something other than strings"))?;
        // An entry that does not resolve is the config loader's to report.
        if let Ok(p) = resolve_one(raw, workspace.root(), home) {
            named.push(p);
        }
    }
    if named.contains(&normalize(root)) {
        return Ok(RootAdded::AlreadyThere);
    }
    if !named.contains(&workspace.root().join(INSTALL_ROOT)) {
        roots.push(INSTALL_ROOT);
    }
    roots.push(raw_root);
    let out = doc.to_string();
    toml::from_str::<Config>(&out).map_err(|e| AddRootError::Invalid {
        path: path.clone(),
        reason: e.message().to_string(),
    })?;
    write_atomic(&path, out.as_bytes(), mode)?;
    Ok(RootAdded::Added)
}

fn resolve_one(raw: &str, workspace: &Path, home: Option<&Path>) -> Result<PathBuf, RootsError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(RootsError::Empty);
    }
    let path = if raw == "~" || raw.starts_with("~/") {
        let home = home.ok_or_else(|| RootsError::NoHome {
            root: raw.to_string(),
        })?;
        home.join(raw.trim_start_matches('~').trim_start_matches('/'))
    } else if Path::new(raw).is_absolute() {
        PathBuf::from(raw)
    } else {
        workspace.join(raw)
    };
    Ok(normalize(&path))
}

/// Drops `.` components and trailing slashes so `./skills` and `skills/` name the install
/// root (no file system access: `..` is kept as written).
fn normalize(path: &Path) -> PathBuf {
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(roots: &[&str]) -> SkillsSection {
        SkillsSection {
            roots: roots.iter().map(ToString::to_string).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn roots_default_to_the_install_root() {
        let ws = Path::new("/ws");
        assert_eq!(
            section(&[]).resolve(ws, None).unwrap(),
            vec![PathBuf::from("/ws/skills")]
        );
    }

    #[test]
    fn roots_keep_their_order_and_resolve_relative_home_and_absolute_paths() {
        let ws = Path::new("/ws");
        let home = Path::new("/home/ann");
        let roots = section(&[
            "~/.agents/skills",
            "./skills/",
            "/opt/skills",
            ".agents/skills",
        ])
        .resolve(ws, Some(home))
        .unwrap();
        assert_eq!(
            roots,
            vec![
                PathBuf::from("/home/ann/.agents/skills"),
                PathBuf::from("/ws/skills"),
                PathBuf::from("/opt/skills"),
                PathBuf::from("/ws/.agents/skills"),
            ],
            "the install root is not appended again when named"
        );
    }

    #[test]
    fn roots_append_the_install_root_when_not_named() {
        let roots = section(&["personal", "personal"])
            .resolve(Path::new("/ws"), None)
            .unwrap();
        assert_eq!(
            roots,
            vec![PathBuf::from("/ws/personal"), PathBuf::from("/ws/skills")]
        );
    }

    fn ws_with(config: Option<&str>) -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        if let Some(text) = config {
            std::fs::write(dir.path().join("skillbox.toml"), text).unwrap();
        }
        let ws = Workspace::new(dir.path());
        (dir, ws)
    }

    fn roots_of(ws: &Workspace) -> Vec<String> {
        Config::load(ws.root()).unwrap().skills.roots
    }

    #[test]
    fn add_root_keeps_comments_and_puts_the_install_root_first() {
        let text =
            "# mine\n[skills]\n# first the shared ones\nroots = [\"~/.agents/skills\"] # keep\n";
        let (_d, ws) = ws_with(Some(text));
        let home = Path::new("/home/ann");
        let added = add_root(&ws, Some(home), Path::new("/home/ann/.claude/skills")).unwrap();
        assert_eq!(added, RootAdded::Added);
        let out = std::fs::read_to_string(ws.config_file()).unwrap();
        assert!(
            out.contains("# first the shared ones") && out.contains("# keep"),
            "{out}"
        );
        assert_eq!(
            roots_of(&ws),
            ["~/.agents/skills", "skills", "/home/ann/.claude/skills"]
        );
        // Named already (through ~): nothing written.
        let again = add_root(&ws, Some(home), Path::new("/home/ann/.agents/skills")).unwrap();
        assert_eq!(again, RootAdded::AlreadyThere);
        assert_eq!(std::fs::read_to_string(ws.config_file()).unwrap(), out);
    }

    #[test]
    fn add_root_creates_the_file_and_keeps_a_named_install_root_in_place() {
        let (_d, ws) = ws_with(None);
        add_root(&ws, None, Path::new("/opt/skills")).unwrap();
        assert_eq!(roots_of(&ws), ["skills", "/opt/skills"]);
        let (_d, ws) = ws_with(Some("[skills]\nroots = [\"./skills/\", \"x\"]\n"));
        add_root(&ws, None, Path::new("/opt/skills")).unwrap();
        assert_eq!(roots_of(&ws), ["./skills/", "x", "/opt/skills"]);
    }

    #[test]
    fn add_root_refuses_roots_that_are_not_an_array_and_writes_nothing() {
        let text = "[skills]\nroots = \"skills\"\n";
        let (_d, ws) = ws_with(Some(text));
        let err = add_root(&ws, None, Path::new("/opt/skills")).unwrap_err();
        assert!(matches!(err, AddRootError::Shape { .. }), "{err}");
        assert!(err.to_string().contains("roots = ["), "{err}");
        assert_eq!(std::fs::read_to_string(ws.config_file()).unwrap(), text);
        let (_d, ws) = ws_with(Some("[skills\n"));
        let err = add_root(&ws, None, Path::new("/opt/skills")).unwrap_err();
        assert!(matches!(err, AddRootError::Parse { .. }), "{err}");
    }

    #[test]
    fn roots_refuse_an_empty_entry_and_a_home_path_without_home() {
        let ws = Path::new("/ws");
        assert_eq!(section(&[""]).resolve(ws, None), Err(RootsError::Empty));
        assert_eq!(
            section(&["~/x"]).resolve(ws, None),
            Err(RootsError::NoHome { root: "~/x".into() })
        );
    }
}
