//! The seccomp filters every tool process runs under.
//!
//! The policy is a deny list kept as commented seccompiler JSON in
//! `policies/seccomp/tool.json` (embedded as [`POLICY_JSON`]). [`compile`] turns it into BPF
//! once, at startup; [`ToolFilters::apply`] installs the programs in a forked child between
//! `fork` and `exec`, without allocating.
//!
//! A seccompiler filter has one action for every rule it matches and can only name syscalls,
//! so the policy is three BPF programs:
//!
//! - `tool_eperm` (JSON): the deny list proper; matched syscalls fail with `EPERM`.
//! - `tool_enosys` (JSON): `clone3` fails with `ENOSYS`, so libc falls back to `clone`, whose
//!   flags `tool_eperm` can inspect (`clone3` hides them in memory seccomp cannot read).
//! - the numeric program (built here): what needs syscall numbers rather than names, namely
//!   every x32 syscall (number with bit `0x4000_0000` set) and syscalls newer than
//!   seccompiler's name table; all fail with `EPERM`.
//!
//! Every program starts with an architecture check: a syscall made through the i386 entry
//! points (`int 0x80`, `sysenter`) reports `AUDIT_ARCH_I386` and kills the process, so the
//! 32-bit syscall table (different numbers, `socketcall`) cannot be used to slip past the
//! rules. When several programs match, the kernel takes the strictest action, and no two
//! programs return different errnos for the same syscall, so the order of installation does
//! not matter.

use std::fmt;
use std::io;

use seccompiler::{BpfProgram, SeccompAction, TargetArch};

/// The seccomp policy of tool processes, as reviewed: `policies/seccomp/tool.json`.
pub const POLICY_JSON: &str = include_str!("../../../policies/seccomp/tool.json");

/// Name in [`POLICY_JSON`] of the filter whose matched syscalls fail with `EPERM`.
pub const EPERM_FILTER: &str = "tool_eperm";

/// Name in [`POLICY_JSON`] of the filter whose matched syscalls fail with `ENOSYS`.
pub const ENOSYS_FILTER: &str = "tool_enosys";

/// Why the seccomp policy could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// The policy and the numeric program are written for x86_64 syscall numbers.
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
         move its rules into `{EPERM_FILTER}` or `{ENOSYS_FILTER}`"
    )]
    UnknownFilter {
        /// The unexpected filter name.
        name: String,
    },
}

/// The compiled seccomp programs of a tool process, ready to install.
pub struct ToolFilters {
    /// `tool_eperm` from the policy.
    eperm: BpfProgram,
    /// `tool_enosys` from the policy.
    enosys: BpfProgram,
    /// The numeric program built by [`numeric_program`].
    numeric: BpfProgram,
}

impl fmt::Debug for ToolFilters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolFilters")
            .field("eperm_instructions", &self.eperm.len())
            .field("enosys_instructions", &self.enosys.len())
            .field("numeric_instructions", &self.numeric.len())
            .finish()
    }
}

/// Compiles [`POLICY_JSON`] and the numeric program. Call once at startup.
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
    let eperm = take(EPERM_FILTER)?;
    let enosys = take(ENOSYS_FILTER)?;
    if let Some(name) = programs.into_keys().next() {
        return Err(SeccompError::UnknownFilter { name });
    }
    Ok(ToolFilters {
        eperm,
        enosys,
        numeric: numeric_program(),
    })
}

impl ToolFilters {
    /// Installs every program in the calling thread (no `TSYNC`: in the forked child it is the
    /// only thread).
    ///
    /// Async-signal-safe and allocation-free, so it may run between `fork` and `exec`:
    /// `seccompiler::apply_filter` (0.5) builds its `sock_fprog` on the stack over the
    /// already-compiled instructions, calls `prctl(PR_SET_NO_NEW_PRIVS)` (already set by the
    /// caller; setting it again is harmless) and `seccomp(SECCOMP_SET_MODE_FILTER)`, and
    /// reports failure as `io::Error::last_os_error()`, which holds only the errno. The
    /// integration tests check that no allocation happens.
    pub fn apply(&self) -> io::Result<()> {
        for program in [&self.numeric, &self.enosys, &self.eperm] {
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

// Classic BPF opcodes (linux/bpf_common.h) and seccomp_data offsets (linux/seccomp.h).
/// `BPF_LD (0x00) | BPF_W (0x00) | BPF_ABS (0x20)`: load a 32-bit word of `seccomp_data`.
const BPF_LD_W_ABS: u16 = 0x20;
/// `BPF_JMP (0x05) | BPF_JEQ (0x10) | BPF_K (0x00)`.
const BPF_JMP_JEQ_K: u16 = 0x15;
/// `BPF_JMP (0x05) | BPF_JGE (0x30) | BPF_K (0x00)`: unsigned `>=`.
const BPF_JMP_JGE_K: u16 = 0x35;
/// `BPF_RET (0x06) | BPF_K (0x00)`.
const BPF_RET_K: u16 = 0x06;
const SECCOMP_DATA_NR: u32 = 0;
const SECCOMP_DATA_ARCH: u32 = 4;
/// `EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE` (linux/audit.h).
const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
/// `__X32_SYSCALL_BIT`: the x32 ABI's syscalls are the x86_64 numbers with this bit set.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
/// `open_tree_attr` (Linux 6.15), absent from seccompiler 0.5's name table.
const SYS_OPEN_TREE_ATTR: u32 = 467;

fn statement(code: u16, k: u32) -> seccompiler::sock_filter {
    seccompiler::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> seccompiler::sock_filter {
    seccompiler::sock_filter { code, jt, jf, k }
}

/// The rules seccompiler's JSON cannot express, because they need syscall numbers:
///
/// - x32 syscalls (`nr >= 0x4000_0000`): the x32 ABI is a second syscall table for the same
///   x86_64 arch value, so `tool_eperm`'s name-based rules would not match them
///   (`x32 socket` has another number than `socket`). Denied with `EPERM` as a whole; no
///   tool is an x32 binary.
/// - `open_tree_attr` (467): clones a mount tree like `open_tree`, which `tool_eperm` denies.
///
/// Add a number here only when seccompiler's table lacks the syscall's name.
fn numeric_program() -> BpfProgram {
    let eperm = u32::from(SeccompAction::Errno(libc::EPERM.unsigned_abs()));
    vec![
        statement(BPF_LD_W_ABS, SECCOMP_DATA_ARCH),
        jump(BPF_JMP_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        // i386 entry points (int 0x80, sysenter) and any other arch: kill, as seccompiler does.
        statement(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        statement(BPF_LD_W_ABS, SECCOMP_DATA_NR),
        jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 2, 0),
        jump(BPF_JMP_JEQ_K, SYS_OPEN_TREE_ATTR, 1, 0),
        statement(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
        statement(BPF_RET_K, eperm),
    ]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::Value;

    use super::*;

    /// Syscalls `tool_eperm` must deny whatever their arguments.
    const DENIED_UNCONDITIONALLY: &[&str] = &[
        "socket",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "pidfd_getfd",
        "kcmp",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "add_key",
        "request_key",
        "keyctl",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "move_mount",
        "open_tree",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
        "unshare",
        "setns",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "reboot",
        "swapon",
        "swapoff",
        "acct",
        "iopl",
        "ioperm",
        "name_to_handle_at",
        "open_by_handle_at",
        "lookup_dcookie",
        "syslog",
        "uselib",
    ];

    /// Syscalls that must stay allowed (they are near neighbours of denied ones).
    const NEVER_DENIED: &[&str] = &["socketpair", "clone", "fork", "vfork", "execve", "getpid"];

    const CLONE_NAMESPACE_FLAGS: &[(&str, i32)] = &[
        ("CLONE_NEWNS", libc::CLONE_NEWNS),
        ("CLONE_NEWUTS", libc::CLONE_NEWUTS),
        ("CLONE_NEWIPC", libc::CLONE_NEWIPC),
        ("CLONE_NEWUSER", libc::CLONE_NEWUSER),
        ("CLONE_NEWPID", libc::CLONE_NEWPID),
        ("CLONE_NEWNET", libc::CLONE_NEWNET),
        ("CLONE_NEWCGROUP", libc::CLONE_NEWCGROUP),
        ("CLONE_NEWTIME", libc::CLONE_NEWTIME),
    ];

    fn policy() -> Value {
        serde_json::from_str(POLICY_JSON).unwrap()
    }

    fn rules<'a>(policy: &'a Value, filter: &str) -> &'a [Value] {
        policy[filter]["filter"].as_array().unwrap()
    }

    fn unconditional(rules: &[Value]) -> Vec<&str> {
        rules
            .iter()
            .filter(|rule| rule.get("args").is_none())
            .map(|rule| rule["syscall"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn policy_compiles_into_three_programs() {
        let filters = compile().unwrap();
        assert!(filters.eperm.len() > 3, "{filters:?}");
        assert!(filters.enosys.len() > 3, "{filters:?}");
        assert_eq!(filters.numeric.len(), 8, "{filters:?}");
    }

    #[test]
    fn policy_has_only_the_filters_the_executor_installs() {
        let policy = policy();
        let names: Vec<&String> = policy.as_object().unwrap().keys().collect();
        assert_eq!(names, [ENOSYS_FILTER, EPERM_FILTER]);
    }

    #[test]
    fn policy_rule_without_comment_is_absent() {
        let policy = policy();
        for (name, filter) in policy.as_object().unwrap() {
            for rule in filter["filter"].as_array().unwrap() {
                let comment = rule["comment"].as_str().unwrap_or_default();
                assert!(
                    !comment.trim().is_empty(),
                    "{name}: rule without comment: {rule}"
                );
                for condition in rule
                    .get("args")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let comment = condition["comment"].as_str().unwrap_or_default();
                    assert!(
                        !comment.trim().is_empty(),
                        "{name}: condition without comment: {rule}"
                    );
                }
            }
        }
    }

    #[test]
    fn policy_actions_are_allow_by_default_and_the_documented_errno() {
        let policy = policy();
        for (name, errno) in [(EPERM_FILTER, libc::EPERM), (ENOSYS_FILTER, libc::ENOSYS)] {
            assert_eq!(policy[name]["mismatch_action"], "allow", "{name}");
            assert_eq!(policy[name]["match_action"]["errno"], errno, "{name}");
        }
    }

    #[test]
    fn policy_denies_the_listed_syscalls_unconditionally() {
        let policy = policy();
        let denied = unconditional(rules(&policy, EPERM_FILTER));
        for syscall in DENIED_UNCONDITIONALLY {
            assert!(
                denied.contains(syscall),
                "{syscall} is not denied by {EPERM_FILTER}"
            );
        }
        for syscall in NEVER_DENIED {
            assert!(!denied.contains(syscall), "{syscall} must stay allowed");
        }
    }

    #[test]
    fn policy_denies_clone_with_each_namespace_flag() {
        let policy = policy();
        let clone_rules: Vec<&Value> = rules(&policy, EPERM_FILTER)
            .iter()
            .filter(|rule| rule["syscall"] == "clone")
            .collect();
        for (name, flag) in CLONE_NAMESPACE_FLAGS {
            let found = clone_rules.iter().any(|rule| {
                let args = rule["args"].as_array().unwrap();
                args.len() == 1
                    && args[0]["index"] == 0
                    && args[0]["op"]["masked_eq"] == *flag
                    && args[0]["val"] == *flag
            });
            assert!(found, "no masked_eq rule for {name} on clone's flags");
        }
    }

    #[test]
    fn policy_makes_clone3_fail_with_enosys() {
        let policy = policy();
        let rules = rules(&policy, ENOSYS_FILTER);
        assert_eq!(unconditional(rules), ["clone3"]);
        assert_eq!(rules.len(), 1);
    }

    /// seccompiler merges a syscall's rules: one unconditional entry next to conditional ones
    /// would be dropped and the syscall denied only when a condition matches.
    #[test]
    fn policy_unconditional_rule_is_not_mixed_with_conditional_ones() {
        let policy = policy();
        for (name, filter) in policy.as_object().unwrap() {
            let mut seen: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
            for rule in filter["filter"].as_array().unwrap() {
                let counts = seen.entry(rule["syscall"].as_str().unwrap()).or_default();
                if rule.get("args").is_some() {
                    counts.1 += 1;
                } else {
                    counts.0 += 1;
                }
            }
            for (syscall, (plain, conditional)) in seen {
                assert!(
                    plain == 0 || (plain == 1 && conditional == 0),
                    "{name}: {syscall} has {plain} unconditional and {conditional} conditional rules"
                );
            }
        }
    }

    #[test]
    fn numeric_program_checks_the_arch_before_the_number() {
        let program = numeric_program();
        assert_eq!(program[0], statement(BPF_LD_W_ABS, SECCOMP_DATA_ARCH));
        assert_eq!(program[2].k, libc::SECCOMP_RET_KILL_PROCESS);
        assert_eq!(program[7].k, libc::SECCOMP_RET_ERRNO | 1);
        // Every jump lands inside the program and the program ends with a return.
        for (at, instruction) in program.iter().enumerate() {
            if instruction.code & 0x07 == 0x05 {
                let target = at + 1 + usize::from(instruction.jt.max(instruction.jf));
                assert!(target < program.len(), "jump at {at} leaves the program");
            }
        }
        assert_eq!(program.last().map(|last| last.code), Some(BPF_RET_K));
    }
}
