//! The clone-based spawn (`sandbox::spawn`) inside the executor's own process: the tool's
//! process shares the executor's memory until it execs, so the confinement steps it takes
//! must change the tool only. These run a sandbox in this test process, as `serve` does.

use std::path::Path;

use skillbox_executor::sandbox::{self, ArgsFile, LaunchSpec, Sandbox, SandboxConfig};
use tokio::io::AsyncReadExt;

use super::harness::{scratch_root, SkillRoot, Start};

/// `Uid:` and `CapEff:` of every thread of this process.
fn thread_credentials() -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue; // the thread ended meanwhile
        };
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_default()
                .split_whitespace()
                .skip(1)
                .collect::<Vec<_>>()
                .join(" ")
        };
        out.push((
            task.file_name().to_string_lossy().into_owned(),
            field("Uid:"),
            field("CapEff:"),
        ));
    }
    out
}

#[test]
fn a_tool_switching_user_and_dropping_capabilities_leaves_the_executor_threads_alone() {
    if skipped_unless_root("per-call user ids") {
        return;
    }
    let (_root, skill_dir, sandbox) = skill_and_sandbox("who");
    let before = thread_credentials();
    assert!(
        before.iter().all(|(_, uid, _)| uid == "0 0 0 0"),
        "{before:?}"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let tool_uids: Vec<String> = runtime.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (sandbox, skill_dir) = (sandbox.clone(), skill_dir.clone());
            tasks.push(tokio::spawn(
                async move { run_id(&sandbox, &skill_dir).await },
            ));
        }
        let mut uids = Vec::new();
        for t in tasks {
            uids.push(t.await.unwrap());
        }
        uids
    });
    sandbox::wait_idle();
    for uid in &tool_uids {
        assert_ne!(uid.trim(), "0", "the tool ran as root");
    }
    // Every thread of this process (tokio workers that started the tools among them)
    // keeps its user and its capabilities.
    let after = thread_credentials();
    for (tid, uid, caps) in &after {
        assert_eq!(uid, "0 0 0 0", "thread {tid} changed user: {after:?}");
        let expected = &before[0].2;
        assert_eq!(caps, expected, "thread {tid} lost capabilities: {after:?}");
    }
}

/// True (the test is skipped, saying so) when this process is not root; `why` says what
/// needs root.
fn skipped_unless_root(why: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return false;
    }
    println!("SKIPPED {}: needs root ({why})", module_path!());
    true
}

/// A runtime on the calling thread, for one test's calls.
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// `n` more open descriptors in this process, until dropped.
fn hold_descriptors(n: usize) -> Vec<std::fs::File> {
    (0..n)
        .map(|_| std::fs::File::open("/dev/null").unwrap())
        .collect()
}

/// A skill folder named `name` (kept while the first value lives) and a sandbox in this
/// test process, as `serve` has one.
fn skill_and_sandbox(name: &str) -> (SkillRoot, std::path::PathBuf, Sandbox) {
    let root = SkillRoot::new();
    root.python_skill_as(Start::Cold, name, "print('x')");
    let skill_dir = root.skills().join(name);
    let sandbox = Sandbox::new(SandboxConfig {
        scratch_root: scratch_root(),
        ..SandboxConfig::default()
    })
    .unwrap();
    (root, skill_dir, sandbox)
}

async fn run_id(sandbox: &Sandbox, skill_dir: &Path) -> String {
    run(sandbox, skill_dir, &["/usr/bin/id", "-u"]).await
}

/// A call of `argv` prepared in the sandbox (256 MB, 5 s, no arguments file).
fn prepare(sandbox: &Sandbox, skill_dir: &Path, argv: &[&str]) -> sandbox::PreparedCall {
    let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    sandbox
        .prepare(LaunchSpec {
            deps: None,
            trust_pem: None,
            skill_dir: Some(skill_dir),
            work: None,
            argv: &argv,
            env: Vec::new(),
            memory_mb: 256,
            max_file_mb: 1024,
            timeout_ms: 5000,
            args_file: ArgsFile::None,
            network: None,
            unix_sockets: false,
        })
        .unwrap()
}

/// Runs `argv` in the sandbox; its stdout (it must exit 0).
async fn run(sandbox: &Sandbox, skill_dir: &Path, argv: &[&str]) -> String {
    run_prepared(sandbox, prepare(sandbox, skill_dir, argv), argv).await
}

/// Runs a call prepared of `argv`; its stdout (it must exit 0).
async fn run_prepared(sandbox: &Sandbox, prepared: sandbox::PreparedCall, argv: &[&str]) -> String {
    let mut child = sandbox.spawn(prepared.launch).unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    let status = child.wait().await.unwrap();
    child.reap();
    // Exited and reaped: what it left is found through its user at the release.
    prepared.guard.release();
    assert!(status.success(), "{argv:?} exited with {status}");
    out
}

/// The end of a call starts a kill helper only when a process of the call's user is left:
/// none for a tool that exited alone, one for a tool that left a process in the
/// background, which it kills.
#[test]
fn the_kill_helper_runs_only_when_the_call_left_a_process() {
    if skipped_unless_root("per-call user ids") {
        return;
    }
    let (_root, skill_dir, sandbox) = skill_and_sandbox("leaver");
    let runtime = current_thread();
    let helpers = sandbox::reaper::kill_helpers_started;
    let before = helpers();
    runtime.block_on(run_id(&sandbox, &skill_dir));
    sandbox::wait_idle();
    assert_eq!(
        helpers(),
        before,
        "a call that left nothing started a helper"
    );
    let script = "sleep 30 >/dev/null 2>&1 </dev/null & echo $! $(id -u)";
    let out = runtime.block_on(run(&sandbox, &skill_dir, &["/bin/sh", "-c", script]));
    sandbox::wait_idle();
    assert_eq!(helpers(), before + 1, "no helper killed the left process");
    let (sleeper, uid) = out.trim().split_once(' ').unwrap();
    super::harness::is_dead(sleeper.parse().unwrap(), uid.parse().unwrap()).unwrap();
}

/// `CapBnd:` of a `/proc/<pid>/status`.
fn bounding_set(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn a_tool_started_by_a_process_with_a_full_bounding_set_drops_it_itself() {
    // The executor binary empties its own bounding set at start, so the tool's process
    // normally finds nothing to drop; this test process keeps its own, so the child's
    // drop is what is checked here.
    if skipped_unless_root("CAP_SETPCAP") {
        return;
    }
    let mine = bounding_set(&std::fs::read_to_string("/proc/self/status").unwrap());
    assert_ne!(
        mine, "0000000000000000",
        "this test needs a bounding set to drop"
    );
    let (_root, skill_dir, sandbox) = skill_and_sandbox("bnd");
    let runtime = current_thread();
    let status = runtime.block_on(run(
        &sandbox,
        &skill_dir,
        &["/bin/cat", "/proc/self/status"],
    ));
    sandbox::wait_idle();
    assert_eq!(bounding_set(&status), "0000000000000000", "{status}");
    let after = bounding_set(&std::fs::read_to_string("/proc/self/status").unwrap());
    assert_eq!(
        after, mine,
        "the tool's drop reached the executor's process"
    );
}

#[test]
fn a_tool_starts_while_the_executor_holds_more_descriptors_than_a_tool_may_open() {
    // The tool's process starts with a copy of the executor's descriptor table; under load
    // every number below the tool's RLIMIT_NOFILE (256) is taken. Seen in the concurrency
    // suite as "confining the process: Too many open files" before the child opened its
    // `/proc/self` ahead of lowering the limit.
    let (_root, skill_dir, sandbox) = skill_and_sandbox("fds");
    let held = hold_descriptors(400);
    let runtime = current_thread();
    let out = runtime.block_on(run_id(&sandbox, &skill_dir));
    sandbox::wait_idle();
    drop(held);
    assert!(!out.trim().is_empty(), "id printed nothing");
}

/// A tool's process copies only the bottom of the executor's descriptor table (the
/// spawning thread's kept numbers among it), not the whole table, and keeps only its
/// stdio at exec.
#[test]
fn a_tool_copies_only_the_bottom_of_the_executor_descriptor_table() {
    let (_root, skill_dir, sandbox) = skill_and_sandbox("table");
    let held = hold_descriptors(700);
    let runtime = current_thread();
    let status = runtime.block_on(run(
        &sandbox,
        &skill_dir,
        &["/bin/cat", "/proc/self/status"],
    ));
    let fds = runtime.block_on(run(&sandbox, &skill_dir, &["/bin/ls", "/proc/self/fd"]));
    sandbox::wait_idle();
    drop(held);
    let size: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("FDSize:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    // A copy of the whole table holds at least the 700 held here.
    assert!(
        size < 700,
        "the tool's table has room for {size} descriptors"
    );
    // ls's own listing of the folder is the fourth.
    let listed: Vec<&str> = fds.split_whitespace().collect();
    assert_eq!(listed, ["0", "1", "2", "3"], "{fds}");
}

/// A tool leads a process group of its own (the end of a call kills it as one) and has no
/// controlling terminal, whether or not it also got a session of its own.
#[test]
fn a_tool_leads_its_own_process_group_without_a_terminal() {
    let (_root, skill_dir, sandbox) = skill_and_sandbox("group");
    let runtime = current_thread();
    let stat = runtime.block_on(run(&sandbox, &skill_dir, &["/bin/cat", "/proc/self/stat"]));
    sandbox::wait_idle();
    let (pid, rest) = stat.split_once(' ').unwrap();
    let fields: Vec<&str> = rest
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    // state, ppid, pgrp, session, tty_nr
    assert_eq!(fields[2], pid, "not its own process group: {stat}");
    assert_eq!(fields[4], "0", "a controlling terminal: {stat}");
}

/// Waiting for a tool observes its exit without reaping it: until the call reaps it, the
/// exited tool keeps its pid (a zombie), so the process group kill at the end of the call
/// cannot reach a process that was given the same id.
#[test]
fn an_exited_tool_keeps_its_pid_until_the_call_reaps_it() {
    let (_root, skill_dir, sandbox) = skill_and_sandbox("zombie");
    let runtime = current_thread();
    runtime.block_on(async {
        let prepared = prepare(&sandbox, &skill_dir, &["/bin/true"]);
        let mut child = sandbox.spawn(prepared.launch).unwrap();
        assert!(child.wait().await.unwrap().success());
        let pid = child.id().expect("an exited, unreaped tool has its pid");
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let state = stat.rsplit_once(')').unwrap().1.split_whitespace().next();
        assert_eq!(state, Some("Z"), "{stat}");
        child.reap();
        assert_eq!(child.id(), None);
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap() != stat,
            "still there after the reap"
        );
        prepared.guard.release();
    });
    sandbox::wait_idle();
}

/// What the confinement probe prints: its skill folder read, its scratch dir written, and
/// each path of the host and of another skill it must not read, refused or not.
const PROBE: &str = r#"
cat "$1/marker" || echo "skill folder refused"
echo written > "$HOME/w" && cat "$HOME/w"
for p in /etc/passwd "$2/marker"; do
  if cat "$p" >/dev/null 2>&1; then echo "read $p"; else echo "refused $p"; fi
done
"#;

/// A call that takes a slot made ahead runs under the Landlock ruleset begun there with
/// the slot's scratch dir (slots.rs) and finished with its skill folder: it reads its
/// skill folder and writes its scratch dir, and is refused a file of the host and another
/// skill's folder, exactly as a call that builds its ruleset in line.
#[test]
fn a_call_on_a_slot_made_ahead_is_confined_as_one_made_in_line() {
    let (root, skill_dir, mut sandbox) = skill_and_sandbox("ahead");
    root.python_skill_as(Start::Cold, "other", "print('x')");
    let other = root.skills().join("other");
    std::fs::write(skill_dir.join("marker"), "own skill\n").unwrap();
    std::fs::write(other.join("marker"), "another skill\n").unwrap();
    super::harness::open_up(&skill_dir.join("marker"));
    super::harness::open_up(&other.join("marker"));
    let (skill, other) = (skill_dir.to_str().unwrap(), other.to_str().unwrap());
    let argv = ["/bin/sh", "-c", PROBE, "probe", skill, other];
    let runtime = current_thread();

    sandbox.keep_ready(1);
    let prefix = format!("call-{}-", std::process::id());
    let made_ahead = || -> Vec<std::path::PathBuf> {
        (std::fs::read_dir(scratch_root()).unwrap().flatten())
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while made_ahead().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no slot was made");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let ahead = made_ahead();
    let prepared = prepare(&sandbox, &skill_dir, &argv);
    assert!(
        ahead.iter().any(|p| p == prepared.guard.scratch()),
        "the call did not take the slot made ahead"
    );
    let on_slot = runtime.block_on(run_prepared(&sandbox, prepared, &argv));
    sandbox.keep_ready(0);
    let in_line = runtime.block_on(run(&sandbox, &skill_dir, &argv));

    let expected = format!("own skill\nwritten\nrefused /etc/passwd\nrefused {other}/marker\n");
    assert_eq!(in_line, expected, "a call made in line");
    assert_eq!(on_slot, expected, "a call on a slot made ahead");
}
