//! Where a build's output is assembled and kept: a stage folder beside the environments
//! (`<scratch root>/.deps/.build-<id>`, the same file system as the installers' scratch
//! folders, so each installer's output is moved in by a rename: pip's `env` as the stage,
//! npm's `node_modules` into it), then sealed read-only with its lock and moved in place
//! as `<digest>/`. A stage not kept is removed.

use std::path::{Path, PathBuf};

use skillbox_protocol::methods::LockedPackage;

use super::{npm, pip, DepsError, LOCK_FILE, SKILL_FILE};

/// An environment being assembled.
#[derive(Debug)]
pub(super) struct Stage {
    path: PathBuf,
    kept: bool,
}

fn keep_err(what: &str, e: std::io::Error) -> DepsError {
    DepsError::Keep(format!("{what}: {e}"))
}

impl Stage {
    /// A stage for the build `call_id` in the environments' folder `root`.
    pub(super) fn new(root: &Path, call_id: &str) -> Result<Self, DepsError> {
        let id: String = (call_id.chars())
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        std::fs::create_dir_all(root).map_err(|e| keep_err("the dependencies folder", e))?;
        let stage = Self {
            path: root.join(format!(".build-{id}")),
            kept: false,
        };
        stage.clear();
        Ok(stage)
    }

    /// Takes pip's environment out of its scratch folder as the stage: the packages pip
    /// reported.
    pub(super) fn take_python(&self, scratch: &Path) -> Result<Vec<LockedPackage>, DepsError> {
        let report =
            std::fs::read(scratch.join(pip::REPORT)).map_err(|e| keep_err("pip's report", e))?;
        let packages = pip::packages_of(&report).map_err(DepsError::Keep)?;
        let env = scratch.join(pip::TARGET);
        std::fs::create_dir_all(&env).map_err(|e| keep_err("the environment", e))?;
        std::fs::rename(&env, &self.path).map_err(|e| keep_err("taking pip's environment", e))?;
        Ok(packages)
    }

    /// Takes npm's `node_modules` out of its scratch folder into the stage: the packages
    /// npm recorded.
    pub(super) fn take_node(&self, scratch: &Path) -> Result<Vec<LockedPackage>, DepsError> {
        let packages = npm::packages_in(scratch).map_err(DepsError::Keep)?;
        std::fs::create_dir_all(&self.path).map_err(|e| keep_err("the environment", e))?;
        let modules = scratch.join(npm::MODULES);
        let to = self.path.join(npm::MODULES);
        std::fs::create_dir_all(&modules).map_err(|e| keep_err("node_modules", e))?;
        std::fs::rename(&modules, to).map_err(|e| keep_err("taking npm's node_modules", e))?;
        Ok(packages)
    }

    /// Seals the stage read-only with its lock (`packages`), owned by the executor, and
    /// moves it in place as `dir`; then removes the skill's other environments.
    pub(super) fn keep(
        mut self,
        dir: &Path,
        skill: &str,
        packages: &[LockedPackage],
    ) -> Result<(), DepsError> {
        let env = &self.path;
        std::fs::create_dir_all(env).map_err(|e| keep_err("the environment", e))?;
        let lock =
            serde_json::to_vec_pretty(packages).map_err(|e| DepsError::Keep(e.to_string()))?;
        std::fs::write(env.join(LOCK_FILE), lock).map_err(|e| keep_err("its lock", e))?;
        std::fs::write(env.join(SKILL_FILE), skill).map_err(|e| keep_err("its skill name", e))?;
        seal(env).map_err(|e| keep_err("making it read-only", e))?;
        match std::fs::rename(env, dir) {
            Ok(()) => self.kept = true,
            // Another build of the same digest got there first: it is the same environment.
            Err(_) if dir.join(LOCK_FILE).is_file() => {}
            Err(e) => return Err(keep_err("moving it in place", e)),
        }
        remove_others(dir.parent().unwrap_or(dir), dir, skill);
        Ok(())
    }

    /// Removes what is staged (owned by the installers' user ids: made the executor's
    /// first).
    fn clear(&self) {
        if std::fs::symlink_metadata(&self.path).is_ok() {
            let _ = seal(&self.path);
            if let Err(e) = std::fs::remove_dir_all(&self.path) {
                tracing::warn!(path = %self.path.display(), error = %e, "dependency stage not removed");
            }
        }
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        if !self.kept {
            self.clear();
        }
    }
}

/// Every file and folder under `dir`: owned by this process's user, writable by it only.
fn seal(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let (uid, gid) = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path)?;
        std::os::unix::fs::lchown(&path, Some(uid), Some(gid))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let exec = meta.permissions().mode() & 0o111 != 0;
        let mode = if meta.is_dir() || exec { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                stack.push(entry?.path());
            }
        }
    }
    Ok(())
}

/// Removes the environments of `skill` other than `keep`.
fn remove_others(root: &Path, keep: &Path, skill: &str) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path == keep {
            continue;
        }
        let owner = std::fs::read_to_string(path.join(SKILL_FILE)).unwrap_or_default();
        if owner == skill {
            if let Err(e) = std::fs::remove_dir_all(&path) {
                tracing::warn!(path = %path.display(), error = %e, "old dependencies not removed");
            }
        }
    }
}
