//! The clone-based spawn on its own, without a sandbox (`ChildSetup` with nothing to
//! confine): stdio, environment, exit statuses, failures before exec, kill and drop.

use std::path::Path;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Launch;
use crate::sandbox::child::ChildSetup;
use crate::sandbox::limits::{Limits, MemoryLimit};

fn open_setup() -> ChildSetup {
    ChildSetup {
        limits: Limits::for_call(MemoryLimit::Rlimit(1024), 10_000, 4096, 1024),
        cap_last: crate::sandbox::child::cap_last(),
        user: None,
        landlock: None,
        seccomp: crate::sandbox::child::Seccomp::Off,
        new_session: true,
        controlling_terminal: false,
        cgroup: None,
        netns: None,
        mntns: None,
    }
}

fn sh(script: &str, env: Vec<(String, String)>) -> Launch {
    let args = vec!["-c".to_string(), script.to_string()];
    Launch::new(
        Path::new("/bin/sh"),
        &args,
        env,
        Path::new("/tmp"),
        open_setup(),
    )
    .unwrap()
}

/// Everything the child writes to stdout, until it closes it.
async fn stdout_of(child: &mut super::SandboxChild) -> String {
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    stdout.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn pipes_stdio_and_sets_exactly_the_given_environment() {
    let env = vec![
        ("ONLY".to_string(), "this".to_string()),
        ("ONLY".to_string(), "last wins".to_string()),
    ];
    let mut child = sh(
        "read line; echo \"$line|$ONLY|$(pwd)\"; env | wc -l; echo oops >&2; exit 3",
        env,
    )
    .spawn()
    .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"hello\n").await.unwrap();
    drop(stdin);
    let out = stdout_of(&mut child).await;
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .await
        .unwrap();
    let status = child.wait().await.unwrap();
    assert_eq!(status.code(), Some(3));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "hello|last wins|/tmp");
    // ONLY, plus what sh itself sets (PWD, SHLVL, _ at most).
    let count: usize = lines[1].trim().parse().unwrap();
    assert!(count <= 4, "environment leaked: {count} variables");
    assert_eq!(err, "oops\n");
    assert!(child.id().is_some(), "waiting reaped the process");
    child.reap();
    assert_eq!(child.id(), None, "reaped");
}

#[tokio::test]
async fn the_child_gets_default_signal_handling_and_an_empty_mask() {
    // SIGPIPE is ignored in a Rust process; the tool must get the default back, and
    // no signal blocked.
    let mut child = sh("grep -E '^(SigBlk|SigIgn)' /proc/self/status", vec![])
        .spawn()
        .unwrap();
    let out = stdout_of(&mut child).await;
    child.wait().await.unwrap();
    for line in out.lines() {
        let mask = u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap();
        if line.starts_with("SigBlk") {
            assert_eq!(mask, 0, "{line}");
        } else {
            assert_eq!(
                mask & (1 << (libc::SIGPIPE - 1)),
                0,
                "SIGPIPE still ignored: {line}"
            );
        }
    }
}

/// `program` with no arguments and no environment, in `cwd`.
fn bare(program: &str, cwd: &str) -> Launch {
    let none: Vec<String> = vec![];
    Launch::new(
        Path::new(program),
        &none,
        vec![],
        Path::new(cwd),
        open_setup(),
    )
    .unwrap()
}

#[tokio::test]
async fn a_missing_program_fails_the_spawn_with_the_step_and_reason() {
    let e = bare("/nonexistent/tool", "/tmp").spawn().unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert!(e.to_string().contains("executing the program"), "{e}");
}

#[tokio::test]
async fn a_missing_working_folder_fails_before_exec() {
    let e = bare("/bin/true", "/nonexistent-folder")
        .spawn()
        .unwrap_err();
    assert!(
        e.to_string().contains("entering the working directory"),
        "{e}"
    );
}

#[test]
fn nul_bytes_and_bad_variable_names_are_refused_before_any_clone() {
    let args = vec!["a\0b".to_string()];
    let e = Launch::new(
        Path::new("/bin/true"),
        &args,
        vec![],
        Path::new("/"),
        open_setup(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("NUL"), "{e}");
    let none: Vec<String> = vec![];
    let e = Launch::new(
        Path::new("/bin/true"),
        &none,
        vec![("A=B".to_string(), "x".to_string())],
        Path::new("/"),
        open_setup(),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("invalid environment variable name"),
        "{e}"
    );
}

#[tokio::test]
async fn kill_ends_the_process_and_wait_reports_the_signal() {
    use std::os::unix::process::ExitStatusExt;
    let mut child = sh("sleep 30", vec![]).spawn().unwrap();
    child.start_kill().unwrap();
    let status = child.wait().await.unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    // Killing an ended process is not an error.
    child.start_kill().unwrap();
}

#[tokio::test]
async fn dropping_a_running_child_kills_and_reaps_it() {
    let child = sh("sleep 30", vec![]).spawn().unwrap();
    let pid = child.id().unwrap();
    drop(child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // Gone from /proc once reaped (a zombie would still be listed).
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "pid {pid} was not reaped"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_threads_spawning_at_once_each_get_their_own_child() {
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..32 {
        let done = Arc::clone(&done);
        tasks.push(tokio::spawn(async move {
            let mut child = sh(&format!("echo {i}"), vec![]).spawn().unwrap();
            let out = stdout_of(&mut child).await;
            assert!(child.wait().await.unwrap().success());
            assert_eq!(out.trim(), i.to_string());
            done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(done.load(std::sync::atomic::Ordering::SeqCst), 32);
}

#[test]
fn the_clone_window_blocks_every_signal_but_sigchld() {
    let mask = super::clone_window_mask();
    // SAFETY: sigismember reads a set owned here.
    let member = |sig| unsafe { libc::sigismember(&mask, sig) } == 1;
    assert!(
        !member(libc::SIGCHLD),
        "SIGCHLD blocked: each exit would wake another thread"
    );
    for sig in [
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGSEGV,
        libc::SIGPIPE,
        libc::SIGUSR1,
    ] {
        assert!(
            member(sig),
            "signal {sig} not blocked while a child shares the stack"
        );
    }
}

#[tokio::test]
async fn an_exit_by_signal_is_reported_as_that_signal() {
    use std::os::unix::process::ExitStatusExt;
    let mut child = sh("kill -9 $$", Vec::new()).spawn().unwrap();
    let status = child.wait().await.unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    assert_eq!(status.code(), None);
    child.reap();
}
