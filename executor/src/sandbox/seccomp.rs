//! The seccomp filters every tool process runs under.
//!
//! The policy is an allow list (default deny, as Firecracker's) kept as commented
//! seccompiler JSON in `policies/seccomp/tool.json` (embedded as [`POLICY_JSON`]). [`compile`]
//! turns it into BPF once, at startup; [`ToolFilters::apply`] installs the programs in a
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
//! seccompiler starts each program with an architecture check: a syscall made through the
//! i386 entry points (`int 0x80`, `sysenter`) reports `AUDIT_ARCH_I386` and kills the
//! process, so the 32-bit syscall table (different numbers, `socketcall`) is closed too.

use std::fmt;
use std::io;

use seccompiler::{BpfProgram, TargetArch};

/// The seccomp policy of tool processes, as reviewed: `policies/seccomp/tool.json`.
pub const POLICY_JSON: &str = include_str!("../../../policies/seccomp/tool.json");

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
    let allow = take(ALLOW_FILTER)?;
    let enosys = take(ENOSYS_FILTER)?;
    if let Some(name) = programs.into_keys().next() {
        return Err(SeccompError::UnknownFilter { name });
    }
    Ok(ToolFilters { allow, enosys })
}

impl ToolFilters {
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
mod tests {
    use std::collections::BTreeMap;

    use serde_json::Value;

    use super::*;

    /// Syscalls the allow list must never name, whatever the arguments: the deny list of the
    /// policy's first version, System V and POSIX IPC (objects that outlive a call and are
    /// shared by every call of a reused uid), and other host-wide or exploit-prone interfaces.
    const NEVER_ALLOWED: &[&str] = &[
        // Network: a tool has no network and may not reach host daemons over AF_UNIX.
        "socket",
        "connect",
        "bind",
        "listen",
        "accept",
        "accept4",
        // io_uring runs operations past seccomp.
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        // ptrace and its relatives.
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "pidfd_getfd",
        "kcmp",
        "process_madvise",
        // Kernel attack surface and side channels.
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "add_key",
        "request_key",
        "keyctl",
        // The mount table.
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
        // Namespaces.
        "unshare",
        "setns",
        // Host administration.
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
        "settimeofday",
        "clock_settime",
        "clock_adjtime",
        "adjtimex",
        "sethostname",
        "setdomainname",
        "quotactl",
        "nfsservctl",
        "vhangup",
        "sync",
        "syncfs",
        // System V IPC: objects outlive the call and a later call of the same uid reads them.
        "shmget",
        "shmat",
        "shmdt",
        "shmctl",
        "msgget",
        "msgsnd",
        "msgrcv",
        "msgctl",
        "semget",
        "semop",
        "semtimedop",
        "semctl",
        // POSIX message queues: the same, on the mqueue filesystem.
        "mq_open",
        "mq_unlink",
        "mq_timedsend",
        "mq_timedreceive",
        "mq_notify",
        "mq_getsetattr",
        // Asynchronous I/O contexts and NUMA policy: no tool needs them.
        "io_setup",
        "io_submit",
        "mbind",
        "set_mempolicy",
        "migrate_pages",
        "move_pages",
        "vmsplice",
    ];

    /// Syscalls the example tools (sh, python3, node) need, which must stay allowed.
    const NEEDED: &[&str] = &[
        "socketpair",
        "clone3",
        "fork",
        "vfork",
        "execve",
        "getpid",
        "read",
        "write",
        "openat",
        "mmap",
        "futex",
        "epoll_pwait",
        "rseq",
        "getrandom",
        "wait4",
    ];

    /// Syscalls allowed only when their mode argument (at this index) lacks the sticky bit.
    const NO_STICKY_BIT: &[(&str, u64)] = &[
        ("mkdir", 1),
        ("mkdirat", 2),
        ("chmod", 1),
        ("fchmod", 1),
        ("fchmodat", 2),
    ];

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

    fn named(rules: &[Value]) -> Vec<&str> {
        rules
            .iter()
            .map(|rule| rule["syscall"].as_str().unwrap())
            .collect()
    }

    fn unconditional(rules: &[Value]) -> Vec<&str> {
        rules
            .iter()
            .filter(|rule| rule.get("args").is_none())
            .map(|rule| rule["syscall"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn policy_compiles_into_two_programs() {
        let filters = compile().unwrap();
        assert!(filters.allow.len() > 200, "{filters:?}");
        assert!(filters.enosys.len() > 3, "{filters:?}");
    }

    #[test]
    fn policy_has_only_the_filters_the_executor_installs() {
        let policy = policy();
        let names: Vec<&String> = policy.as_object().unwrap().keys().collect();
        assert_eq!(names, [ALLOW_FILTER, ENOSYS_FILTER]);
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
    fn policy_denies_by_default_and_enosys_only_on_match() {
        let policy = policy();
        assert_eq!(
            policy[ALLOW_FILTER]["mismatch_action"]["errno"],
            libc::EPERM
        );
        assert_eq!(policy[ALLOW_FILTER]["match_action"], "allow");
        assert_eq!(policy[ENOSYS_FILTER]["mismatch_action"], "allow");
        assert_eq!(policy[ENOSYS_FILTER]["match_action"]["errno"], libc::ENOSYS);
    }

    #[test]
    fn policy_never_allows_the_denied_syscalls() {
        let policy = policy();
        let allowed = named(rules(&policy, ALLOW_FILTER));
        for syscall in NEVER_ALLOWED {
            assert!(
                !allowed.contains(syscall),
                "{syscall} must never be in {ALLOW_FILTER}"
            );
        }
        let unconditional = unconditional(rules(&policy, ALLOW_FILTER));
        for syscall in NEEDED {
            assert!(
                unconditional.contains(syscall),
                "{syscall} must stay allowed"
            );
        }
    }

    #[test]
    fn policy_allows_clone_only_without_namespace_flags() {
        let policy = policy();
        let clone_rules: Vec<&Value> = rules(&policy, ALLOW_FILTER)
            .iter()
            .filter(|rule| rule["syscall"] == "clone")
            .collect();
        assert_eq!(clone_rules.len(), 1);
        let args = clone_rules[0]["args"].as_array().unwrap();
        assert_eq!(args.len(), 1);
        assert_eq!(args[0]["index"], 0);
        assert_eq!(args[0]["val"], 0);
        let mask = args[0]["op"]["masked_eq"].as_i64().unwrap();
        for (name, flag) in CLONE_NAMESPACE_FLAGS {
            assert_ne!(mask & i64::from(*flag), 0, "{name} is not in clone's mask");
        }
    }

    #[test]
    fn policy_allows_modes_only_without_the_sticky_bit() {
        let policy = policy();
        for (syscall, index) in NO_STICKY_BIT {
            let found: Vec<&Value> = rules(&policy, ALLOW_FILTER)
                .iter()
                .filter(|rule| rule["syscall"] == *syscall)
                .collect();
            assert_eq!(found.len(), 1, "{syscall}");
            let args = found[0]["args"].as_array().unwrap();
            assert_eq!(args.len(), 1, "{syscall}");
            assert_eq!(args[0]["index"], *index, "{syscall}");
            assert_eq!(args[0]["op"]["masked_eq"], 0o1000, "{syscall}");
            assert_eq!(args[0]["val"], 0, "{syscall}");
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
    /// would be dropped and the syscall allowed only when a condition matches.
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
}
