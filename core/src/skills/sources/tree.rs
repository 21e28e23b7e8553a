//! A fetched commit's tree, read from git's listing before any file is written: the skill
//! folders it holds (folders with a `SKILL.md`, as the skills CLI finds them), and the
//! checks on a chosen folder — no submodule, no link leaving the repository, no file over
//! the size limit — before its files are written out from git's objects.

use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use super::git::{GitRunner, TreeEntry, MODE_LINK, MODE_SUBMODULE};
use super::SourceError;

/// Folders never looked into for skills.
const SKIP_DIRS: [&str; 3] = [".git", "node_modules", "__pycache__"];
/// Deepest folder a skill is looked for in.
const MAX_SKILL_DEPTH: usize = 6;

/// The files of one fetched commit.
#[derive(Debug, Clone)]
pub struct FetchedTree {
    /// Entries by path.
    pub entries: BTreeMap<String, TreeEntry>,
}

impl FetchedTree {
    /// The tree from `git ls-tree`, refused when it holds more than `max_files` files.
    pub fn new(list: Vec<TreeEntry>, max_files: usize) -> Result<Self, SourceError> {
        if list.len() > max_files {
            return Err(SourceError::TooLarge {
                what: format!(
                    "the repository holds {} files, over {max_files}",
                    list.len()
                ),
                limit: "[skills.fetch] max_files",
            });
        }
        Ok(Self {
            entries: list.into_iter().map(|e| (e.path.clone(), e)).collect(),
        })
    }

    /// The folders under `within` (`""`: everywhere) that hold a `SKILL.md`, shallowest
    /// first; a skill's own subfolders are not looked into.
    pub fn skill_folders(&self, within: &str) -> Vec<String> {
        let prefix = folder_prefix(within);
        let mut found: Vec<String> = self
            .entries
            .keys()
            .filter_map(|p| p.strip_prefix(&prefix).map(|_| p))
            .filter_map(|p| {
                let folder = p.strip_suffix("SKILL.md")?;
                if !(folder.is_empty() || folder.ends_with('/')) {
                    return None;
                }
                let folder = folder.trim_end_matches('/').to_string();
                let skipped = folder.split('/').any(|seg| SKIP_DIRS.contains(&seg));
                let depth = folder.split('/').filter(|s| !s.is_empty()).count();
                (!skipped && depth <= MAX_SKILL_DEPTH).then_some(folder)
            })
            .collect();
        found.sort_by_key(|f| (f.split('/').count(), f.clone()));
        let mut kept: Vec<String> = Vec::new();
        for f in found {
            if !kept
                .iter()
                .any(|k| k.is_empty() || f.starts_with(&format!("{k}/")))
            {
                kept.push(f);
            }
        }
        kept
    }

    /// Whether `folder` holds anything.
    pub fn has_folder(&self, folder: &str) -> bool {
        let prefix = folder_prefix(folder);
        self.entries.keys().any(|p| p.starts_with(&prefix))
    }

    /// Writes the folder `folder` of the commit into `dest` (a new folder) from git's
    /// objects, after checking every entry: a submodule is refused, a link is refused when
    /// it leaves the repository and otherwise written as the file it names, a file over
    /// `max_file_bytes` is refused.
    pub fn write_folder(
        &self,
        git: &GitRunner,
        repo: &Path,
        folder: &str,
        dest: &Path,
        max_file_bytes: u64,
    ) -> Result<(), SourceError> {
        let prefix = folder_prefix(folder);
        let mut files: Vec<(String, u32, String)> = Vec::new();
        for (path, e) in self.entries.range(prefix.clone()..) {
            let Some(rel) = path.strip_prefix(&prefix) else {
                break;
            };
            match e.mode {
                MODE_SUBMODULE => {
                    return Err(SourceError::Submodule { path: path.clone() });
                }
                MODE_LINK => {
                    let target = self.link_target(git, repo, e)?;
                    files.push((rel.to_string(), target.mode, target.oid.clone()));
                    check_size(path, target.size, max_file_bytes)?;
                }
                _ => {
                    check_size(path, e.size, max_file_bytes)?;
                    files.push((rel.to_string(), e.mode, e.oid.clone()));
                }
            }
        }
        let oids: Vec<String> = files.iter().map(|(_, _, o)| o.clone()).collect();
        let blobs = git.read_blobs(repo, &oids)?;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dest)
            .map_err(|e| io(dest, e))?;
        for ((rel, mode, _), bytes) in files.iter().zip(blobs) {
            write_file(dest, rel, *mode, &bytes)?;
        }
        Ok(())
    }

    /// The file a link names, when it stays inside the repository and names a file.
    fn link_target(
        &self,
        git: &GitRunner,
        repo: &Path,
        link: &TreeEntry,
    ) -> Result<&TreeEntry, SourceError> {
        let raw = git.read_blobs(repo, std::slice::from_ref(&link.oid))?;
        let target = String::from_utf8_lossy(&raw[0]).into_owned();
        let out = || SourceError::LinkOut {
            path: link.path.clone(),
            target: target.clone(),
        };
        let parent = Path::new(&link.path).parent().unwrap_or(Path::new(""));
        let resolved = normalize(&parent.join(&target)).ok_or_else(out)?;
        match self.entries.get(&resolved) {
            Some(e) if e.mode != MODE_LINK && e.mode != MODE_SUBMODULE => Ok(e),
            _ => Err(SourceError::LinkTarget {
                path: link.path.clone(),
                target,
            }),
        }
    }
}

/// `folder/` (or `""` for the top).
fn folder_prefix(folder: &str) -> String {
    let f = folder.trim_matches('/');
    if f.is_empty() {
        String::new()
    } else {
        format!("{f}/")
    }
}

fn check_size(path: &str, size: u64, max: u64) -> Result<(), SourceError> {
    if size > max {
        return Err(SourceError::TooLarge {
            what: format!("{path} is {size} bytes, over {max}"),
            limit: "[skills.fetch] max_file_bytes",
        });
    }
    Ok(())
}

/// `a/b/../c` → `a/c`; `None` when it climbs above the top or is absolute.
fn normalize(p: &Path) -> Option<String> {
    let mut out: Vec<String> = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => out.push(s.to_str()?.to_string()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out.join("/"))
}

fn write_file(dest: &Path, rel: &str, mode: u32, bytes: &[u8]) -> Result<(), SourceError> {
    use std::io::Write;
    let path: PathBuf = dest.join(rel);
    if rel
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err(SourceError::Git {
            step: "ls-tree",
            message: format!("unsafe path {rel:?}"),
        });
    }
    if let Some(parent) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(parent)
            .map_err(|e| io(parent, e))?;
    }
    let perm = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(perm)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| io(&path, e))?;
    f.write_all(bytes).map_err(|e| io(&path, e))
}

fn io(path: &Path, source: std::io::Error) -> SourceError {
    SourceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(paths: &[&str]) -> FetchedTree {
        let list = paths
            .iter()
            .map(|p| TreeEntry {
                mode: 0o100644,
                oid: "0".repeat(40),
                size: 1,
                path: (*p).into(),
            })
            .collect();
        FetchedTree::new(list, 100).unwrap()
    }

    #[test]
    fn skill_folders_are_the_shallowest_with_a_skill_md() {
        let t = tree(&[
            "README.md",
            "skills/pdf/SKILL.md",
            "skills/pdf/inner/SKILL.md",
            "skills/xlsx/SKILL.md",
            "node_modules/x/SKILL.md",
            "skills/notes.SKILL.md",
        ]);
        assert_eq!(t.skill_folders(""), vec!["skills/pdf", "skills/xlsx"]);
        assert_eq!(t.skill_folders("skills/xlsx"), vec!["skills/xlsx"]);
        let top = tree(&["SKILL.md", "sub/SKILL.md"]);
        assert_eq!(top.skill_folders(""), vec![""]);
    }

    #[test]
    fn links_that_climb_out_do_not_normalize() {
        assert_eq!(normalize(Path::new("a/b/../c")).as_deref(), Some("a/c"));
        assert_eq!(normalize(Path::new("a/../../etc/passwd")), None);
        assert_eq!(normalize(Path::new("/etc/passwd")), None);
    }

    #[test]
    fn too_many_files_is_refused() {
        let list = vec![
            TreeEntry {
                mode: 0o100644,
                oid: "a".into(),
                size: 1,
                path: "a".into(),
            },
            TreeEntry {
                mode: 0o100644,
                oid: "b".into(),
                size: 1,
                path: "b".into(),
            },
        ];
        assert!(matches!(
            FetchedTree::new(list, 1),
            Err(SourceError::TooLarge { .. })
        ));
    }
}
