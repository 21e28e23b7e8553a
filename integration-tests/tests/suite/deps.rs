//! Dependencies a skill brings, under `skillbox up`, against a package index on
//! 127.0.0.1 serving wheels the test builds itself (`harness/pyindex.py`), named
//! `index.test` by `[egress] resolve`:
//!
//! - published-shaped skills (a SKILL.md and a script that imports its requirement)
//!   are unavailable until built, then their scripts and commands import the package from
//!   an environment of their own (two skills, two versions of one package);
//! - a requirement missing from the index, an sdist-only one, a wheel whose hash differs
//!   from the pin and a wheel linked on another host each fail the build with the reason,
//!   and the skill stays unavailable saying so;
//! - the environment is read-only to the skill's programs;
//! - an index whose files live on another host (PyPI's layout) builds when `[deps]
//!   file_hosts` names that host, and an operator's constraint pins what a skill leaves
//!   open.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::harness::skills::{open_up, write};
use crate::harness::{Options, Skillbox};

/// The index process and its port, for the whole test process (`node_deps.rs` uses it
/// too).
pub(super) struct Index {
    pub(super) port: u16,
    /// The plain port `/_counts` is asked on (the same as `port` unless the index speaks
    /// HTTPS).
    counts_port: u16,
    _child: Child,
    _root: tempfile::TempDir,
}

pub(super) fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| {
        start_index(
            &json!([
                {"name": "skbdemo", "version": "1.0"},
                {"name": "skbdemo", "version": "2.0"},
                {"name": "skbsrc", "version": "1.0", "kind": "sdist"},
                {"name": "skboff", "version": "1.0", "kind": "offsite"},
                {"name": "skbsplit", "version": "1.0", "kind": "split"},
            ]),
            None,
        )
    })
}

/// An index of its own serving `spec` (`harness/pyindex.py`), sending files at most at
/// `rate` bytes per second.
pub(super) fn start_index(spec: &Value, rate: Option<u64>) -> Index {
    spawn_index(spec, rate, None)
}

/// An index of its own serving `spec` over HTTPS with the certificate and key of the PEM
/// files `tls` names.
pub(super) fn start_tls_index(spec: &Value, tls: (&Path, &Path)) -> Index {
    spawn_index(spec, None, Some(tls))
}

fn spawn_index(spec: &Value, rate: Option<u64>, tls: Option<(&Path, &Path)>) -> Index {
    let root = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/harness/pyindex.py");
    let mut command = Command::new("python3");
    command.arg(&script).arg(root.path()).arg(spec.to_string());
    if let Some(rate) = rate {
        command.arg(rate.to_string());
    }
    if let Some((cert, key)) = tls {
        command.env(
            "PYINDEX_TLS",
            format!("{}:{}", cert.display(), key.display()),
        );
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the test index");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let ports: Vec<u16> = (line.split_whitespace())
        .map(|p| p.parse().expect("the index prints its port"))
        .collect();
    let port = *ports.first().expect("the index prints its port");
    Index {
        port,
        counts_port: ports.get(1).copied().unwrap_or(port),
        _child: child,
        _root: root,
    }
}

impl Index {
    /// How many GETs the index answered for each path.
    pub(super) fn counts(&self) -> Value {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.counts_port)).unwrap();
        write!(s, "GET /_counts HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str(body).unwrap()
    }
}

/// `(skill, requirements.txt)`: each a SKILL.md and `scripts/show.py`, which prints the
/// version of the package it imports.
const SKILLS: [(&str, &str); 6] = [
    // A line skillbox does not take (another index): named in the record, not dropped.
    ("demo-one", "skbdemo==1.0\n--extra-index-url http://elsewhere.test/simple\n"),
    ("demo-two", "skbdemo==2.0\n"),
    ("needs-missing", "skbnothere==1.0\n"),
    ("needs-sdist", "skbsrc==1.0\n"),
    (
        "bad-hash",
        "skbdemo==1.0 --hash=sha256:0000000000000000000000000000000000000000000000000000000000000000\n",
    ),
    ("needs-offsite", "skboff==1.0\n"),
];

/// A published-shaped skill in `dir`: a SKILL.md, `scripts/requirements.txt` and
/// `scripts/show.py`, which prints the version of `module`.
pub(super) fn write_show_skill(dir: &Path, name: &str, requirements: &str, module: &str) {
    write(
        &dir.join("SKILL.md"),
        &format!("---\nname: {name}\ndescription: Shows a package's version.\n---\nRun `python3 scripts/show.py`.\n"),
    );
    write(&dir.join("scripts/requirements.txt"), requirements);
    write(
        &dir.join("scripts/show.py"),
        &format!("import {module}\nprint({module}.VALUE)\n"),
    );
    open_up(dir);
}

fn prepare(ws: &Path) {
    let port = index().port;
    for (name, requirements) in SKILLS {
        let dir = ws.join("skills").join(name);
        let module = requirements.split("==").next().unwrap();
        write_show_skill(&dir, name, requirements, module);
    }
    use_index(ws, port);
}

/// The workspace's configuration building from the index on `port` (`index.test`, its
/// files also on `files.other.test`, both pinned to 127.0.0.1), on demand.
pub fn use_index(ws: &Path, port: u16) {
    let mut toml = std::fs::read_to_string(ws.join("skillbox.toml")).unwrap();
    toml = toml.replacen(
        "allow_private = [",
        &format!("allow_private = [\"index.test:{port}\", "),
        1,
    );
    toml.push_str(&format!(
        "\n[deps]\nindex_url = \"http://index.test:{port}/simple\"\nbuild_on_load = false\n\n\
         [egress]\nresolve = {{ \"index.test\" = \"127.0.0.1\", \"files.other.test\" = \"127.0.0.1\" }}\n"
    ));
    std::fs::write(ws.join("skillbox.toml"), toml).unwrap();
}

pub(super) fn build(sb: &Skillbox, skill: &str) -> Value {
    sb.request("POST", &format!("/v1/skills/{skill}/deps"), None)
        .json()
}

pub(super) fn script(sb: &Skillbox, skill: &str) -> Value {
    sb.request(
        "POST",
        "/v1/tools/call",
        Some(
            &json!({"tool": "run_skill_script", "context_id": format!("deps-{skill}"),
                     "args": {"name": skill, "script": "show.py"}}),
        ),
    )
    .json()
}

fn problem(sb: &Skillbox, skill: &str) -> String {
    let detail = sb
        .request("GET", &format!("/v1/skills/{skill}"), None)
        .json();
    detail["dependencies"]["problem"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_skill_runs_with_the_dependencies_built_for_it_and_a_bad_build_says_why() {
    let sb = Skillbox::start(Options {
        prepare: Some(prepare),
        ..Options::default()
    });
    // Before a build: unavailable, saying what to run.
    let why = problem(&sb, "demo-one");
    assert!(why.contains("skillbox skill deps demo-one"), "{why}");
    let r = script(&sb, "demo-one");
    assert_eq!(r["success"], false, "{r}");
    assert!(r.to_string().contains("not built"), "{r}");

    // Built: the lock names the wheel with its SHA-256; the script imports it.
    let built = build(&sb, "demo-one");
    assert_eq!(built["ok"], true, "{built}");
    let packages = built["packages"].as_array().unwrap();
    assert_eq!(packages.len(), 1, "{built}");
    assert_eq!(packages[0]["name"], "skbdemo");
    assert_eq!(packages[0]["sha256"].as_str().unwrap().len(), 64, "{built}");
    assert!(
        built["not_taken"].to_string().contains("--extra-index-url"),
        "the line not taken is named in the record: {built}"
    );
    assert_eq!(problem(&sb, "demo-one"), "");
    let r = script(&sb, "demo-one");
    assert_eq!(
        r["data"]["stdout"].as_str().map(str::trim),
        Some("1.0"),
        "{r}"
    );
    // Another version for another skill, side by side.
    assert_eq!(build(&sb, "demo-two")["ok"], true);
    let r = script(&sb, "demo-two");
    assert_eq!(
        r["data"]["stdout"].as_str().map(str::trim),
        Some("2.0"),
        "{r}"
    );
    // exec_command under the skill finds it too; the environment is read-only.
    let r = sb
        .request(
            "POST",
            "/v1/tools/call",
            Some(&json!({"tool": "exec_command", "context_id": "deps-exec",
                         "args": {"skill": "demo-one", "yield_ms": 20000,
                                  "cmd": "python3 -c 'import skbdemo; print(skbdemo.VALUE)'; touch \"$PYTHONPATH/x\" && echo WROTE || echo READONLY"}})),
        )
        .json();
    let out = r["data"]["output"].as_str().unwrap_or_default();
    assert!(
        out.contains("1.0") && out.contains("READONLY") && !out.contains("WROTE"),
        "{r}"
    );

    // Builds that must fail, each with its reason; the skill stays unavailable.
    for (skill, why) in [
        ("needs-missing", "No matching distribution"),
        ("needs-sdist", "No matching distribution"),
        ("bad-hash", "HASHES"),
        ("needs-offsite", "403"),
    ] {
        let built = build(&sb, skill);
        assert_eq!(built["ok"], false, "{skill}: {built}");
        assert!(
            built["log_tail"].as_str().unwrap().contains(why),
            "{skill}: {built}"
        );
        if skill == "needs-offsite" {
            // The proxy's refusal is in the build's record, not only pip's "403".
            let refused = built["egress_refused"].to_string();
            assert!(refused.contains("files.other.test:9"), "{built}");
            let tail = built["log_tail"].as_str().unwrap();
            assert!(
                tail.contains("egress refused: files.other.test:9"),
                "{built}"
            );
        }
        let p = problem(&sb, skill);
        assert!(p.contains("failed to build"), "{skill}: {p}");
        let r = script(&sb, skill);
        assert_eq!(r["success"], false, "{skill}: {r}");
    }
}

/// A skill whose wheel the index links on `files.split.test` (PyPI's layout), and one
/// that leaves `skbdemo` open, under `[deps] file_hosts` and `constraints`.
fn prepare_pypi_layout(ws: &Path) {
    let port = index().port;
    for (name, requirements, module) in [
        ("needs-split", "skbsplit==1.0\n", "skbsplit"),
        ("open-demo", "skbdemo\n", "skbdemo"),
    ] {
        write_show_skill(&ws.join("skills").join(name), name, requirements, module);
    }
    let mut toml = std::fs::read_to_string(ws.join("skillbox.toml")).unwrap();
    toml = toml.replacen(
        "allow_private = [",
        &format!("allow_private = [\"index.test:{port}\", \"files.split.test:{port}\", "),
        1,
    );
    toml.push_str(&format!(
        "\n[deps]\nindex_url = \"http://index.test:{port}/simple\"\nbuild_on_load = false\n\
         file_hosts = [\"http://files.split.test:{port}\"]\nconstraints = [\"skbdemo<2\"]\n\n\
         [egress]\nresolve = {{ \"index.test\" = \"127.0.0.1\", \"files.split.test\" = \"127.0.0.1\" }}\n"
    ));
    std::fs::write(ws.join("skillbox.toml"), toml).unwrap();
}

#[test]
fn files_on_the_indexs_file_host_build_and_an_operator_constraint_wins() {
    let sb = Skillbox::start(Options {
        prepare: Some(prepare_pypi_layout),
        ..Options::default()
    });
    let built = build(&sb, "needs-split");
    assert_eq!(built["ok"], true, "{built}");
    let r = script(&sb, "needs-split");
    assert_eq!(
        r["data"]["stdout"].as_str().map(str::trim),
        Some("1.0"),
        "{r}"
    );
    // Left open by the skill, the index's newest would be 2.0: the constraint pins it.
    let built = build(&sb, "open-demo");
    assert_eq!(built["ok"], true, "{built}");
    let r = script(&sb, "open-demo");
    assert_eq!(
        r["data"]["stdout"].as_str().map(str::trim),
        Some("1.0"),
        "{r}"
    );
    let detail = sb.request("GET", "/v1/skills/open-demo", None).json();
    assert_eq!(
        detail["dependencies"]["constraints"],
        json!(["skbdemo<2"]),
        "{detail}"
    );
}

/// The index settings of [`prepare`] with builds on load (the default), no skill yet.
fn prepare_build_on_load(ws: &Path) {
    let port = index().port;
    let mut toml = std::fs::read_to_string(ws.join("skillbox.toml")).unwrap();
    toml = toml.replacen(
        "allow_private = [",
        &format!("allow_private = [\"index.test:{port}\", "),
        1,
    );
    toml.push_str(&format!(
        "\n[deps]\nindex_url = \"http://index.test:{port}/simple\"\n\n\
         [egress]\nresolve = {{ \"index.test\" = \"127.0.0.1\" }}\n"
    ));
    std::fs::write(ws.join("skillbox.toml"), toml).unwrap();
}

/// `skill add` through the running core says which added skill has its dependencies
/// being built and how to watch them; with `--wait` it waits for the build (a progress
/// line on stderr, plain lines when it is not a terminal) and says how it ended.
#[test]
fn skill_add_says_dependencies_are_being_built_and_waits_for_them_with_wait() {
    let sb = Skillbox::start(Options {
        prepare: Some(prepare_build_on_load),
        ..Options::default()
    });
    let source = tempfile::tempdir().unwrap();
    let dir = source.path().join("demo-wait");
    write_show_skill(&dir, "demo-wait", "skbdemo==1.0\n", "skbdemo");
    let out = sb.cli(&["skill", "add", dir.to_str().unwrap(), "--wait"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{said}\n{err}\n{}", sb.logs());
    assert!(said.contains("installed demo-wait"), "{said}");
    assert!(
        said.contains("demo-wait: dependencies built (") && said.contains("the skill is available"),
        "{said}\n{err}"
    );
    assert!(
        err.contains("demo-wait: building its dependencies…"),
        "{err}"
    );
    assert_eq!(
        script(&sb, "demo-wait")["data"]["stdout"]
            .as_str()
            .map(str::trim),
        Some("1.0")
    );
}
