//! The watcher against real changes: each way a file or folder can change marks an armed
//! folder touched, reading it does not, and the executor's own move of its root does not.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::*;
use crate::workdir::{Known, Stamp};

/// A folder of two files (one in a subfolder) and what a sync would have recorded, in a
/// temporary folder that goes with the returned guard.
fn folder(tag: &str) -> (tempfile::TempDir, PathBuf, BTreeMap<String, Known>) {
    let base = tempfile::Builder::new()
        .prefix(&format!("skillbox-watch-{tag}-"))
        .tempdir()
        .unwrap();
    let work = base.path().join("work");
    std::fs::create_dir_all(work.join("sub")).unwrap();
    std::fs::write(work.join("a.txt"), "one").unwrap();
    std::fs::write(work.join("sub/b.txt"), "two").unwrap();
    let files = record(&work);
    (base, work, files)
}

fn record(work: &Path) -> BTreeMap<String, Known> {
    ["a.txt", "sub/b.txt"]
        .into_iter()
        .filter(|p| work.join(p).exists())
        .map(|p| {
            let st = nix::sys::stat::stat(&work.join(p)).unwrap();
            let known = Known {
                stamp: Stamp::of(&st),
                sha256: String::new(),
                executable: false,
            };
            (p.to_string(), known)
        })
        .collect()
}

fn armed(work: &Path, files: &BTreeMap<String, Known>) -> Arc<Tracked> {
    let tracked = arm(None, work, files).expect("inotify works here");
    assert!(tracked.unchanged(), "nothing changed yet");
    tracked
}

#[test]
fn reading_and_the_roots_own_move_change_nothing() {
    let (_base, work, files) = folder("read");
    let tracked = armed(&work, &files);
    let _ = std::fs::read(work.join("a.txt")).unwrap();
    let _ = std::fs::read_dir(work.join("sub")).unwrap().count();
    let moved = work.with_file_name("shelved");
    std::fs::rename(&work, &moved).unwrap();
    std::fs::rename(&moved, &work).unwrap();
    assert!(tracked.unchanged());
}

/// Each change, on a folder armed anew.
#[test]
fn every_kind_of_change_touches_the_folder() {
    type Change = fn(&Path);
    let changes: [(&str, Change); 10] = [
        ("write", |w| std::fs::write(w.join("a.txt"), "ONE").unwrap()),
        ("append in a subfolder", |w| {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(w.join("sub/b.txt"))
                .unwrap();
            f.write_all(b"!").unwrap();
        }),
        ("opened for writing, nothing written", |w| {
            drop(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(w.join("a.txt"))
                    .unwrap(),
            );
        }),
        ("truncate by path", |w| {
            nix::unistd::truncate(&w.join("a.txt"), 1).unwrap();
        }),
        ("chmod", |w| {
            std::fs::set_permissions(w.join("a.txt"), std::fs::Permissions::from_mode(0o600))
                .unwrap();
        }),
        ("a new file in a subfolder", |w| {
            std::fs::write(w.join("sub/new"), "x").unwrap()
        }),
        ("a new folder", |w| {
            std::fs::create_dir(w.join("new")).unwrap()
        }),
        ("removed", |w| {
            std::fs::remove_file(w.join("sub/b.txt")).unwrap()
        }),
        ("renamed", |w| {
            std::fs::rename(w.join("a.txt"), w.join("c.txt")).unwrap()
        }),
        ("a second link made and removed", |w| {
            let outside = w.with_file_name("outside");
            std::fs::hard_link(w.join("a.txt"), &outside).unwrap();
            std::fs::remove_file(&outside).unwrap();
        }),
    ];
    for (i, (what, change)) in changes.into_iter().enumerate() {
        let (_base, work, files) = folder(&format!("change{i}"));
        let tracked = armed(&work, &files);
        change(&work);
        assert!(!tracked.unchanged(), "{what}: not seen");
        // Walked and armed again, it is quiet until the next change.
        let again = arm(Some(tracked), &work, &record(&work)).unwrap();
        assert!(again.unchanged(), "{what}: armed again");
    }
}

/// A shared mapping written and dropped: no write call, but the writable open ends.
#[test]
fn a_write_through_a_shared_mapping_is_seen_when_the_mapping_goes() {
    let (_base, work, files) = folder("mmap");
    let tracked = armed(&work, &files);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(work.join("a.txt"))
        .unwrap();
    // SAFETY: a fresh shared mapping of the 3-byte file this test alone holds, written
    // within its length and unmapped before the file is dropped.
    unsafe {
        use std::os::fd::AsRawFd;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let at = libc::mmap(
            std::ptr::null_mut(),
            3,
            prot,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(at, libc::MAP_FAILED);
        *at.cast::<u8>() = b'O';
        assert_eq!(libc::munmap(at, 3), 0);
    }
    drop(file);
    assert!(!tracked.unchanged());
}

#[test]
fn a_folder_dropped_is_forgotten_and_its_files_watched_again_when_armed_anew() {
    let (_base, work, files) = folder("forget");
    let first = armed(&work, &files);
    let id = first.id;
    drop(first);
    let watcher = Watcher::global().unwrap();
    assert!(!watcher.drained().folders.contains_key(&id));
    // A handle that goes while the state is held (as in `arm`) does not wait for it.
    let held = armed(&work, &files);
    let state = watcher.lock();
    drop(held);
    drop(state);
    let second = armed(&work, &files);
    std::fs::write(work.join("sub/b.txt"), "TWO").unwrap();
    assert!(
        !second.unchanged(),
        "the files' watches now count for the new folder"
    );
}

/// The file's own watch sees a write made through a name in another folder.
#[test]
fn a_write_through_a_link_outside_the_folder_is_seen() {
    let (_base, work, files) = folder("outside");
    let outside = work.with_file_name("outside");
    std::fs::hard_link(work.join("a.txt"), &outside).unwrap();
    let tracked = armed(&work, &files);
    std::fs::write(&outside, "ONE").unwrap();
    assert!(!tracked.unchanged());
}
