//! The seccomp filter `serve` puts on itself once its start-up mounts are done
//! (`policies/seccomp/executor.json`): a deny list over what the executor's capabilities
//! would otherwise allow and it never uses after start. In a container given `SYS_ADMIN`
//! for the calls' network namespaces, the mount API is the first of these: a process of
//! the executor could remount the read-only root writable, unmask what Docker hides in
//! `/proc`, or mount a cgroup v1 hierarchy whose `release_agent` the host runs as root.
//! The filter holds for every thread and every process the executor starts (tools stack
//! their own allow list on it), and nothing can lift it. `unshare` (a call's network
//! namespace) and `setns` (a tool joining it) stay allowed.

use seccompiler::{BpfProgram, TargetArch};

/// The policy, as reviewed.
pub(crate) const POLICY_JSON: &str = include_str!("../../policies/seccomp/executor.json");
/// Its one filter.
const FILTER: &str = "executor_deny";

/// Why the filter could not be put on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SelfFilterError {
    /// No seccomp target for this CPU.
    #[error("no seccomp target for {0}")]
    Arch(&'static str),
    /// The policy did not compile.
    #[error("policies/seccomp/executor.json does not compile: {0}")]
    Compile(String),
    /// The policy lacks its filter.
    #[error("policies/seccomp/executor.json has no filter {FILTER}")]
    Missing,
    /// The kernel refused it.
    #[error("installing the executor's own seccomp filter: {0}")]
    Install(String),
}

/// The compiled filter.
pub(crate) fn compile() -> Result<BpfProgram, SelfFilterError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SelfFilterError::Arch(std::env::consts::ARCH))?;
    let mut programs = seccompiler::compile_from_json(POLICY_JSON.as_bytes(), arch)
        .map_err(|e| SelfFilterError::Compile(e.to_string()))?;
    programs.remove(FILTER).ok_or(SelfFilterError::Missing)
}

/// Puts the filter on every thread of this process (called while there is one).
pub(crate) fn apply() -> Result<(), SelfFilterError> {
    let program = compile()?;
    seccompiler::apply_filter_all_threads(&program)
        .map_err(|e| SelfFilterError::Install(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_executors_own_policy_compiles_and_names_the_mount_api() {
        let program = compile().unwrap();
        assert!(!program.is_empty());
        let policy: serde_json::Value = serde_json::from_str(POLICY_JSON).unwrap();
        let denied: Vec<&str> = policy[FILTER]["filter"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                assert!(f["comment"].as_str().is_some_and(|c| !c.is_empty()));
                f["syscall"].as_str().unwrap()
            })
            .collect();
        for needed in [
            "mount",
            "umount2",
            "fsopen",
            "move_mount",
            "open_tree",
            "bpf",
        ] {
            assert!(denied.contains(&needed), "{needed} is not denied");
        }
        for kept in ["unshare", "setns", "clone", "kill", "setresuid"] {
            assert!(!denied.contains(&kept), "{kept} is needed by the executor");
        }
    }
}
