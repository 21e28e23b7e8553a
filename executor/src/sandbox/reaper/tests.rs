//! The user pool and the kill check.

use super::*;

/// A `sleep 30` running as `uid`; `None` (the test skipped) when not root.
fn sleep_as(uid: u32) -> Option<std::process::Child> {
    use std::os::unix::process::CommandExt;
    if !nix::unistd::geteuid().is_root() {
        println!("SKIPPED: needs root (a process of another user)");
        return None;
    }
    let child = std::process::Command::new("sleep")
        .arg("30")
        .uid(uid)
        .gid(uid)
        .spawn()
        .unwrap();
    Some(child)
}

#[test]
fn a_user_with_no_process_has_none_and_the_caller_has_one() {
    // An id far above any pool a test or the executor uses: nothing runs as it.
    assert!(!user_has_process(4_190_000_001));
    assert!(user_has_process(nix::unistd::getuid().as_raw()));
}

#[test]
fn a_user_with_a_live_or_dead_unreaped_process_has_one() {
    let uid = 4_190_000_002;
    let Some(mut sleeper) = sleep_as(uid) else {
        return;
    };
    assert!(user_has_process(uid), "a live process");
    sleeper.kill().unwrap();
    // Dead but not reaped: a zombie still counts, so the kill would run.
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(user_has_process(uid), "a zombie");
    sleeper.wait().unwrap();
    assert!(!user_has_process(uid), "reaped");
}

#[test]
fn an_id_held_elsewhere_is_not_handed_out() {
    let dir = tempfile::tempdir().unwrap();
    let first = UserPool::new(4_190_000_020, 1, dir.path().to_path_buf()).unwrap();
    let second = UserPool::new(4_190_000_020, 1, dir.path().to_path_buf()).unwrap();
    let held = first.acquire().expect("a free id");
    assert!(second.acquire().is_none(), "one id handed out twice");
    // Released, the id stays locked by its pool for that pool's next call.
    drop(held);
    assert!(
        second.acquire().is_none(),
        "an id kept by its pool handed out"
    );
    assert_eq!(first.acquire().map(|u| u.uid), Some(4_190_000_020));
    drop(first);
    assert_eq!(second.acquire().map(|u| u.uid), Some(4_190_000_020));
}

#[test]
fn taking_an_id_kills_what_a_crashed_holder_left_under_it() {
    use std::os::unix::process::ExitStatusExt;
    let uid = 4_190_000_030;
    let dir = tempfile::tempdir().unwrap();
    let pool = UserPool::new(uid, 1, dir.path().to_path_buf()).unwrap();
    // What an executor killed mid-call leaves: a tool still running as the id, whose
    // lock went with the executor.
    let Some(mut left) = sleep_as(uid) else {
        return;
    };
    let user = pool.acquire().expect("a free id");
    assert_eq!(user.uid, uid);
    let status = left.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
}

#[test]
fn at_most_max_idle_ids_stay_locked_after_their_calls() {
    let dir = tempfile::tempdir().unwrap();
    let size = MAX_IDLE_IDS + 2;
    let base = 4_190_000_100;
    let pool = UserPool::new(base, size, dir.path().to_path_buf()).unwrap();
    let users: Vec<CallUser> = (0..size).map(|_| pool.acquire().unwrap()).collect();
    drop(users);
    assert_eq!(pool.idle.lock().unwrap().len(), MAX_IDLE_IDS);
    // The two beyond the limit were unlocked: another pool can take them.
    let other = UserPool::new(base, size, dir.path().to_path_buf()).unwrap();
    let taken: Vec<CallUser> = std::iter::from_fn(|| other.acquire()).collect();
    assert_eq!(taken.len(), 2);
}

#[test]
fn a_pool_running_past_the_largest_uid_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = UserPool::new(u32::MAX - 1, 2, dir.path().to_path_buf()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("lower the uid base"), "{err}");
    assert!(UserPool::new(u32::MAX - 2, 2, dir.path().to_path_buf()).is_ok());
}

/// A context's next call asks for the id its kept folder belongs to: it gets it only
/// while no call uses it and its pool keeps it idle.
#[test]
fn an_idle_id_is_taken_back_by_name_and_a_busy_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let base = 4_190_000_200;
    let pool = UserPool::new(base, 3, dir.path().to_path_buf()).unwrap();
    let (a, b) = (pool.acquire().unwrap(), pool.acquire().unwrap());
    let (a_id, b_id) = (a.uid, b.uid);
    assert!(pool.acquire_idle(a_id).is_none(), "in use by a call");
    assert!(
        pool.acquire_idle(base + 2).is_none(),
        "never taken: not kept"
    );
    drop(a);
    drop(b);
    let again = pool.acquire_idle(a_id).expect("idle, so taken back");
    assert_eq!(again.uid, a_id, "not the last released ({b_id})");
    assert!(pool.acquire_idle(a_id).is_none(), "handed out once");
    assert_eq!(pool.acquire().map(|u| u.uid), Some(b_id));
}
