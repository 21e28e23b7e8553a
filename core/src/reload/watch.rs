//! Hot reload of skills: a change under a skills root is picked up within a second and
//! runs the one reload of [`crate::reload::Reloader`] (the same as `POST
//! /v1/skills/reload`). Calls are never blocked: a reload swaps the catalog, and calls in
//! flight keep the one they started with.
//!
//! Changes come from an inotify watch of the whole tree ([`TreeWatch`]: watches added as
//! folders appear, a queue overflow reported so we rescan); opens and reads are not
//! watched, so neither a reload reading the skills nor a call running a skill's tool
//! causes one. Events are debounced: the reload runs once
//! the tree has been quiet for [`DEBOUNCE`], and at most [`MAX_DELAY`] after the first
//! change even if writes go on. When the watch cannot be set up (a skills root missing, no
//! inotify instances left) the roots are polled every [`POLL_INTERVAL`] instead.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tokio::time::Instant;

use crate::reload::{Cause, Reloader};
use crate::skills::tree_watch::TreeWatch;

/// Quiet time after the last change before reloading.
pub const DEBOUNCE: Duration = Duration::from_millis(300);
/// Longest wait between the first change and its reload.
pub const MAX_DELAY: Duration = Duration::from_millis(900);
/// How often the fallback poller looks at the skills root.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Entries the poller looks at, at most (a larger tree still reloads on changes among
/// the first ones).
const POLL_MAX_ENTRIES: usize = 20_000;
/// Folder depth the poller descends to.
const POLL_MAX_DEPTH: usize = 6;

/// Reloads `reloader`'s skills whenever one of its skills roots changes, until the task
/// is dropped.
pub async fn watch_skills(reloader: Arc<Reloader>) {
    let roots = reloader.policy().roots.clone();
    let reload = || reloader.reload_logged(Cause::SkillsChanged);
    match TreeWatch::start(&roots) {
        Ok(mut watch) => {
            tracing::info!(roots = ?roots, folders = watch.folders(), "watching the skills roots");
            let (tx, rx) = unbounded_channel();
            let forward = async move {
                loop {
                    if let Err(e) = watch.changed().await {
                        tracing::warn!(error = %e, "the watch of the skills roots broke; polling them every {POLL_INTERVAL:?}");
                        return;
                    }
                    if tx.send(()).is_err() {
                        return;
                    }
                }
            };
            tokio::join!(forward, debounce(rx, reload));
        }
        Err(e) => {
            tracing::warn!(roots = ?roots, error = %e, "cannot watch the skills roots; polling them every {POLL_INTERVAL:?}");
        }
    }
    poll(&roots, reload).await;
}

/// Calls `act` once per burst of events on `rx` (see the module doc); returns when the
/// sender is gone.
async fn debounce<F, Fut>(mut rx: UnboundedReceiver<()>, mut act: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    while rx.recv().await.is_some() {
        let first = Instant::now();
        let mut open = true;
        while open {
            let left = MAX_DELAY.saturating_sub(first.elapsed());
            if left.is_zero() {
                break;
            }
            match tokio::time::timeout(DEBOUNCE.min(left), rx.recv()).await {
                Ok(Some(())) => {}
                Ok(None) => open = false,
                Err(_quiet) => break,
            }
        }
        act().await;
        if !open {
            return;
        }
    }
}

/// The fallback: compares a listing of the trees every [`POLL_INTERVAL`].
async fn poll<F, Fut>(roots: &[PathBuf], mut act: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut seen = stamp_all(roots).await;
    loop {
        tokio::time::sleep(POLL_INTERVAL).await;
        let now = stamp_all(roots).await;
        if now != seen {
            seen = now;
            act().await;
        }
    }
}

type Entry = (PathBuf, u64, u64, i64, i64);

async fn stamp_all(roots: &[PathBuf]) -> Vec<Vec<Entry>> {
    let mut out = Vec::with_capacity(roots.len());
    for root in roots {
        out.push(stamp(root).await);
    }
    out
}

async fn stamp(root: &Path) -> Vec<Entry> {
    let root = root.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        collect(&root, 0, &mut out);
        out.sort();
        out
    })
    .await
    .unwrap_or_default()
}

fn collect(dir: &Path, depth: usize, out: &mut Vec<Entry>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if out.len() >= POLL_MAX_ENTRIES {
            return;
        }
        let path = entry.path();
        let Ok(m) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        out.push((path.clone(), m.len(), m.ino(), m.mtime(), m.mtime_nsec()));
        if m.is_dir() && depth < POLL_MAX_DEPTH {
            collect(&path, depth + 1, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use skillbox_protocol::skill::Catalog;

    use super::*;
    use crate::skills::install::TrustPolicy;

    fn write_skill(root: &Path, name: &str) {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: A skill for the watch test. Use in tests.\n---\n# {name}\n"),
        )
        .unwrap();
    }

    async fn eventually(what: &str, mut ok: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ok() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A dispatcher whose executor never answers (a reload swaps the catalog, then reports
    /// the executor down) and the trust policy of `ws`.
    fn dispatcher(ws: &Path) -> (crate::gateway::CoreParts, TrustPolicy) {
        let core =
            crate::gateway::test_parts(crate::calls::test_dispatcher(ws, Catalog::default()));
        let ws = crate::state::Workspace::new(ws);
        (core, TrustPolicy::for_workspace(&ws, false))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn watch_picks_up_a_new_skill_folder() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().join("skills");
        std::fs::create_dir_all(&root).unwrap();
        write_skill(&root, "first");
        let (dispatcher, policy) = dispatcher(ws.path());
        let reloader = Arc::new(Reloader::new(dispatcher.reload_parts(), policy));
        let task = tokio::spawn(watch_skills(reloader));
        // Let the watch start, then add a skill folder.
        tokio::time::sleep(Duration::from_millis(200)).await;
        write_skill(&root, "second");
        eventually("the new skill in the catalog", || {
            dispatcher.load.catalog().get("second").is_some()
        })
        .await;
        assert!(dispatcher.load.catalog().get("first").is_some());
        task.abort();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn watch_picks_up_a_skill_added_to_a_second_root() {
        let ws = tempfile::tempdir().unwrap();
        let (personal, project) = (ws.path().join("personal"), ws.path().join("skills"));
        std::fs::create_dir_all(&personal).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        write_skill(&project, "first");
        let (dispatcher, policy) = dispatcher(ws.path());
        let policy = policy.with_roots(vec![personal.clone()]);
        assert_eq!(policy.roots, vec![personal.clone(), project.clone()]);
        let reloader = Arc::new(Reloader::new(dispatcher.reload_parts(), policy));
        let task = tokio::spawn(watch_skills(reloader));
        tokio::time::sleep(Duration::from_millis(200)).await;
        write_skill(&personal, "mine");
        eventually("the personal skill in the catalog", || {
            dispatcher.load.catalog().get("mine").is_some()
        })
        .await;
        assert!(dispatcher.load.catalog().get("first").is_some());
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn debounce_folds_a_burst_into_one_action() {
        let (tx, rx) = unbounded_channel();
        let count = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&count);
        let task = tokio::spawn(debounce(rx, move || {
            c.fetch_add(1, Ordering::SeqCst);
            async {}
        }));
        for _ in 0..5 {
            tx.send(()).unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(DEBOUNCE * 2).await;
        assert_eq!(count.load(Ordering::SeqCst), 1, "one reload for the burst");
        tx.send(()).unwrap();
        tokio::time::sleep(DEBOUNCE * 2).await;
        assert_eq!(count.load(Ordering::SeqCst), 2);
        // A stream that never goes quiet still acts within MAX_DELAY.
        for _ in 0..40 {
            tx.send(()).unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            count.load(Ordering::SeqCst) >= 5,
            "{}",
            count.load(Ordering::SeqCst)
        );
        drop(tx);
        task.await.unwrap();
    }

    #[tokio::test]
    async fn poll_stamp_sees_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let before = stamp(dir.path()).await;
        write_skill(dir.path(), "x");
        assert_ne!(stamp(dir.path()).await, before);
    }
}
