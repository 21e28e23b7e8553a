//! What a tool can see of other processes and of the host through `/proc`, and the device
//! files every honest program writes to. A tool reads its own `/proc/<pid>` and nothing
//! else of `/proc` but a few host-wide information files (Landlock refuses with `EACCES`);
//! `/dev/null`, `/dev/zero` and `/dev/full` are writable.

use super::harness::{assert_allowed, assert_errno, shell_skill, SkillRoot, Start};

#[test]
fn sandbox_hides_other_processes_command_lines() {
    sandbox_hides_other_processes_command_lines_as(Start::Cold);
}

#[test]
fn sandbox_hides_other_processes_command_lines_prestarted() {
    sandbox_hides_other_processes_command_lines_as(Start::Prestarted);
}

fn sandbox_hides_other_processes_command_lines_as(start: Start) {
    let root = SkillRoot::new();
    root.python_skill_as(
        start,
        "attack",
        r#"
        parent = os.getppid()
        reply({
            "list": attempt(lambda: os.listdir("/proc")),
            "init_cmdline": attempt(lambda: open("/proc/1/cmdline", "rb").read().hex()),
            "executor_cmdline": attempt(lambda: open(f"/proc/{parent}/cmdline", "rb").read().hex()),
            "executor_environ": attempt(lambda: open(f"/proc/{parent}/environ", "rb").read().hex()),
            "executor_status": attempt(lambda: open(f"/proc/{parent}/status").read()),
            "own_status": attempt(lambda: open("/proc/self/status").read()[:200]),
            "own_cmdline": attempt(lambda: open(f"/proc/{os.getpid()}/cmdline", "rb").read().decode()),
            "own_fds": attempt(lambda: sorted(os.listdir("/proc/self/fd"))),
        })
        "#,
    );
    let outcome = root.call("attack:run").run();
    start.check(&outcome);
    let data = outcome.data();
    assert_errno(&data["list"], libc::EACCES, "listing /proc");
    assert_errno(
        &data["init_cmdline"],
        libc::EACCES,
        "reading /proc/1/cmdline",
    );
    assert_errno(
        &data["executor_cmdline"],
        libc::EACCES,
        "reading the executor's cmdline",
    );
    assert_errno(
        &data["executor_environ"],
        libc::EACCES,
        "reading the executor's environ",
    );
    assert_errno(
        &data["executor_status"],
        libc::EACCES,
        "reading the executor's status",
    );
    assert_allowed(&data["own_status"], "reading /proc/self/status");
    let own = assert_allowed(&data["own_cmdline"], "reading its own cmdline by pid");
    assert!(
        own.as_str().unwrap_or_default().contains("tool.py"),
        "{own}"
    );
    assert_allowed(&data["own_fds"], "listing /proc/self/fd");
}

#[test]
fn sandbox_hides_a_concurrent_process_of_the_host() {
    // A process of the host with a secret on its command line, as a database started with
    // --password= would have.
    let mut host = std::process::Command::new("sleep")
        .arg("30")
        .arg("--password=hunter2")
        .spawn()
        .or_else(|_| std::process::Command::new("sleep").arg("30").spawn())
        .unwrap();
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        pid = args["pid"]
        reply({
            "cmdline": attempt(lambda: open(f"/proc/{pid}/cmdline", "rb").read().hex()),
            "stat": attempt(lambda: open(f"/proc/{pid}/stat").read()),
        })
        "#,
    );
    let outcome = root
        .call("attack:run")
        .args(serde_json::json!({ "pid": host.id() }))
        .run();
    let _ = host.kill();
    let _ = host.wait();
    let data = outcome.data();
    assert_errno(
        &data["cmdline"],
        libc::EACCES,
        "reading a host process's cmdline",
    );
    assert_errno(&data["stat"], libc::EACCES, "reading a host process's stat");
}

#[test]
fn sandbox_lets_tools_write_the_null_devices() {
    let root = SkillRoot::new();
    root.python_skill(
        "honest",
        r#"
        import subprocess
        def write(path):
            with open(path, "w") as f:
                f.write("x")
            return True
        def shell():
            r = subprocess.run(["sh", "-c", "echo hidden >/dev/null && echo shown 2>/dev/null"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            return [r.returncode, r.stdout.decode()]
        def full():
            with open("/dev/full", "w") as f:
                f.write("x")
                f.flush()
        reply({
            "null": attempt(lambda: write("/dev/null")),
            "zero": attempt(lambda: write("/dev/zero")),
            "zero_read": attempt(lambda: open("/dev/zero", "rb").read(4).hex()),
            "shell": attempt(shell),
            "devnull": attempt(lambda: subprocess.run(["true"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL).returncode),
            "full": attempt(full),
            "tty": attempt(lambda: write("/dev/tty")),
        })
        "#,
    );
    let outcome = root.call("honest:run").run();
    let data = outcome.data();
    assert_allowed(&data["null"], "writing /dev/null");
    assert_allowed(&data["zero"], "writing /dev/zero");
    assert_eq!(
        assert_allowed(&data["zero_read"], "reading /dev/zero"),
        "00000000"
    );
    assert_eq!(
        assert_allowed(&data["shell"], "a shell redirecting to /dev/null"),
        &serde_json::json!([0, "shown\n"])
    );
    assert_eq!(
        assert_allowed(&data["devnull"], "subprocess.DEVNULL"),
        &serde_json::json!(0)
    );
    // /dev/full opens for writing and then refuses the data, as on any host.
    assert_errno(&data["full"], libc::ENOSPC, "writing /dev/full");
    // Other devices stay closed.
    assert!(data["tty"]["ok"] == false, "{}", data["tty"]);
}

#[test]
fn sandbox_lets_shell_tools_redirect_to_dev_null() {
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "echo quiet >/dev/null; echo loud 2>/dev/null; cat /dev/null\n",
    );
    let outcome = root.call("shell:run").run();
    assert_eq!(outcome.result["success"], true, "{outcome}");
    assert_eq!(outcome.result["data"]["stdout"], "loud\n", "{outcome}");
}
