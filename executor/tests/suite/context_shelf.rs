//! A context's work folder kept between its calls on one executor (`workdir::shelf`): the
//! next call finds its unchanged files in place (the same inodes: nothing copied), sees
//! what the core changed or removed since, and never anything that changed on the
//! executor after the sync: not a file a process left running tried to rewrite (the call's
//! end killed it first), not a kept file altered on disk, not a link the tool made.

use std::time::Instant;

use serde_json::json;
use skillbox_executor::call;
use skillbox_executor::registry::Registry;
use skillbox_executor::sandbox::reaper::Releaser;
use skillbox_executor::sandbox::{Sandbox, SandboxConfig};
use skillbox_protocol::methods::{Envelope, SecretValue, ToolExecuteParams};
use skillbox_protocol::result::ToolResult;
use skillbox_protocol::workdir::WorkDir;

use super::context_files::runtime;
use super::harness::fake_core::FakeCore;
use super::harness::{running_as_root, scratch_root, shell_skill, SkillRoot};

/// Runs the shell skill in context `c1`, as the core names it, on `sandbox`; returns its
/// stdout once the call's end (and the folder's move to the shelf) is done.
fn run(sandbox: &Sandbox, root: &SkillRoot, core: &FakeCore) -> String {
    run_in(sandbox, root, core, "c1")
}

/// [`run`] in `context`.
fn run_in(sandbox: &Sandbox, root: &SkillRoot, core: &FakeCore, context: &str) -> String {
    let params = ToolExecuteParams {
        call_id: "shelf-call".into(),
        capability_token: SecretValue("tok".into()),
        skill: "shell".into(),
        tool: "run".into(),
        args: json!({}),
        envelope: Envelope::default(),
        traceparent: None,
        workdir: Some(WorkDir {
            context_id: Some(context.into()),
            ..core.workdir()
        }),
        script: None,
    };
    let registry = Registry::load(root.skills());
    let r: ToolResult = runtime().block_on(call::execute(
        sandbox,
        &registry,
        core,
        params,
        Instant::now(),
    ));
    Releaser::global().wait_idle();
    assert!(r.success, "{r:?}");
    r.data.as_ref().unwrap()["stdout"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A sandbox whose user ids are this test process's alone (a range picked by its pid): a
/// folder is kept only when no process of its user is left at the sync, and an id that
/// came from another test process may still have that process's killed leftovers
/// (not yet reaped) for a moment.
fn sandbox() -> Sandbox {
    let config = SandboxConfig {
        scratch_root: scratch_root(),
        max_concurrent_calls: 4,
        max_prestarted: 0,
        ..SandboxConfig::default()
    };
    let uid_base = 3_100_000 + (std::process::id() % 20_000) * 8;
    Sandbox::new(SandboxConfig { uid_base, ..config }).unwrap()
}

/// The one work folder kept on this test process's shelf (in the blob cache's folder).
fn the_kept_folder() -> std::path::PathBuf {
    let shelf = scratch_root()
        .join(".blobs")
        .join(std::process::id().to_string())
        .join("shelf");
    let kept: Vec<_> = std::fs::read_dir(&shelf).unwrap().flatten().collect();
    assert_eq!(kept.len(), 1, "{shelf:?}");
    kept[0].path()
}

/// Whether this machine gives calls users of their own (only those folders are kept).
fn kept_here() -> bool {
    if !running_as_root() {
        eprintln!(
            "SKIPPED: not root, so calls run without users of their own and no folder is kept"
        );
        return false;
    }
    true
}

#[test]
fn the_next_call_keeps_unchanged_files_in_place_and_sees_what_the_core_changed() {
    if !kept_here() {
        return;
    }
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "for f in *.txt; do printf '%s %s %s\\n' \"$f\" \"$(stat -c %i \"$f\")\" \"$(cat \"$f\")\"; done\n",
    );
    let core = FakeCore::with(&[("a.txt", b"one"), ("b.txt", b"two"), ("c.txt", b"three")]);
    let sandbox = sandbox();
    let first = run(&sandbox, &root, &core);
    let second = run(&sandbox, &root, &core);
    assert_eq!(
        first, second,
        "the same files, the same inodes: nothing was copied again"
    );
    let shelf = skillbox_executor::workdir::WorkShelf::of(sandbox.blobs()).unwrap();
    assert_eq!(shelf.len(), 1);

    // The core changes b.txt and removes c.txt between the calls.
    core.files
        .lock()
        .unwrap()
        .insert("b.txt".into(), b"TWO".to_vec());
    core.files.lock().unwrap().remove("c.txt");
    let third = run(&sandbox, &root, &core);
    let inode = |out: &str, name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .map(|l| l.split(' ').nth(1).unwrap().to_string())
    };
    assert_eq!(inode(&third, "a.txt"), inode(&first, "a.txt"), "{third}");
    assert!(
        third.contains("b.txt") && third.contains(" TWO\n"),
        "{third}"
    );
    assert!(
        !third.contains("c.txt"),
        "a file the core removed is gone: {third}"
    );
}

/// The context's next call gets the user its kept folder belongs to back (the id is free
/// between the calls): its files are not given to another user, so their change times do
/// not move (no `chown`, no second `stat` per file).
#[test]
fn the_next_call_runs_as_the_user_its_kept_folder_belongs_to() {
    if !kept_here() {
        return;
    }
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "printf '%s ' \"$(id -u)\"; stat -c '%u %i %z' a.txt\n",
    );
    let core = FakeCore::with(&[("a.txt", b"one")]);
    let sandbox = sandbox();
    let first = run(&sandbox, &root, &core);
    let second = run(&sandbox, &root, &core);
    let uid = first.split(' ').next().unwrap();
    assert!(
        first.starts_with(&format!("{uid} {uid} ")),
        "the file is the call's user's: {first}"
    );
    assert_eq!(
        first, second,
        "the same user, the same inode, the same change time"
    );
}

/// A folder its last sync found settled is taken by the next call without a walk; each
/// thing a settled folder never holds makes the next call walk it and lay it out as the
/// context holds it: a file of another mode, an empty folder, a second link to a file, a
/// folder of another mode. (A process left running is the test below; a link or a FIFO
/// the one after it.)
#[test]
fn what_a_tool_leaves_unsettled_is_laid_out_as_the_context_holds_it() {
    if !kept_here() {
        return;
    }
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "if [ ! -e done ]; then : > done; case \"$(cat case)\" in \
           mode) chmod 600 a.txt;; empty) mkdir empty;; hardlink) ln a.txt b.txt;; \
           dirmode) mkdir d; echo x > d/x.txt; chmod 755 d;; esac; fi; \
         stat -c '%n %a %h' a.txt $(ls -d b.txt d 2>/dev/null); ls -d empty 2>/dev/null; true\n",
    );
    let sandbox = sandbox();
    let cases = [
        ("mode", "a.txt 644 1\n"),
        ("empty", "a.txt 644 1\n"),
        ("hardlink", "a.txt 644 1\nb.txt 644 1\n"),
        ("dirmode", "a.txt 644 1\nd 700 2\n"),
    ];
    for (case, want) in cases {
        let core = FakeCore::with(&[("a.txt", b"one"), ("case", case.as_bytes())]);
        run_in(&sandbox, &root, &core, case);
        let second = run_in(&sandbox, &root, &core, case);
        assert_eq!(second, want, "{case}");
    }
}

#[test]
fn a_process_left_running_cannot_change_the_kept_folder() {
    if !kept_here() {
        return;
    }
    let root = SkillRoot::new();
    // The first call leaves a process (a session of its own: out of the tool's group; its
    // output elsewhere, so the call does not wait for it) that rewrites a.txt 1.5 s later,
    // long after the call ended and its folder was kept.
    shell_skill(
        &root,
        "if [ ! -e started ]; then : > started; (setsid sh -c 'sleep 1.5; printf evil > a.txt' </dev/null >/dev/null 2>&1 &) ; fi; sleep 0.1; cat a.txt\n",
    );
    let core = FakeCore::with(&[("a.txt", b"good")]);
    let sandbox = sandbox();
    assert_eq!(run(&sandbox, &root, &core), "good");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert_eq!(run(&sandbox, &root, &core), "good");
    assert_eq!(core.file("a.txt").as_deref(), Some(&b"good"[..]));
}

/// A process the call left writing the folder while it was synced back (a loop writing
/// a counter over a.txt in place, never empty, out of the tool's process group): whatever
/// it wrote after the sync read the file, the next call sees the bytes the core held.
#[test]
fn a_folder_written_while_it_was_synced_back_is_never_served_as_it_is() {
    if !kept_here() {
        return;
    }
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "if [ ! -e started ]; then : > started; (setsid sh -c 'i=0; while :; do i=$((i+1)); printf %08d $i 1<>a.txt; done' </dev/null >/dev/null 2>&1 &); sleep 0.2; fi; cat a.txt\n",
    );
    let core = FakeCore::with(&[("a.txt", b"0")]);
    let sandbox = sandbox();
    run(&sandbox, &root, &core);
    let held = String::from_utf8(core.file("a.txt").unwrap()).unwrap();
    let seen = run(&sandbox, &root, &core);
    assert_eq!(
        seen, held,
        "the core's bytes, not what the loop wrote later"
    );
}

#[test]
fn a_kept_file_altered_on_disk_or_a_link_the_tool_made_is_never_served() {
    if !kept_here() {
        return;
    }
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "cat a.txt; echo; ls -A | tr '\\n' ' '; ln -sf /etc/passwd link; mkfifo pipe 2>/dev/null; true\n",
    );
    let core = FakeCore::with(&[("a.txt", b"core's")]);
    let sandbox = sandbox();
    let first = run(&sandbox, &root, &core);
    assert!(first.starts_with("core's\na.txt "), "{first}");
    // Something alters the kept copy on disk (the shelf is root's, under the cache). The
    // tool left a link, so the folder is not settled: the next call checks every file.
    std::fs::write(the_kept_folder().join("a.txt"), "tampered").unwrap();
    let second = run(&sandbox, &root, &core);
    assert!(
        second.starts_with("core's\na.txt "),
        "the core's bytes, not the altered ones: {second}"
    );
    assert!(
        !second.contains("link") && !second.contains("pipe"),
        "{second}"
    );
}

/// A folder its last sync found settled is taken as it is, and the kernel watches it
/// (`workdir::watch`): a file of it altered on disk while it is kept (by root, here, after
/// a call that took it as it is) is seen, and the next call checks every file again.
#[test]
fn a_settled_kept_folder_altered_on_disk_is_checked_file_by_file_again() {
    if !kept_here() {
        return;
    }
    let root = SkillRoot::new();
    shell_skill(&root, "cat a.txt\n");
    let core = FakeCore::with(&[("a.txt", b"core's")]);
    let sandbox = sandbox();
    assert_eq!(run(&sandbox, &root, &core), "core's");
    assert_eq!(run(&sandbox, &root, &core), "core's");
    std::fs::write(the_kept_folder().join("a.txt"), "CORE'S").unwrap();
    assert_eq!(
        run(&sandbox, &root, &core),
        "core's",
        "the core's bytes, not the altered ones"
    );
}

/// A settled kept folder whose context's files changed on the core's side is trimmed by
/// what it records: the file the core replaced and the one it removed are gone, a new one
/// comes; and one also altered on disk meanwhile is checked file by file (the watch saw
/// it), so the altered bytes are never served.
#[test]
fn a_settled_kept_folder_whose_context_changed_serves_the_new_files_only() {
    if !kept_here() {
        return;
    }
    let root = SkillRoot::new();
    shell_skill(&root, "cat *.txt\n");
    let core = FakeCore::with(&[("a.txt", b"a1 "), ("b.txt", b"b1 "), ("c.txt", b"c1 ")]);
    let sandbox = sandbox();
    let put = |path: &str, bytes: Option<&[u8]>| {
        let mut files = core.files.lock().unwrap();
        match bytes {
            Some(b) => files.insert(path.to_string(), b.to_vec()),
            None => files.remove(path),
        };
    };
    assert_eq!(run(&sandbox, &root, &core), "a1 b1 c1 ");
    assert_eq!(run(&sandbox, &root, &core), "a1 b1 c1 ");
    put("b.txt", Some(b"b2 "));
    put("c.txt", None);
    put("d.txt", Some(b"d1 "));
    assert_eq!(run(&sandbox, &root, &core), "a1 b2 d1 ");
    assert_eq!(run(&sandbox, &root, &core), "a1 b2 d1 ");
    std::fs::write(the_kept_folder().join("a.txt"), "A! ").unwrap();
    put("d.txt", Some(b"d2 "));
    assert_eq!(
        run(&sandbox, &root, &core),
        "a1 b2 d2 ",
        "the core's bytes, not the altered ones"
    );
}

/// A call that rewrites a file of a watched folder through a second name outside it,
/// removed again before the call ends (so the folder looks as settled as before), has its
/// change sent back: the file's own watch saw the write.
#[test]
fn a_change_made_through_a_name_outside_the_folder_is_sent_back() {
    if !kept_here() {
        return;
    }
    let root = SkillRoot::new();
    shell_skill(&root, "cat a.txt\n");
    let core = FakeCore::with(&[("a.txt", b"one")]);
    let sandbox = sandbox();
    assert_eq!(run(&sandbox, &root, &core), "one");
    assert_eq!(run(&sandbox, &root, &core), "one");
    shell_skill(
        &root,
        "ln a.txt ../x && printf ONE > ../x && rm ../x; cat a.txt\n",
    );
    assert_eq!(run(&sandbox, &root, &core), "ONE");
    assert_eq!(core.file("a.txt").as_deref(), Some(&b"ONE"[..]));
    shell_skill(&root, "cat a.txt\n");
    assert_eq!(run(&sandbox, &root, &core), "ONE");
}

/// A settled kept folder whose context changed is watched again as soon as the new files
/// are laid out (the sync after that call does not walk it): what a later call changes in
/// it is still sent back, in a file just laid out, even through a second name outside the
/// folder (its own watch saw the write), and in a folder the lay-out made.
#[test]
fn a_trimmed_folder_watched_again_still_sends_back_what_the_next_call_changes() {
    if !kept_here() {
        return;
    }
    let root = SkillRoot::new();
    shell_skill(&root, "cat a.txt sub/b.txt\n");
    let core = FakeCore::with(&[("a.txt", b"a1 "), ("sub/b.txt", b"b1 ")]);
    let sandbox = sandbox();
    assert_eq!(run(&sandbox, &root, &core), "a1 b1 ");
    assert_eq!(run(&sandbox, &root, &core), "a1 b1 ");
    {
        let mut files = core.files.lock().unwrap();
        files.insert("sub/b.txt".into(), b"b2 ".to_vec());
        files.insert("new/c.txt".into(), b"c1 ".to_vec());
    }
    shell_skill(&root, "cat a.txt sub/b.txt new/c.txt\n");
    assert_eq!(run(&sandbox, &root, &core), "a1 b2 c1 ");
    shell_skill(
        &root,
        "ln new/c.txt ../x && printf c2 > ../x && rm ../x; cat new/c.txt\n",
    );
    assert_eq!(run(&sandbox, &root, &core), "c2");
    assert_eq!(core.file("new/c.txt").as_deref(), Some(&b"c2"[..]));
    shell_skill(&root, "printf e1 > new/e.txt\n");
    run(&sandbox, &root, &core);
    assert_eq!(core.file("new/e.txt").as_deref(), Some(&b"e1"[..]));
    assert_eq!(core.file("sub/b.txt").as_deref(), Some(&b"b2 "[..]));
}
