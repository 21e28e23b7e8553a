//! The seccomp filters every tool process runs under.
//!
//! The policy is an allow list (default deny, as Firecracker's) kept as commented
//! seccompiler JSON in `policies/seccomp/tool.json` (embedded as [`POLICY_JSON`]). [`compile`]
//! turns it into BPF once, at startup — the allow list as a binary search over syscall
//! numbers built from seccompiler's per-syscall code ([`search_tree`]), so that installing
//! it stays cheap; [`ToolFilters::apply`] installs the programs in a
//! forked child between `fork` and `exec`, without allocating.
//!
//! A seccompiler filter has one action for every rule it matches, so the policy is two BPF
//! programs:
//!
//! - `tool_allow`: the allow list proper. A syscall it names runs (some only with the
//!   arguments a rule allows: `clone` without namespace flags, `ioctl` without the terminal
//!   injection requests, `personality` without `READ_IMPLIES_EXEC`); every other syscall
//!   fails with `EPERM`, including syscalls newer than the policy and every x32 syscall
//!   (their numbers carry bit `0x4000_0000`, so no rule matches them).
//! - `tool_enosys`: `clone3` fails with `ENOSYS`, so libc falls back to `clone`, whose flags
//!   `tool_allow` can inspect (`clone3` hides them in memory seccomp cannot read).
//!   `tool_allow` lists `clone3` so that this filter alone decides it: when two filters return
//!   errors the kernel keeps the last installed one's, and the result must not depend on
//!   the order.
//!
//! A call in a network namespace of its own (a skill that declares `permissions.network`,
//! or asks for a loopback of its own, docs/sandbox.md) runs under a third program instead
//! of `tool_allow`: `tool_network_allow`, the same allow list plus the rules of
//! `policies/seccomp/tool-network.json` ([`NETWORK_POLICY_JSON`]: `socket` for TCP and UDP
//! over IPv4 and IPv6 only, `connect`, `bind`, `listen`, `accept`), compiled by
//! [`compile_network`]. A filter can only narrow what an earlier one allows, so the
//! variant is a whole allow list, not a filter stacked on the first. Such a process is in
//! a network namespace of its own ([`super::netns`]) and installs its filters itself
//! ([`super::child::Seccomp::Install`]): see `Sandbox::prepare` for why it is not cloned
//! from a spawner thread.
//!
//! seccompiler starts each program with an architecture check: a syscall made through the
//! i386 entry points (`int 0x80`, `sysenter`) reports `AUDIT_ARCH_I386` and kills the
//! process, so the 32-bit syscall table (different numbers, `socketcall`) is closed too.

use std::fmt;
use std::io;

use seccompiler::{BpfProgram, TargetArch};

mod search_tree;

/// The seccomp policy of tool processes, as reviewed: `policies/seccomp/tool.json`.
pub const POLICY_JSON: &str = include_str!("../../../../policies/seccomp/tool.json");

/// The rules a network call's allow list adds to `tool_allow`:
/// `policies/seccomp/tool-network.json`.
pub const NETWORK_POLICY_JSON: &str =
    include_str!("../../../../policies/seccomp/tool-network.json");

/// The rules a call with UNIX sockets adds to the network call's list:
/// `policies/seccomp/tool-unix.json` (`socket` for `AF_UNIX`; such a call always has a
/// network namespace and a mount namespace of its own).
pub const UNIX_POLICY_JSON: &str = include_str!("../../../../policies/seccomp/tool-unix.json");

/// Name in [`NETWORK_POLICY_JSON`] of the added rules, and of the network call's allow list
/// made of `tool_allow` and them.
pub const NETWORK_FILTER: &str = "tool_network_allow";

/// Name in [`POLICY_JSON`] of the allow list (every other syscall fails with `EPERM`).
pub const ALLOW_FILTER: &str = "tool_allow";

/// Name in [`POLICY_JSON`] of the filter whose matched syscalls fail with `ENOSYS`.
pub const ENOSYS_FILTER: &str = "tool_enosys";

/// Why the seccomp policy could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// The policy is written for x86_64 syscall names and numbers.
    #[error(
        "the seccomp policy only targets x86_64, not {arch}; run the executor on x86_64 Linux"
    )]
    UnsupportedArch {
        /// The architecture the executor was built for.
        arch: &'static str,
    },
    /// seccompiler rejected `policies/seccomp/tool.json` (bad JSON, unknown syscall name,
    /// invalid condition, filter too long).
    #[error(
        "compiling the seccomp policy policies/seccomp/tool.json failed ({source}); fix the file"
    )]
    CompilePolicy {
        /// What seccompiler reported.
        #[source]
        source: seccompiler::Error,
    },
    /// seccompiler's output no longer has the shape the search tree is built from
    /// (search_tree.rs); a seccompiler upgrade would do this.
    #[error(
        "building the seccomp search tree failed: seccompiler produced {what}; keep seccompiler at 0.5 or update executor/src/sandbox/seccomp/search_tree.rs"
    )]
    UnexpectedShape {
        /// What was found instead of the expected shape.
        what: &'static str,
    },
    /// `policies/seccomp/tool-network.json` is not one filter [`NETWORK_FILTER`] with the
    /// actions of `tool_allow` and a list of rules.
    #[error(
        "policies/seccomp/tool-network.json and tool-unix.json must each hold exactly one filter with the actions of `{ALLOW_FILTER}` and a `filter` list of rules; fix the file"
    )]
    NetworkRules,
    /// A filter the executor installs is absent from the policy.
    #[error(
        "the seccomp policy has no filter named `{name}`; add it to policies/seccomp/tool.json"
    )]
    MissingFilter {
        /// The filter name the executor looked for.
        name: &'static str,
    },
    /// The policy names a filter the executor would never install, so its rules would
    /// silently not apply.
    #[error(
        "the seccomp policy has a filter named `{name}` that the executor does not install; \
         move its rules into `{ALLOW_FILTER}` or `{ENOSYS_FILTER}`"
    )]
    UnknownFilter {
        /// The unexpected filter name.
        name: String,
    },
}

/// The compiled seccomp programs of a tool process, ready to install.
pub struct ToolFilters {
    /// `tool_allow` from the policy.
    allow: BpfProgram,
    /// `tool_enosys` from the policy.
    enosys: BpfProgram,
}

impl fmt::Debug for ToolFilters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolFilters")
            .field("allow_instructions", &self.allow.len())
            .field("enosys_instructions", &self.enosys.len())
            .finish()
    }
}

/// Compiles [`POLICY_JSON`]. Call once at startup.
pub fn compile() -> Result<ToolFilters, SeccompError> {
    if !cfg!(target_arch = "x86_64") {
        return Err(SeccompError::UnsupportedArch {
            arch: std::env::consts::ARCH,
        });
    }
    let mut programs = seccompiler::compile_from_json(POLICY_JSON.as_bytes(), TargetArch::x86_64)
        .map_err(|source| SeccompError::CompilePolicy { source })?;
    let mut take = |name: &'static str| {
        programs
            .remove(name)
            .ok_or(SeccompError::MissingFilter { name })
    };
    // The linear program seccompiler makes of the allow list is replaced by a search tree
    // of the same rules (search_tree.rs); compiling it above still checks the whole policy.
    take(ALLOW_FILTER)?;
    let enosys = take(ENOSYS_FILTER)?;
    if let Some(name) = programs.into_keys().next() {
        return Err(SeccompError::UnknownFilter { name });
    }
    let policy: serde_json::Value =
        serde_json::from_str(POLICY_JSON).map_err(|_| SeccompError::UnexpectedShape {
            what: "a policy seccompiler reads but serde_json does not",
        })?;
    let allow = search_tree::compile(&policy, ALLOW_FILTER)?;
    Ok(ToolFilters { allow, enosys })
}

/// The policy of a network call: [`POLICY_JSON`] with `tool_allow` replaced by
/// [`NETWORK_FILTER`], its rules followed by those of [`NETWORK_POLICY_JSON`].
pub fn network_policy() -> Result<serde_json::Value, SeccompError> {
    policy_with(&[NETWORK_POLICY_JSON])
}

/// The policy of a call with UNIX sockets: [`network_policy`] plus the rules of
/// [`UNIX_POLICY_JSON`], under the name [`NETWORK_FILTER`].
pub fn unix_policy() -> Result<serde_json::Value, SeccompError> {
    policy_with(&[NETWORK_POLICY_JSON, UNIX_POLICY_JSON])
}

/// [`POLICY_JSON`] with `tool_allow` renamed [`NETWORK_FILTER`] and the rules of each of
/// `additions` (a file of one filter with `tool_allow`'s actions) appended to it.
fn policy_with(additions: &[&str]) -> Result<serde_json::Value, SeccompError> {
    use serde_json::Value;
    let parse = |text: &str| serde_json::from_str::<Value>(text).ok();
    let mut policy = parse(POLICY_JSON).ok_or(SeccompError::NetworkRules)?;
    let filters = policy.as_object_mut().ok_or(SeccompError::NetworkRules)?;
    let mut allow = filters
        .remove(ALLOW_FILTER)
        .ok_or(SeccompError::MissingFilter { name: ALLOW_FILTER })?;
    for addition in additions {
        let mut added = parse(addition).ok_or(SeccompError::NetworkRules)?;
        let added_filters = added.as_object_mut().ok_or(SeccompError::NetworkRules)?;
        if added_filters.len() != 1 {
            return Err(SeccompError::NetworkRules);
        }
        let Some((_, mut extra)) = std::mem::take(added_filters).into_iter().next() else {
            return Err(SeccompError::NetworkRules);
        };
        for action in ["mismatch_action", "match_action"] {
            if allow.get(action) != extra.get(action) {
                return Err(SeccompError::NetworkRules);
            }
        }
        let rules = (extra.get_mut("filter").and_then(Value::as_array_mut))
            .ok_or(SeccompError::NetworkRules)?;
        let rules = std::mem::take(rules);
        (allow.get_mut("filter").and_then(Value::as_array_mut))
            .ok_or(SeccompError::MissingFilter { name: ALLOW_FILTER })?
            .extend(rules);
    }
    filters.insert(NETWORK_FILTER.to_string(), allow);
    Ok(policy)
}

/// Compiles the filters of a network call ([`network_policy`]), checked by seccompiler as
/// [`compile`] checks the tool policy. Call once at startup.
pub fn compile_network() -> Result<ToolFilters, SeccompError> {
    compile_variant(network_policy()?)
}

/// Compiles the filters of a call with UNIX sockets ([`unix_policy`]). Call once at
/// startup.
pub fn compile_unix() -> Result<ToolFilters, SeccompError> {
    compile_variant(unix_policy()?)
}

fn compile_variant(policy: serde_json::Value) -> Result<ToolFilters, SeccompError> {
    if !cfg!(target_arch = "x86_64") {
        return Err(SeccompError::UnsupportedArch {
            arch: std::env::consts::ARCH,
        });
    }
    let text = policy.to_string();
    let mut programs = seccompiler::compile_from_json(text.as_bytes(), TargetArch::x86_64)
        .map_err(|source| SeccompError::CompilePolicy { source })?;
    let mut take = |name: &'static str| {
        programs
            .remove(name)
            .ok_or(SeccompError::MissingFilter { name })
    };
    take(NETWORK_FILTER)?;
    let enosys = take(ENOSYS_FILTER)?;
    if let Some(name) = programs.into_keys().next() {
        return Err(SeccompError::UnknownFilter { name });
    }
    let allow = search_tree::compile(&policy, NETWORK_FILTER)?;
    Ok(ToolFilters { allow, enosys })
}

impl ToolFilters {
    /// The programs in the order [`ToolFilters::apply`] installs them: `tool_enosys`, then
    /// `tool_allow` (benchmarks install them themselves).
    pub fn programs(&self) -> [&BpfProgram; 2] {
        [&self.enosys, &self.allow]
    }

    /// Installs both programs in the calling thread (no `TSYNC`: in the forked child it is
    /// the only thread).
    ///
    /// Async-signal-safe and allocation-free, so it may run between `fork` and `exec`:
    /// `seccompiler::apply_filter` (0.5) builds its `sock_fprog` on the stack over the
    /// already-compiled instructions, calls `prctl(PR_SET_NO_NEW_PRIVS)` (already set by the
    /// caller; setting it again is harmless) and `seccomp(SECCOMP_SET_MODE_FILTER)`, and
    /// reports failure as `io::Error::last_os_error()`, which holds only the errno. The
    /// integration tests check that no allocation happens.
    pub fn apply(&self) -> io::Result<()> {
        for program in [&self.enosys, &self.allow] {
            seccompiler::apply_filter(program).map_err(|error| match error {
                seccompiler::Error::Prctl(os) | seccompiler::Error::Seccomp(os) => os,
                // EmptyFilter cannot happen (every program starts with the arch check), nor can
                // ThreadSync (no TSYNC) or the compile-time variants.
                _ => io::Error::from_raw_os_error(libc::EINVAL),
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod bpf_eval;
#[cfg(test)]
mod network_tests;
#[cfg(test)]
mod tests;
