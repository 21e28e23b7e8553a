//! The policy as written (`policies/seccomp/tool.json`) and as compiled.
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
    // The network variant allows `socket` (TCP and UDP over IP), `connect` and `bind`:
    // network_tests.rs.
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

/// The allow list as seccompiler compiles it: one linear chain.
fn linear_allow() -> BpfProgram {
    seccompiler::compile_from_json(POLICY_JSON.as_bytes(), TargetArch::x86_64)
        .unwrap()
        .remove(ALLOW_FILTER)
        .unwrap()
}

/// Argument values that the policy's conditions look at, and neighbours of them.
const PROBE_VALUES: &[u64] = &[
    0,
    1,
    0x200,
    0x1ff,
    0x3ff,
    0x5412,
    0x541c,
    0x5413,
    0x400000,
    0x20000,
    0x7e020080,
    0x10000000,
    0x80,
    0xffff_ffff,
    0x1_0000_0000,
    0xffff_ffff_ffff_ffff,
    0x0000_0001_0000_5412,
];

#[test]
fn search_tree_decides_every_syscall_as_the_linear_chain_does() {
    use super::bpf_eval::{run, Data};
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const AUDIT_ARCH_I386: u32 = 0x4000_0003;
    let linear = linear_allow();
    let tree = compile().unwrap().allow;
    let mut numbers: Vec<u32> = (0..=600).collect();
    // x32 numbers and the top of the range.
    numbers.extend([0x4000_0000, 0x4000_0001, 0x4000_0038, 0x4000_0200, u32::MAX]);
    let mut checked = 0;
    for arch in [AUDIT_ARCH_X86_64, AUDIT_ARCH_I386] {
        for &nr in &numbers {
            let mut cases = vec![[0u64; 6]];
            for index in 0..6 {
                for &v in PROBE_VALUES {
                    let mut args = [0u64; 6];
                    args[index] = v;
                    cases.push(args);
                }
            }
            for args in cases {
                let data = Data { nr, arch, args };
                assert_eq!(
                    run(&tree, &data),
                    run(&linear, &data),
                    "syscall {nr} arch {arch:#x} args {args:x?}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 100_000, "{checked}");
}

#[test]
fn search_tree_walks_a_short_path_to_every_syscall() {
    use super::bpf_eval::{run_counting, Data};
    let linear = linear_allow();
    let tree = compile().unwrap().allow;
    let longest = |program: &[seccompiler::sock_filter]| {
        (0..=600u32)
            .map(|nr| {
                let data = Data {
                    nr,
                    arch: 0xc000_003e,
                    args: [0; 6],
                };
                run_counting(program, &data).1
            })
            .max()
            .unwrap()
    };
    let (tree_walk, linear_walk) = (longest(&tree), longest(&linear));
    eprintln!(
        "tree: {} instructions, longest walk {tree_walk}; linear: {} instructions, longest walk {linear_walk}",
        tree.len(),
        linear.len()
    );
    // The kernel converts and JIT-compiles every instruction at install: runs of
    // unconditional syscalls make the tree much shorter than the chain.
    assert!(
        tree.len() * 2 < linear.len(),
        "{} vs {}",
        tree.len(),
        linear.len()
    );
    // Eight or nine comparisons and the longest syscall's rules, against the whole chain.
    assert!(tree_walk < 60, "tree: {tree_walk} instructions");
    assert!(
        linear_walk > 10 * tree_walk,
        "linear {linear_walk}, tree {tree_walk}"
    );
}
