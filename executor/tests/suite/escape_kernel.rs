//! Kernel-surface escapes: io_uring, namespaces, ptrace and signals against the executor,
//! and the process's own credentials (no capabilities, no_new_privs, seccomp filter mode).

use serde_json::json;

use super::harness::{assert_errno, running_as_root, SkillRoot};

#[test]
fn sandbox_blocks_io_uring_setup() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
        reply({"setup": attempt(lambda: libc_call("syscall", 425, 8, params))})
        "#,
    );
    let outcome = root.call("attack:run").run();
    assert_errno(&outcome.data()["setup"], libc::EPERM, "io_uring_setup(8)");
}

#[test]
fn sandbox_blocks_unshare_user_namespace() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWNS = 0x10000000, 0x40000000, 0x00020000
        reply({
            "user": attempt(lambda: libc_call("unshare", CLONE_NEWUSER)),
            "user_net_ns": attempt(lambda: libc_call("unshare", CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS)),
        })
        "#,
    );
    let outcome = root.call("attack:run").run();
    let data = outcome.data();
    // Unprivileged users may create user namespaces on this kernel; EPERM is the filter's.
    assert_errno(&data["user"], libc::EPERM, "unshare(CLONE_NEWUSER)");
    assert_errno(
        &data["user_net_ns"],
        libc::EPERM,
        "unshare(NEWUSER|NEWNET|NEWNS)",
    );
}

#[test]
fn sandbox_blocks_ptrace_attach_to_executor() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
        _libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        _libc.ptrace.restype = ctypes.c_long
        ppid = os.getppid()
        reply({
            "ppid": ppid,
            "attach": attempt(lambda: libc_call("ptrace", PTRACE_ATTACH, ppid, None, None)),
            "seize": attempt(lambda: libc_call("ptrace", PTRACE_SEIZE, ppid, None, None)),
        })
        "#,
    );
    let outcome = root.call("attack:run").run();
    let data = outcome.data();
    assert_eq!(data["ppid"], json!(outcome.executor_pid));
    assert_errno(
        &data["attach"],
        libc::EPERM,
        "ptrace(PTRACE_ATTACH, executor)",
    );
    assert_errno(
        &data["seize"],
        libc::EPERM,
        "ptrace(PTRACE_SEIZE, executor)",
    );
}

#[test]
fn sandbox_blocks_signalling_executor() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        ppid = os.getppid()
        reply({
            "ppid": ppid,
            "term": attempt(lambda: os.kill(ppid, signal.SIGTERM)),
            "kill": attempt(lambda: os.kill(ppid, signal.SIGKILL)),
            "group": attempt(lambda: os.killpg(os.getpgid(ppid), signal.SIGKILL)),
            "init": attempt(lambda: os.kill(1, signal.SIGTERM)),
        })
        "#,
    );
    // `run` asserts that the executor exited 0 and printed its result.
    let outcome = root.call("attack:run").run();
    let data = outcome.data();
    assert_eq!(data["ppid"], json!(outcome.executor_pid));
    assert_errno(&data["term"], libc::EPERM, "kill(executor, SIGTERM)");
    assert_errno(&data["kill"], libc::EPERM, "kill(executor, SIGKILL)");
    assert_errno(&data["group"], libc::EPERM, "killpg(executor's group)");
    assert_errno(&data["init"], libc::EPERM, "kill(1, SIGTERM)");
}

#[test]
fn sandbox_runs_tool_without_capabilities_under_seccomp() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        status = {}
        for line in open("/proc/self/status"):
            key, _, value = line.partition(":")
            status[key] = value.strip()
        reply({"status": status, "uid": os.getuid(), "euid": os.geteuid(), "groups": os.getgroups()})
        "#,
    );
    let outcome = root.call("attack:run").run();
    let data = outcome.data();
    let status = &data["status"];
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(status[cap], "0000000000000000", "{cap}: {status}");
    }
    assert_eq!(status["NoNewPrivs"], "1", "{status}");
    assert_eq!(status["Seccomp"], "2", "seccomp filter mode: {status}");
    let uid = data["uid"].as_u64().unwrap();
    if running_as_root() {
        assert!(
            uid >= 2_000_000,
            "the tool runs as its call's user, not {uid}"
        );
    }
    assert_ne!(uid, 0, "the tool runs as root");
    assert_eq!(data["euid"], data["uid"]);
    assert_eq!(data["groups"], json!([]), "supplementary groups were kept");
}
