//! What a repair may touch (routing spec §12): only `SKILL.md`, `scripts/**` and
//! `references/**` of the skill being repaired, by plain relative paths that stay inside
//! its folder and pass through no symbolic link; never the manifest part of `SKILL.md`
//! (its frontmatter declares the tools, permissions and prerequisites: a policy).

use std::path::{Component, Path, PathBuf};

use skillbox_protocol::skill::frontmatter;

use super::RepairError;

/// The kind of file a repair path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Area {
    /// `SKILL.md`.
    SkillDoc,
    /// `scripts/**`.
    Scripts,
    /// `references/**`.
    References,
}

impl Area {
    /// Whether added words count against the documentation budget.
    pub fn is_doc(self) -> bool {
        matches!(self, Area::SkillDoc | Area::References)
    }
}

fn out_of_scope(path: &str, reason: &str) -> RepairError {
    RepairError::OutOfScope {
        path: path.to_string(),
        reason: reason.to_string(),
    }
}

/// Checks a repair path's shape and returns its area and its place under `skill_dir`.
pub fn check_path(skill_dir: &Path, path: &str) -> Result<(Area, PathBuf), RepairError> {
    if path.is_empty() || path.contains('\0') || path.contains('\\') {
        return Err(out_of_scope(path, "not a plain relative path"));
    }
    let rel = Path::new(path);
    let mut parts = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::ParentDir => return Err(out_of_scope(path, "`..` leaves the skill")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(out_of_scope(path, "absolute paths are refused"))
            }
            Component::CurDir => return Err(out_of_scope(path, "`.` components are refused")),
        }
    }
    let area = match parts.as_slice() {
        [only] if only == "SKILL.md" => Area::SkillDoc,
        [first, _, ..] if first == "scripts" => Area::Scripts,
        [first, _, ..] if first == "references" => Area::References,
        _ => {
            return Err(out_of_scope(
                path,
                "a repair may change only SKILL.md, scripts/** and references/**",
            ))
        }
    };
    if parts.iter().any(|p| p.starts_with('.')) {
        return Err(out_of_scope(path, "hidden files and folders are refused"));
    }
    // Nothing on the way may be a symbolic link, and the target must be a regular file
    // when it exists.
    let mut at = skill_dir.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let Ok(meta) = std::fs::symlink_metadata(&at) else {
            // Missing from here on: the rest is created by the repair.
            at.extend(parts.iter().skip(i + 1));
            break;
        };
        if meta.file_type().is_symlink() {
            return Err(out_of_scope(path, "it passes through a symbolic link"));
        }
        let last = i + 1 == parts.len();
        if last && !meta.is_file() {
            return Err(out_of_scope(
                path,
                "the target exists and is not a regular file",
            ));
        }
        if !last && !meta.is_dir() {
            return Err(out_of_scope(path, "a parent exists and is not a folder"));
        }
    }
    Ok((area, at))
}

/// Refuses a `SKILL.md` change that touches its frontmatter.
pub fn check_frontmatter(old: &str, new: &str) -> Result<(), RepairError> {
    let yaml = |t: &str| frontmatter::split(t).ok().map(|s| s.yaml.to_string());
    if yaml(old) != yaml(new) {
        return Err(RepairError::Manifest);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_path_accepts_the_three_areas() {
        let d = Path::new("/nonexistent/skill");
        assert_eq!(check_path(d, "SKILL.md").unwrap().0, Area::SkillDoc);
        assert_eq!(check_path(d, "scripts/a/b.py").unwrap().0, Area::Scripts);
        assert_eq!(
            check_path(d, "references/x.md").unwrap().0,
            Area::References
        );
    }

    #[test]
    fn check_path_refuses_escapes_and_other_files() {
        let d = Path::new("/nonexistent/skill");
        for bad in [
            "../other/SKILL.md",
            "/etc/passwd",
            "scripts/../skill.yaml",
            "skill.yaml",
            "scripts",
            "policies/default.json",
            "./SKILL.md",
            "scripts/.hidden",
            "",
            "references\\..\\x",
        ] {
            assert!(
                matches!(check_path(d, bad), Err(RepairError::OutOfScope { .. })),
                "{bad}"
            );
        }
    }
}
