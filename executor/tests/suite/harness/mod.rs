//! Test harness: writes skills into a temporary skills root, runs
//! `skillbox-executor exec` on them and parses the one-line result (docs/http-api.md, docs/cli.md).
//!
//! Attack tools are Python scripts speaking `protocol: jsonrpc`. Each script is run after
//! [`PRELUDE`], which reads the `tool.invoke` request and gives the script:
//! - `args`: the call's arguments;
//! - `attempt(f)`: runs `f()` and returns `{"ok": true, "value": ...}` or, on `OSError`,
//!   `{"ok": false, "errno": N, "name": "EACCES", "message": ...}`;
//! - `libc_call(name, *args)`: a libc function through ctypes, raising `OSError` on -1;
//! - `reply(result)`: the final answer.
//!
//! The executor runs as root here, so every call runs as its own user id and the skill
//! folders must be readable by others: [`SkillRoot`] makes its folders 0755 and its files
//! 0644 (the temporary dir itself 0711).
//!
//! All tests share one scratch root, the executor's default one ([`scratch_root`]):
//! the per-call user ids are claimed through lock files under `<scratch root>/.uids`, so
//! two executors with different scratch roots would hand the same user id to two calls in
//! flight and kill each other's tool processes (see
//! `limits::calls_under_different_scratch_roots_get_different_users`).

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

mod call;
pub mod fake_core;
pub mod fake_proxy;
pub mod in_process;
pub use call::{Call, Outcome};

/// The binary under test.
pub const EXECUTOR: &str = env!("CARGO_BIN_EXE_skillbox-executor");

/// Longest a single `exec` may take before the test kills it and fails.
const EXEC_DEADLINE: Duration = Duration::from_secs(30);

/// Python run before every attack script (see the module docs).
pub const PRELUDE: &str = r#"
import ctypes, errno, json, os, signal, socket, sys, time
_request = json.loads(sys.stdin.readline())
args = _request["params"]["args"]
call_id = _request["params"]["call_id"]
def attempt(f):
    try:
        return {"ok": True, "value": f()}
    except OSError as e:
        return {"ok": False, "errno": e.errno, "name": errno.errorcode.get(e.errno, "?"), "message": str(e)}
_libc = ctypes.CDLL(None, use_errno=True)
def libc_call(name, *a):
    r = getattr(_libc, name)(*a)
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
def reply(result):
    if isinstance(result, dict) and os.environ.get("SKILLBOX_CALL_ID") == "prestarted":
        result["_prestarted"] = True
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": 0, "result": result}) + "\n")
    sys.stdout.flush()
"#;

/// The scratch root every test passes with `--scratch-root`: the executor's default, so
/// that all executors on this host share one pool of per-call user ids.
pub fn scratch_root() -> PathBuf {
    std::env::temp_dir().join("skillbox-scratch")
}

/// A name no other test (process) uses, for paths outside the test's own tempdir.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether `program` is on PATH; says SKIPPED otherwise.
pub fn have(program: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()));
    if !found {
        eprintln!("SKIPPED {program}: not installed on this machine");
    }
    found
}

/// The Go program `source` built as `dir/name` with the machine's Go toolchain (no
/// module, a cache of its own); `None` (SKIPPED said) where Go is missing.
pub fn build_go(dir: &Path, name: &str, source: &str) -> Option<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    if !have("go") {
        return None;
    }
    let src = tempfile::tempdir().unwrap();
    let main = src.path().join("main.go");
    std::fs::write(&main, source).unwrap();
    let out = dir.join(name);
    let status = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&out)
        .arg(&main)
        .env("GOCACHE", src.path().join("cache"))
        .env("GOPATH", src.path().join("path"))
        .env("GO111MODULE", "off")
        .env("HOME", src.path())
        .status()
        .unwrap();
    assert!(status.success(), "go build failed");
    chmod(&out, 0o755);
    Some(out)
}

/// Sets `mode` on `path`.
pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", path.display()));
}

/// Makes a tree readable by others: folders 0755, files 0644 (symlinks left alone).
pub fn open_up(path: &Path) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    if meta.file_type().is_symlink() {
        return;
    }
    if meta.is_dir() {
        chmod(path, 0o755);
        for entry in std::fs::read_dir(path).unwrap() {
            open_up(&entry.unwrap().path());
        }
    } else {
        chmod(path, 0o644);
    }
}

/// Extra YAML for a generated skill.
#[derive(Debug, Default, Clone, Copy)]
pub struct Manifest<'a> {
    /// Top-level lines (`permissions:`, `execution:`), unindented.
    pub skill: &'a str,
    /// Lines of the tool entry, indented by four spaces (`timeout_ms: 1500`).
    pub tool: &'a str,
    /// The tool's parameters schema as flow YAML/JSON; `{type: object}` when empty.
    pub parameters: &'a str,
}

/// How a test's tool process starts: when the call arrives (cold), or before it, as a
/// warm start (`execution: { prestart: 1 }`: `exec` starts the process, waits until it
/// blocks reading its request, then hands it the call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Started by the call.
    Cold,
    /// Prestarted.
    Prestarted,
}

impl Start {
    /// The top-level manifest lines that ask for this start.
    pub fn manifest(self) -> &'static str {
        match self {
            Start::Cold => "",
            Start::Prestarted => "execution: { prestart: 1 }",
        }
    }

    /// Asserts the call ran in a process started this way: [`PRELUDE`]'s `reply` marks
    /// the answer of a prestarted process (`SKILLBOX_CALL_ID=prestarted`) `_prestarted`.
    pub fn check(self, outcome: &Outcome) {
        let marked = outcome.data().get("_prestarted") == Some(&Value::Bool(true));
        assert_eq!(
            marked,
            self == Start::Prestarted,
            "asked for a {self:?} start: {}",
            outcome.data()
        );
    }

    /// The `SKILLBOX_CALL_ID` a tool started this way sees.
    pub fn env_call_id(self, outcome: &Outcome) -> String {
        match self {
            Start::Cold => outcome.call_id().to_string(),
            Start::Prestarted => "prestarted".to_string(),
        }
    }
}

/// A temporary skills root, removed on drop.
#[derive(Debug)]
pub struct SkillRoot {
    dir: tempfile::TempDir,
    skills: PathBuf,
}

impl SkillRoot {
    /// An empty skills root: `<tempdir 0711>/skills 0755`.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        chmod(dir.path(), 0o711);
        let skills = dir.path().join("skills");
        std::fs::create_dir(&skills).unwrap();
        chmod(&skills, 0o755);
        Self { dir, skills }
    }

    /// The tempdir holding the skills root; a place outside every skill for test files.
    pub fn base(&self) -> &Path {
        self.dir.path()
    }

    /// The skills root.
    pub fn skills(&self) -> &Path {
        &self.skills
    }

    /// Writes a skill folder with `skill.yaml` and `files`, readable by others.
    pub fn skill(&self, name: &str, manifest: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = self.skills.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("skill.yaml"), manifest).unwrap();
        for (path, text) in files {
            let path = dir.join(path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            std::fs::write(path, text).unwrap();
        }
        open_up(&dir);
        dir
    }

    /// A skill `name` with one jsonrpc tool `run`: `python3 tool.py`, where `tool.py` is
    /// [`PRELUDE`] followed by `script`.
    pub fn python_skill(&self, name: &str, script: &str) -> PathBuf {
        self.python_skill_with(name, script, Manifest::default())
    }

    /// [`SkillRoot::python_skill`] whose process starts as `start` says.
    pub fn python_skill_as(&self, start: Start, name: &str, script: &str) -> PathBuf {
        self.python_skill_with(
            name,
            script,
            Manifest {
                skill: start.manifest(),
                ..Manifest::default()
            },
        )
    }

    /// [`SkillRoot::python_skill`] with extra manifest lines.
    pub fn python_skill_with(&self, name: &str, script: &str, extra: Manifest<'_>) -> PathBuf {
        let parameters = if extra.parameters.is_empty() {
            "{type: object}"
        } else {
            extra.parameters
        };
        let manifest = format!(
            "name: {name}\n\
             description: escape-suite skill {name}\n\
             {skill}\n\
             tools:\n  \
               - name: run\n    \
                 description: runs the test script\n    \
                 command: [\"python3\", \"tool.py\"]\n    \
                 protocol: jsonrpc\n    \
                 parameters: {parameters}\n\
             {tool}\n",
            skill = extra.skill,
            tool = extra.tool,
        );
        let script = format!("{PRELUDE}\n{}\n", dedent(script));
        self.skill(name, &manifest, &[("tool.py", &script)])
    }

    /// A call of `tool` (`SKILL:TOOL`) on this root with `{}` as arguments.
    pub fn call(&self, tool: &str) -> Call<'_> {
        Call::new(self, tool)
    }
}

/// Removes the common leading whitespace of `script`'s lines (tests indent their Python).
fn dedent(script: &str) -> String {
    let indent = script
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    script
        .lines()
        .map(|l| l.get(indent..).unwrap_or_else(|| l.trim_start()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether the tests run as root, so that each call runs as its own user.
pub fn running_as_root() -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Copies a folder tree (files and folders only).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Asserts that an `attempt(...)` result failed with `errno`.
#[track_caller]
pub fn assert_errno(attempt: &Value, errno: i32, what: &str) {
    assert_eq!(
        attempt["ok"], false,
        "{what} was allowed (expected errno {errno}): {attempt}"
    );
    assert_eq!(
        attempt["errno"],
        Value::from(errno),
        "{what} failed with another errno than {errno}: {attempt}"
    );
}

/// Asserts that an `attempt(...)` result succeeded and returns its value.
#[track_caller]
pub fn assert_allowed<'a>(attempt: &'a Value, what: &str) -> &'a Value {
    assert_eq!(attempt["ok"], true, "{what} was refused: {attempt}");
    &attempt["value"]
}

/// Asserts that `message` contains `fragment` (case-insensitive).
#[track_caller]
pub fn assert_mentions(message: &str, fragment: &str) {
    assert!(
        message.to_lowercase().contains(&fragment.to_lowercase()),
        "{message:?} does not mention {fragment:?}"
    );
}

/// `Ok` when process `pid` of user `uid` is gone or a zombie (dead, waiting to be reaped)
/// within a second (a SIGKILL sent just before may still be in delivery); a live process of
/// another user is a reused pid and counts as gone.
pub fn is_dead(pid: i64, uid: u32) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        match still_running(pid, uid) {
            None => return Ok(()),
            Some(stat) if Instant::now() >= deadline => {
                return Err(format!(
                    "process {pid} of user {uid} is still running: {stat}"
                ))
            }
            Some(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// The `stat` line of `pid` when it is a live process of `uid`.
fn still_running(pid: i64, uid: u32) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dir = format!("/proc/{pid}");
    let meta = std::fs::metadata(&dir).ok()?;
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or("?");
    (meta.uid() == uid && state != "Z" && state != "X").then_some(stat)
}

/// A skill `shell` with one plain tool `run` that runs `script` with sh.
pub fn shell_skill(root: &SkillRoot, script: &str) {
    root.skill(
        "shell",
        "name: shell\n\
         description: a plain shell tool\n\
         tools:\n  \
           - name: run\n    \
             description: runs tool.sh\n    \
             command: [\"sh\", \"tool.sh\"]\n    \
             protocol: plain\n    \
             parameters: {type: object}\n",
        &[("tool.sh", script)],
    );
}
