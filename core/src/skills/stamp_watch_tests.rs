//! The stamp watch: every way of changing an installed skill's files is seen by the next
//! admission without waiting, and what raises no event is seen once the refresh passes.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::*;
use crate::skills::stamp::InstalledStamps;

/// A skill folder shaped like a published one: `SKILL.md`, `scripts/run.sh`,
/// `references/guide.md`.
fn skill(base: &Path) -> PathBuf {
    let dir = base.join("s");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::create_dir_all(dir.join("references")).unwrap();
    std::fs::write(dir.join("SKILL.md"), "---\nname: s\n---\n").unwrap();
    std::fs::write(dir.join("scripts/run.sh"), "echo hi\n").unwrap();
    std::fs::write(dir.join("references/guide.md"), "# guide\n").unwrap();
    dir
}

fn watched(dir: &Path) -> StampWatch {
    let watch = StampWatch::with_limits(Duration::from_secs(3600), MAX_WATCHES);
    watch.watch("s", dir);
    assert_eq!(watch.watched(), 1, "the skill is not watched");
    assert!(
        watch.unchanged("s"),
        "a skill just watched is not unchanged"
    );
    watch
}

#[test]
fn every_kind_of_change_makes_the_next_admission_read_the_stamp_at_once() {
    type Change = fn(&Path, &Path);
    let changes: &[(&str, Change)] = &[
        ("a file written in place", |d, _| {
            std::fs::write(d.join("scripts/run.sh"), "cat /etc/passwd\n").unwrap()
        }),
        ("a file appended to", |d, _| {
            use std::io::Write;
            let mut f = (std::fs::OpenOptions::new().append(true))
                .open(d.join("SKILL.md"))
                .unwrap();
            f.write_all(b"more\n").unwrap();
        }),
        ("a file truncated", |d, _| {
            let f = (std::fs::OpenOptions::new().write(true))
                .open(d.join("references/guide.md"))
                .unwrap();
            f.set_len(0).unwrap();
        }),
        ("a file's mode changed", |d, _| {
            let p = d.join("scripts/run.sh");
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
        }),
        ("a file's times set", |d, _| {
            let f = std::fs::File::open(d.join("SKILL.md")).unwrap();
            f.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
        }),
        ("a file added in a subfolder", |d, _| {
            std::fs::write(d.join("scripts/evil.sh"), "x").unwrap()
        }),
        ("a folder made", |d, _| {
            std::fs::create_dir(d.join("new")).unwrap()
        }),
        ("a file renamed", |d, _| {
            std::fs::rename(d.join("scripts/run.sh"), d.join("scripts/r.sh")).unwrap()
        }),
        ("a file moved in from outside", |d, out| {
            std::fs::write(out.join("payload"), "x").unwrap();
            std::fs::rename(out.join("payload"), d.join("scripts/run.sh")).unwrap();
        }),
        ("a file removed", |d, _| {
            std::fs::remove_file(d.join("references/guide.md")).unwrap()
        }),
        ("the skill folder moved away", |d, out| {
            std::fs::rename(d, out.join("gone")).unwrap()
        }),
        (
            "a file written through a hard link outside the folder",
            |_, out| std::fs::write(out.join("link"), "cat /etc/shadow\n").unwrap(),
        ),
    ];
    for (what, change) in changes {
        let base = tempfile::tempdir().unwrap();
        let outside = base.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let dir = skill(base.path());
        // A hard link made before the watch: writes through it name no watched folder.
        std::fs::hard_link(dir.join("scripts/run.sh"), outside.join("link")).unwrap();
        let watch = watched(&dir);
        change(&dir, &outside);
        assert!(!watch.unchanged("s"), "{what}: not seen");
        // And it stays seen: a later matching read does not make the skill clean again.
        watch.verified("s", Instant::now());
        assert!(!watch.unchanged("s"), "{what}: forgotten after a read");
    }
}

#[test]
fn reading_the_skill_raises_nothing() {
    let base = tempfile::tempdir().unwrap();
    let dir = skill(base.path());
    let watch = watched(&dir);
    for entry in ["SKILL.md", "scripts/run.sh", "references/guide.md"] {
        std::fs::read(dir.join(entry)).unwrap();
    }
    std::fs::read_dir(dir.join("scripts"))
        .unwrap()
        .for_each(drop);
    crate::skills::stamp::FolderStamp::read(&dir).unwrap();
    assert!(
        watch.unchanged("s"),
        "reading the files made the skill dirty"
    );
}

#[test]
fn a_clean_skill_is_read_again_once_the_refresh_passed() {
    let base = tempfile::tempdir().unwrap();
    let dir = skill(base.path());
    let watch = StampWatch::with_limits(Duration::from_millis(50), MAX_WATCHES);
    watch.watch("s", &dir);
    assert!(watch.unchanged("s"));
    std::thread::sleep(Duration::from_millis(60));
    assert!(
        !watch.unchanged("s"),
        "the refresh passed, yet no read asked"
    );
    watch.verified("s", Instant::now());
    assert!(watch.unchanged("s"), "a matching read did not count");
}

#[test]
fn a_skill_past_the_watch_limit_and_an_unknown_skill_are_always_read() {
    let base = tempfile::tempdir().unwrap();
    let dir = skill(base.path());
    let watch = StampWatch::with_limits(Duration::from_secs(3600), 3);
    watch.watch("s", &dir);
    assert_eq!(watch.watched(), 0);
    assert!(!watch.unchanged("s"));
    assert!(!watched(&dir).unchanged("other"));
    assert!(!StampWatch::default().unchanged("s"));
}

#[test]
fn only_file_systems_whose_changes_all_raise_events_are_trusted() {
    use nix::sys::statfs::*;
    for fs in [
        EXT4_SUPER_MAGIC,
        XFS_SUPER_MAGIC,
        BTRFS_SUPER_MAGIC,
        TMPFS_MAGIC,
    ] {
        assert!(events_are_complete(fs), "{fs:?}");
    }
    for fs in [NFS_SUPER_MAGIC, OVERLAYFS_SUPER_MAGIC, FUSE_SUPER_MAGIC] {
        assert!(!events_are_complete(fs), "{fs:?}");
    }
}

#[test]
fn a_lost_event_makes_every_skill_dirty() {
    let base = tempfile::tempdir().unwrap();
    let (one, two) = (base.path().join("one"), base.path().join("two"));
    let (one, two) = (skill(&one), skill(&two));
    let watch = StampWatch::with_limits(Duration::from_secs(3600), MAX_WATCHES);
    watch.watch("one", &one);
    watch.watch("two", &two);
    // More events than the kernel queues, all in skill `one`, alternating between two
    // files so none merges with the one before it.
    let queued: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16_384);
    let files = [one.join("SKILL.md"), one.join("scripts/run.sh")];
    let opened: Vec<std::fs::File> = (files.iter())
        .map(|f| std::fs::OpenOptions::new().write(true).open(f).unwrap())
        .collect();
    for i in 0..queued + 16 {
        use std::os::unix::fs::FileExt;
        opened[i % 2].write_at(b"x", 0).unwrap();
    }
    assert!(
        !watch.unchanged("two"),
        "an overflow left skill two trusted"
    );
}

/// Maps `path` shared and writable, then closes it: what a writer set up before the load
/// could keep.
fn map_shared(path: &Path) -> *mut u8 {
    use std::os::fd::AsRawFd;
    let file = (std::fs::OpenOptions::new().read(true).write(true))
        .open(path)
        .unwrap();
    // SAFETY: a fresh shared mapping of an open file of at least one byte, unmapped by
    // the caller; the file may close after `mmap`.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    assert_ne!(at, libc::MAP_FAILED);
    at.cast()
}

#[test]
fn a_write_through_a_mapping_made_before_the_load_is_seen_once_the_refresh_passed() {
    let base = tempfile::tempdir().unwrap();
    let ws = base.path();
    let refresh = Duration::from_millis(100);
    let script = ws.join("skills/echo/scripts/run.sh");
    let (catalog, stamps) = crate::skills::stamp::tests::installed_with(ws, |catalog, policy| {
        let at = map_shared(&script);
        let stamps = InstalledStamps::read_watched(catalog, policy, || {
            StampWatch::with_limits(refresh, MAX_WATCHES)
        });
        (at, stamps)
    });
    let (at, stamps) = stamps;
    let echo = (catalog.skills.iter()).find(|s| s.name == "echo").unwrap();
    assert_eq!(stamps.check(echo), Ok(()));
    // SAFETY: `at` maps at least the file's first byte, writable and shared.
    unsafe {
        *at = b'#';
        libc::munmap(at.cast(), 4096);
    }
    assert_eq!(std::fs::read(&script).unwrap()[0], b'#');
    // No event: until the refresh passes the write goes unseen (the documented gap).
    std::thread::sleep(refresh + Duration::from_millis(20));
    let why = stamps.check(echo).unwrap_err();
    assert!(why.contains("\"scripts/run.sh\" changed"), "{why}");
}

/// A tmpfs mounted on a folder until dropped.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

#[test]
fn a_skill_with_a_mount_point_inside_is_not_watched() {
    if !nix::unistd::geteuid().is_root() {
        println!("SKIPPED {}: needs root (mounts a tmpfs)", module_path!());
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let dir = skill(base.path());
    let inner = dir.join("references");
    nix::mount::mount(
        Some("tmpfs"),
        &inner,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        Some("size=1m"),
    )
    .unwrap();
    let _mounted = Mounted(inner);
    let watch = StampWatch::with_limits(Duration::from_secs(3600), MAX_WATCHES);
    watch.watch("s", &dir);
    assert_eq!(
        watch.watched(),
        0,
        "a skill spanning two file systems is watched"
    );
    assert!(!watch.unchanged("s"));
}
