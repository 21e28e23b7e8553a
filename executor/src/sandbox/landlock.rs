//! The Landlock ruleset of one call: read+execute on the skill folder and the runtime
//! paths of `policies/sandbox/runtime-paths.txt`, full access to the scratch dir, no TCP
//! bind or connect, and abstract UNIX sockets and signals scoped to the sandbox where the
//! kernel offers it (ABI 6). Created in the parent; enforced in the child.

use std::path::{Path, PathBuf};

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, RestrictionStatus,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
    ABI,
};

/// The newest ABI whose rights we ask for; older kernels get what they support (the
/// probe refuses kernels below [`super::probe::MIN_LANDLOCK_ABI`]).
const TARGET_ABI: ABI = ABI::V6;

/// The runtime paths policy, embedded at build time.
pub const RUNTIME_PATHS_POLICY: &str = include_str!("../../../policies/sandbox/runtime-paths.txt");

/// Why the ruleset could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    /// The kernel refused a step of building the ruleset.
    #[error("building the Landlock ruleset failed: {source}")]
    Build {
        /// The crate's error.
        #[from]
        source: RulesetError,
    },
}

/// Paths of the runtime policy, comments stripped.
pub fn runtime_paths() -> Vec<PathBuf> {
    RUNTIME_PATHS_POLICY
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect()
}

/// Builds the ruleset of one call. Paths that do not exist are skipped.
pub fn build(
    skill_dir: &Path,
    scratch_dir: &Path,
    runtime: &[PathBuf],
) -> Result<RulesetCreated, LandlockError> {
    let read_exec = AccessFs::from_read(TARGET_ABI);
    let all = AccessFs::from_all(TARGET_ABI);
    let mut read_paths: Vec<&Path> = runtime
        .iter()
        .map(PathBuf::as_path)
        .filter(|p| p.exists())
        .collect();
    read_paths.push(skill_dir);
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .handle_access(AccessNet::from_all(TARGET_ABI))?
        .scope(Scope::from_all(TARGET_ABI))?
        .create()?
        .add_rules(path_beneath_rules(read_paths, read_exec))?
        .add_rules(path_beneath_rules([scratch_dir], all))?;
    Ok(ruleset)
}

/// Whether a restriction status is acceptable: enforced, fully or partially (a partial
/// enforcement on a kernel at or above the minimum ABI lacks only newer rights).
pub fn is_enforced(status: &RestrictionStatus) -> bool {
    !matches!(status.ruleset, RulesetStatus::NotEnforced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_policy_parses_and_excludes_secrets() {
        let paths = runtime_paths();
        assert!(paths.contains(&PathBuf::from("/usr")));
        for forbidden in [
            "/etc",
            "/root",
            "/home",
            "/tmp",
            "/etc/shadow",
            "/var",
            "/dev",
            "/run",
        ] {
            assert!(
                !paths.contains(&PathBuf::from(forbidden)),
                "{forbidden} must not be granted"
            );
        }
    }
}
