//! A call made in a context (`tool.execute` with `workdir`) and `run_skill_script`, run in
//! this process against a [`FakeCore`]: the context's files are laid out as the working
//! directory, what the tool creates, changes or removes goes back to the core, links and
//! FIFOs never do, a quota refusal fails the call; a script runs by shebang with its
//! arguments, a failed one shows its stdout, a path leaving `scripts/` is refused.

use std::time::Instant;

use serde_json::json;
use skillbox_executor::call;
use skillbox_executor::registry::Registry;
use skillbox_executor::sandbox::{Sandbox, SandboxConfig};
use skillbox_protocol::jsonrpc::code;
use skillbox_protocol::methods::{Envelope, ScriptRun, SecretValue, ToolExecuteParams};
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::workdir::WorkDir;

use super::harness::fake_core::FakeCore;
use super::harness::{assert_mentions, scratch_root, shell_skill, SkillRoot};

pub fn sandbox() -> Sandbox {
    Sandbox::new(SandboxConfig {
        scratch_root: scratch_root(),
        ..SandboxConfig::default()
    })
    .unwrap()
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `skill:tool` (or a script of `skill`) in the context `core` holds.
fn run(root: &SkillRoot, core: &FakeCore, skill: &str, script: Option<ScriptRun>) -> ToolResult {
    run_in(root, core, skill, script, core.workdir())
}

/// [`run`] with the list of the context's files the core sends given.
fn run_in(
    root: &SkillRoot,
    core: &FakeCore,
    skill: &str,
    script: Option<ScriptRun>,
    workdir: WorkDir,
) -> ToolResult {
    let params = ToolExecuteParams {
        call_id: "ctx-call".into(),
        capability_token: SecretValue("tok".into()),
        skill: skill.into(),
        tool: if script.is_some() {
            "run_skill_script"
        } else {
            "run"
        }
        .into(),
        args: json!({}),
        envelope: Envelope::default(),
        traceparent: None,
        workdir: Some(workdir),
        script,
    };
    let registry = Registry::load(root.skills());
    runtime().block_on(call::execute(
        &sandbox(),
        &registry,
        core,
        params,
        Instant::now(),
    ))
}

fn stdout(r: &ToolResult) -> String {
    assert!(r.success, "{r:?}");
    r.data.as_ref().unwrap()["stdout"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn a_call_in_a_context_runs_in_its_files_with_the_skill_folder_named() {
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "pwd; cat in/a.txt; echo; echo \"$SKILLBOX_SKILL_DIR\"; test -w . && echo writable\n",
    );
    let core = FakeCore::with(&[("in/a.txt", b"hello")]);
    let r = run(&root, &core, "shell", None);
    let out = stdout(&r);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].ends_with("/work"), "{out}");
    assert_eq!(lines[1], "hello", "{out}");
    assert_eq!(
        lines[2],
        root.skills().join("shell").to_string_lossy(),
        "{out}"
    );
    assert_eq!(lines[3], "writable", "{out}");
    assert_eq!(
        core.calls(),
        ["read in/a.txt"],
        "nothing changed, nothing sent"
    );
}

#[test]
fn files_the_tool_creates_changes_or_removes_go_back_to_the_core() {
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "printf new > out.txt; mkdir -p sub; printf deep > sub/d.txt; rm gone.txt; printf changed > change.txt\n",
    );
    let core = FakeCore::with(&[
        ("keep.txt", b"same"),
        ("gone.txt", b"bye"),
        ("change.txt", b"old"),
    ]);
    let r = run(&root, &core, "shell", None);
    assert!(r.success, "{r:?}");
    assert_eq!(core.file("out.txt").as_deref(), Some(&b"new"[..]));
    assert_eq!(core.file("sub/d.txt").as_deref(), Some(&b"deep"[..]));
    assert_eq!(core.file("change.txt").as_deref(), Some(&b"changed"[..]));
    assert_eq!(core.file("gone.txt"), None);
    assert_eq!(core.file("keep.txt").as_deref(), Some(&b"same"[..]));
    let calls = core.calls();
    assert!(calls.contains(&"delete gone.txt".to_string()), "{calls:?}");
    assert!(!calls.contains(&"write keep.txt".to_string()), "{calls:?}");
}

#[test]
fn a_script_made_executable_by_one_call_runs_in_the_next() {
    let root = SkillRoot::new();
    // The first call writes the script and makes it executable; a chmod of a file the
    // context already holds, with the same bytes, is a change too.
    shell_skill(
        &root,
        "printf '#!/bin/sh\\necho ran\\n' > run.sh; chmod +x run.sh; chmod +x held.sh\n",
    );
    let core = FakeCore::with(&[("held.sh", b"#!/bin/sh\necho held\n")]);
    let r = run(&root, &core, "shell", None);
    assert!(r.success, "{r:?}");
    let held = core.executable.lock().unwrap().clone();
    assert!(
        held.contains("run.sh") && held.contains("held.sh"),
        "{held:?}"
    );
    assert!(core.calls().contains(&"write held.sh".to_string()));
    // The next call gets both laid out 0755 and runs them; a file never made executable
    // stays 0644.
    core.files
        .lock()
        .unwrap()
        .insert("plain.txt".into(), b"x".to_vec());
    shell_skill(
        &root,
        "./run.sh; ./held.sh; stat -c '%a %n' run.sh held.sh plain.txt\n",
    );
    let out = stdout(&run(&root, &core, "shell", None));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        ["ran", "held", "755 run.sh", "755 held.sh", "644 plain.txt"],
        "{out}"
    );
    // chmod -x is kept as well.
    shell_skill(&root, "chmod -x run.sh\n");
    assert!(run(&root, &core, "shell", None).success);
    assert!(!core.executable.lock().unwrap().contains("run.sh"));
}

#[test]
fn links_and_fifos_the_tool_makes_are_not_sent_back() {
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "ln -s /etc/passwd link; ln -s keep.txt l2; mkfifo f; mkdir d; ln -s / d/root\n",
    );
    let core = FakeCore::with(&[("keep.txt", b"same")]);
    let r = run(&root, &core, "shell", None);
    assert!(r.success, "{r:?}");
    let files: Vec<String> = core.files.lock().unwrap().keys().cloned().collect();
    assert_eq!(files, ["keep.txt"]);
    assert!(
        core.calls().iter().all(|c| !c.starts_with("write")),
        "{:?}",
        core.calls()
    );
}

#[test]
fn a_quota_refusal_of_the_core_fails_the_call_as_resource_limit() {
    let root = SkillRoot::new();
    shell_skill(&root, "printf big > big.bin\n");
    let core = FakeCore::default();
    *core.refuse_writes.lock().unwrap() =
        Some((code::RESOURCE_LIMIT, "context over its 1 MiB quota".into()));
    let r = run(&root, &core, "shell", None);
    assert!(!r.success, "{r:?}");
    assert_eq!(r.error_kind, Some(ErrorKind::ResourceLimit));
    assert_mentions(
        r.error.as_deref().unwrap(),
        "big.bin: context over its 1 MiB quota",
    );
}

fn script_skill(root: &SkillRoot) {
    root.skill(
        "scripts",
        "name: scripts\ndescription: a skill of scripts\n",
        &[
            ("scripts/greet.py", "#!/usr/bin/env python3\nimport sys, os\nprint(sys.argv[1:], os.path.exists('in.txt'))\n"),
            ("scripts/fail.sh", "echo 'usage: fail.sh NAME'\necho 'no name given' >&2\nexit 1\n"),
            ("scripts/plain.rb", "puts 1\n"),
        ],
    );
}

fn script(path: &str, args: &[&str]) -> Option<ScriptRun> {
    Some(ScriptRun {
        path: path.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
    })
}

#[test]
fn run_skill_script_runs_by_shebang_with_its_arguments_in_the_context() {
    let root = SkillRoot::new();
    script_skill(&root);
    let core = FakeCore::with(&[("in.txt", b"x")]);
    let r = run(
        &root,
        &core,
        "scripts",
        script("scripts/greet.py", &["a", "b c"]),
    );
    assert_eq!(stdout(&r), "['a', 'b c'] True\n");
}

#[test]
fn run_skill_script_failure_shows_the_exit_code_and_the_usage_it_printed() {
    let root = SkillRoot::new();
    script_skill(&root);
    let r = run(
        &root,
        &FakeCore::default(),
        "scripts",
        script("scripts/fail.sh", &[]),
    );
    assert!(!r.success, "{r:?}");
    assert_eq!(r.error_kind, Some(ErrorKind::ToolError));
    let e = r.error.unwrap();
    assert!(e.starts_with("exited with code 1"), "{e}");
    assert_mentions(&e, "--- stdout");
    assert_mentions(&e, "usage: fail.sh NAME");
    assert_mentions(&e, "--- stderr");
    assert_mentions(&e, "no name given");
}

#[test]
fn run_skill_script_refuses_paths_leaving_scripts_and_unknown_kinds() {
    let root = SkillRoot::new();
    script_skill(&root);
    std::os::unix::fs::symlink(
        "../skill.yaml",
        root.skills().join("scripts/scripts/out.sh"),
    )
    .unwrap();
    let core = FakeCore::default();
    for (path, kind, says) in [
        ("scripts/../skill.yaml", ErrorKind::InvalidArgs, "`..`"),
        ("/etc/passwd", ErrorKind::InvalidArgs, "absolute"),
        ("skill.yaml", ErrorKind::InvalidArgs, "not under scripts/"),
        (
            "scripts/out.sh",
            ErrorKind::InvalidArgs,
            "leads out of scripts/",
        ),
        ("scripts/none.py", ErrorKind::NotFound, "no script"),
        ("scripts/plain.rb", ErrorKind::InvalidArgs, ".py (python3)"),
    ] {
        let r = run(&root, &core, "scripts", script(path, &[]));
        assert!(!r.success, "{path}: {r:?}");
        assert_eq!(r.error_kind, Some(kind), "{path}: {r:?}");
        assert_mentions(r.error.as_deref().unwrap(), says);
    }
}

#[test]
fn a_context_of_many_files_is_laid_out_whole_each_fetched_once() {
    let root = SkillRoot::new();
    shell_skill(&root, "cat d*/f*.txt | sha256sum\n");
    let files: Vec<(String, Vec<u8>)> = (0..48)
        .map(|i| {
            (
                format!("d{}/f{i:02}.txt", i % 6),
                format!("file {i}\n").into_bytes(),
            )
        })
        .collect();
    let held: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    let core = FakeCore::with(&held);
    let r = run(&root, &core, "shell", None);
    // The shell's glob orders d0/f00, d0/f06, ..., d1/f01, ...: the same order here.
    let mut sorted = files.clone();
    sorted.sort();
    let all: Vec<u8> = sorted.iter().flat_map(|(_, b)| b.clone()).collect();
    let out = stdout(&r);
    assert!(
        out.starts_with(&super::harness::fake_core::sha256(&all)),
        "{out}"
    );
    let mut reads = core.calls();
    reads.sort();
    let mut expected: Vec<String> = sorted.iter().map(|(p, _)| format!("read {p}")).collect();
    expected.sort();
    assert_eq!(reads, expected, "each file read once, fetched ahead or not");
}

#[test]
fn files_of_one_content_are_laid_out_each_with_its_mode_from_one_fetch() {
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "for f in $(ls -d */* | sort); do printf '%s %s ' \"$f\" \"$(cat $f)\"; \
         if [ -x \"$f\" ]; then echo x; else echo -; fi; done\n",
    );
    // Twelve files, three contents, in six folders; one copy of each content executable.
    let files: Vec<(String, Vec<u8>)> = (0..12)
        .map(|i| {
            (
                format!("d{}/f{i:02}", i % 6),
                format!("c{}", i % 3).into_bytes(),
            )
        })
        .collect();
    let core = core_holding(&files);
    {
        let mut executable = core.executable.lock().unwrap();
        for i in 0..3 {
            executable.insert(format!("d{}/f{i:02}", i % 6));
        }
    }
    let out = stdout(&run(&root, &core, "shell", None));
    let mut expected: Vec<String> = (0..12)
        .map(|i| {
            let mode = if i < 3 { "x" } else { "-" };
            format!("d{}/f{i:02} c{} {mode}", i % 6, i % 3)
        })
        .collect();
    expected.sort();
    let got: Vec<&str> = out.lines().collect();
    assert_eq!(got, expected, "{out}");
    assert_eq!(
        core.calls().len(),
        3,
        "one read per content: {:?}",
        core.calls()
    );
}

/// `n` bytes of a pattern that `seed` shifts.
fn pattern(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| {
            u8::try_from(i % 251)
                .unwrap()
                .wrapping_mul(31)
                .wrapping_add(seed)
        })
        .collect()
}

/// A tool that prints each file of the context's folders: its path, SHA-256 and `x` when
/// executable, `-` when not.
const LIST_FILES: &str = "for f in $(ls -d */* | sort); do s=$(sha256sum < \"$f\"); \
     if [ -x \"$f\" ]; then m=x; else m=-; fi; echo \"$f ${s%% *} $m\"; done\n";

#[test]
fn large_files_come_over_a_stream_into_their_folder_each_content_once() {
    let root = SkillRoot::new();
    shell_skill(&root, LIST_FILES);
    let (a, b) = (pattern(1, 5 << 19), pattern(7, (3 << 19) + 5));
    let files = vec![
        ("d0/a1".to_string(), a.clone()),
        ("d1/a2".to_string(), a.clone()),
        ("d1/b".to_string(), b.clone()),
        ("d2/small".to_string(), b"tiny".to_vec()),
    ];
    let core = core_holding(&files);
    core.streams
        .store(true, std::sync::atomic::Ordering::SeqCst);
    // The second file of a content is executable, the first not: each keeps its own.
    core.executable.lock().unwrap().insert("d1/a2".into());
    let out = stdout(&run(&root, &core, "shell", None));
    let sha = super::harness::fake_core::sha256;
    let expected = [
        format!("d0/a1 {} -", sha(&a)),
        format!("d1/a2 {} x", sha(&a)),
        format!("d1/b {} -", sha(&b)),
        format!("d2/small {} -", sha(b"tiny")),
    ];
    assert_eq!(out.lines().collect::<Vec<_>>(), expected, "{out}");
    let mut streamed = core.stream_log.lock().unwrap().clone();
    streamed.sort();
    assert_eq!(
        streamed,
        ["stream d0/a1", "stream d1/b"],
        "one stream per content"
    );
    assert_eq!(
        core.calls(),
        ["read d2/small"],
        "a small file comes in chunks"
    );
}

#[test]
fn a_stream_cut_off_fails_the_call_naming_the_file_before_the_tool_runs() {
    let root = SkillRoot::new();
    shell_skill(&root, "echo ran\n");
    let files = vec![
        ("d0/big".to_string(), pattern(3, 3 << 20)),
        ("d0/other".to_string(), pattern(5, 2 << 20)),
    ];
    let core = core_holding(&files);
    core.streams
        .store(true, std::sync::atomic::Ordering::SeqCst);
    *core.cut_streams_after.lock().unwrap() = Some(1 << 20);
    let r = run(&root, &core, "shell", None);
    assert!(!r.success, "{r:?}");
    let error = r.error.as_deref().unwrap();
    assert_mentions(error, "does not match its size");
    assert!(
        error.contains("d0/big") || error.contains("d0/other"),
        "{error}"
    );
    assert!(
        !r.data.as_ref().is_some_and(|d| d["stdout"] == "ran\n"),
        "the tool never ran: {r:?}"
    );
}

#[test]
fn a_file_the_core_cannot_give_fails_the_call_naming_it() {
    let root = SkillRoot::new();
    shell_skill(&root, "echo ran\n");
    let files = numbered_files(8, |i| format!("f{i}.txt"));
    let core = core_holding(&files);
    let workdir = core.workdir();
    // The core lost f5.txt after it listed the context's files.
    core.files.lock().unwrap().remove("f5.txt");
    let r = run_in(&root, &core, "shell", None, workdir);
    assert!(!r.success, "{r:?}");
    assert_mentions(r.error.as_deref().unwrap(), "f5.txt");
    assert!(
        !r.data.as_ref().is_some_and(|d| d["stdout"] == "ran\n"),
        "the tool never ran: {r:?}"
    );
}

/// `n` files named by `name`, each holding its number.
fn numbered_files(n: usize, name: impl Fn(usize) -> String) -> Vec<(String, Vec<u8>)> {
    (0..n)
        .map(|i| (name(i), format!("file {i}\n").into_bytes()))
        .collect()
}

/// A core holding `files`.
fn core_holding(files: &[(String, Vec<u8>)]) -> FakeCore {
    let held: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    FakeCore::with(&held)
}
