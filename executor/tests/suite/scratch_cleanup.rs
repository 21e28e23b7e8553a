//! What a tool leaves in its scratch dir is removed after the call, however it is built:
//! a chain of folders deeper than the executor's stack and fd limit, a million entries.
//! The executor neither crashes nor leaves the tree behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::harness::{scratch_root, Manifest, SkillRoot};

/// The scratch dir the tool reported, and where it would wait in the trash of `root`.
fn leftovers(data: &serde_json::Value, root: &Path) -> (PathBuf, PathBuf) {
    let home = PathBuf::from(data["home"].as_str().unwrap());
    let trash = root.join(".trash").join(home.file_name().unwrap());
    (home, trash)
}

/// A scratch root on tmpfs when the host has one at /dev/shm: a million entries on a
/// journaled disk take minutes to make, which says nothing about the executor.
fn fast_scratch_root() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.join(super::harness::unique("skillbox-scratch-test"))
    } else {
        scratch_root()
    }
}

fn remove_test_root(scratch: &Path) {
    if scratch != scratch_root() {
        let _ = std::fs::remove_dir_all(scratch);
    }
}

fn assert_removed(path: &Path) {
    assert!(
        !path.exists(),
        "{} was left on disk after the call",
        path.display()
    );
}

#[test]
fn sandbox_removes_scratch_chain_deeper_than_stack_and_fd_limit() {
    let root = SkillRoot::new();
    root.python_skill(
        "deep",
        r#"
        home = os.environ["HOME"]
        os.chdir(home)
        # Built bottom-up so every operation stays near the top (each Landlock check walks
        # up to the root, so mkdir at depth k costs k): wrap the chain in a new folder.
        os.mkdir("chain")
        for _ in range(30000):
            os.mkdir("wrap")
            os.rename("chain", "wrap/d")
            os.rename("wrap", "chain")
        reply({"home": home})
        "#,
    );
    // 30,000 levels overflowed the executor's stack with a recursive removal; with 96
    // descriptors (the runtime paths' Landlock rules hold about 30 of them), a removal
    // holding one per level could never finish.
    let scratch = fast_scratch_root();
    let outcome = root
        .call("deep:run")
        .scratch_root(&scratch)
        .max_open_files(96)
        .deadline(Duration::from_secs(120))
        .run();
    let (home, trash) = leftovers(outcome.data(), &scratch);
    assert_removed(&home);
    assert_removed(&trash);
    remove_test_root(&scratch);
}

#[test]
fn sandbox_removes_a_million_scratch_entries() {
    let root = SkillRoot::new();
    root.python_skill_with(
        "wide",
        r#"
        home = os.environ["HOME"]
        for d in range(10):
            os.mkdir(os.path.join(home, str(d)))
        for i in range(1000000):
            os.symlink("x", os.path.join(home, str(i % 10), str(i)))
        reply({"home": home, "made": 1000000})
        "#,
        // A million entries on tmpfs are about a gigabyte of the kernel's memory, charged
        // to the call's memory cgroup.
        Manifest {
            skill: "execution: { timeout_ms: 240000, memory_mb: 4096 }",
            ..Manifest::default()
        },
    );
    let scratch = fast_scratch_root();
    let outcome = root
        .call("wide:run")
        .scratch_root(&scratch)
        .deadline(Duration::from_secs(300))
        .run();
    let data = outcome.data();
    assert_eq!(data["made"], 1_000_000, "{outcome}");
    let (home, trash) = leftovers(data, &scratch);
    assert_removed(&home);
    assert_removed(&trash);
    remove_test_root(&scratch);
}
