//! A tool cloned from a spawner thread runs under the seccomp filters that thread
//! installed once; the threads that did not install them stay unfiltered, and a launch
//! that expects inherited filters refuses to start anywhere else.

use std::path::Path;
use std::sync::Arc;

use tokio::io::AsyncReadExt;

use super::Spawner;
use crate::sandbox::child::{cap_last, ChildSetup, Seccomp};
use crate::sandbox::limits::{Limits, MemoryLimit};
use crate::sandbox::seccomp;
use crate::sandbox::spawn::Launch;

fn cat_own_status(seccomp: Seccomp) -> Launch {
    let setup = ChildSetup {
        limits: Limits::for_call(MemoryLimit::Rlimit(1024), 10_000, 4096, 1024),
        cap_last: cap_last(),
        user: None,
        landlock: None,
        seccomp,
        new_session: true,
        controlling_terminal: false,
        cgroup: None,
        netns: None,
        mntns: None,
    };
    let args = vec!["/proc/self/status".to_string()];
    Launch::new(
        Path::new("/bin/cat"),
        &args,
        Vec::new(),
        Path::new("/"),
        setup,
    )
    .unwrap()
}

/// A `/proc/.../status` field.
fn field(status: &str, name: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn a_launch_expecting_inherited_filters_is_refused_on_any_other_thread() {
    let e = cat_own_status(Seccomp::Inherit).start().unwrap_err();
    assert!(e.to_string().contains("without the seccomp filters"), "{e}");
}

#[tokio::test]
async fn a_tool_from_a_spawner_thread_inherits_its_filters_and_the_caller_stays_unfiltered() {
    let filters = Arc::new(seccomp::compile().unwrap());
    let spawner = Spawner::start(&filters, 2).unwrap();
    let mut child = spawner.spawn(cat_own_status(Seccomp::Inherit)).unwrap();
    let mut status = String::new();
    let mut stdout = child.stdout.take().unwrap();
    stdout.read_to_string(&mut status).await.unwrap();
    assert!(child.wait().await.unwrap().success());
    assert_eq!(field(&status, "Seccomp:"), "2", "{status}");
    // The two programs of the policy (tool_enosys, tool_allow), installed once on the
    // spawner thread, none added by the child itself.
    assert_eq!(field(&status, "Seccomp_filters:"), "2", "{status}");
    assert_eq!(field(&status, "NoNewPrivs:"), "1", "{status}");
    let mine = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    assert_eq!(
        field(&mine, "Seccomp:"),
        "0",
        "the calling thread got filtered"
    );
}

#[tokio::test]
async fn the_filters_are_installed_on_the_spawner_threads_only() {
    let filters = Arc::new(seccomp::compile().unwrap());
    let _spawner = Spawner::start(&filters, 2).unwrap();
    let mut by_name: Vec<(String, String)> = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        by_name.push((field(&status, "Name:"), field(&status, "Seccomp:")));
    }
    let spawners: Vec<_> = by_name
        .iter()
        .filter(|(n, _)| n == "tool-spawner")
        .collect();
    assert!(spawners.len() >= 2, "{by_name:?}");
    for (name, mode) in &by_name {
        let expected = if name == "tool-spawner" { "2" } else { "0" };
        assert_eq!(mode, expected, "thread {name}: {by_name:?}");
    }
}

/// Threads of this process named `tool-spawner`.
fn spawner_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "tool-spawner")
        })
        .count()
}

#[tokio::test]
async fn every_queued_launch_runs_and_dropping_the_spawner_ends_its_threads() {
    let filters = Arc::new(seccomp::compile().unwrap());
    let spawner = Arc::new(Spawner::start(&filters, 3).unwrap());
    assert_eq!(spawner_threads(), 3);
    let launches: Vec<_> = (0..12)
        .map(|_| {
            let spawner = Arc::clone(&spawner);
            tokio::spawn(async move {
                let mut child = spawner
                    .spawn_async(cat_own_status(Seccomp::Inherit))
                    .await?;
                child.wait().await
            })
        })
        .collect();
    for launch in launches {
        assert!(launch.await.unwrap().unwrap().success());
    }
    drop(spawner);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while spawner_threads() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "spawner threads outlived it"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
