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

use std::path::{Component, Path, PathBuf};

pub use crate::state::config::skills::SkillsSection;
pub use crate::state::workspace::SKILLS_DIR as INSTALL_ROOT;

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
