//! The CLI verbs a newcomer reaches for first, against a running core: `skillbox call`
//! (waits on approvals, printing their ids), `approvals list` (arguments and signature
//! payloads shown), `skill remove`, `doctor`; several skills roots at runtime (a personal
//! root shadowing a project skill); and the example `notes` skill whose write and sign
//! tools wait for an operator.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::harness::skills::{copy_dir, open_up, write};
use crate::harness::{binary, poll, Options, Skillbox, POLL_TIMEOUT};

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Starts `skillbox call TOOL --args ARGS --workspace WS`; its stderr lines arrive on the
/// receiver as they are written.
fn spawn_call(
    sb: &Skillbox,
    tool: &str,
    args: &Value,
) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = Command::new(binary("skillbox"))
        .args(["call", tool, "--args", &args.to_string(), "--workspace"])
        .arg(&sb.ws)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start skillbox call");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// Reads stderr lines until the `waiting for approval ID` line; the id and every line read.
fn approval_id_printed(rx: &mpsc::Receiver<String>) -> (String, Vec<String>) {
    let mut lines = Vec::new();
    loop {
        let line = rx
            .recv_timeout(POLL_TIMEOUT)
            .unwrap_or_else(|_| panic!("no approval id printed; stderr so far: {lines:?}"));
        let id = line
            .strip_prefix("waiting for approval ")
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_string);
        lines.push(line);
        if let Some(id) = id {
            // The two command lines and the console link follow.
            for _ in 0..3 {
                if let Ok(l) = rx.recv_timeout(Duration::from_secs(10)) {
                    lines.push(l);
                }
            }
            return (id, lines);
        }
    }
}

fn finish(child: std::process::Child) -> (Option<i32>, Value) {
    let out = child.wait_with_output().expect("wait for skillbox call");
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("skillbox call printed no JSON ({e}): {}", text(&out)));
    (out.status.code(), v)
}

#[test]
fn cli_call_prints_the_approval_id_and_runs_once_it_is_approved() {
    let sb = Skillbox::start(Options::default());
    let (child, rx) = spawn_call(&sb, "signer:write_note", &json!({"text": "from the cli"}));
    let (id, lines) = approval_id_printed(&rx);
    let pending = sb.wait_pending("signer", "write_note");
    assert_eq!(
        pending["id"],
        id.as_str(),
        "the id printed is the pending approval's"
    );
    let all = lines.join("\n");
    assert!(
        all.contains(r#"{"text":"from the cli"}"#),
        "the arguments are shown: {all}"
    );
    assert!(
        all.contains(&format!(
            "approve: skillbox approvals approve {id} --workspace"
        )),
        "{all}"
    );
    assert!(
        all.contains(&format!("deny:    skillbox approvals deny {id}")),
        "{all}"
    );
    assert!(
        all.contains(&format!(
            "console: http://{}/console/approvals/{id}",
            sb.addr
        )),
        "the console page of the approval is linked: {all}"
    );

    let out = sb.cli(&["approvals", "approve", &id]);
    assert!(out.status.success(), "{}", text(&out));
    let (code, result) = finish(child);
    assert_eq!(code, Some(0), "{result}");
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(
        result["data"],
        json!({"written": "from the cli"}),
        "{result}"
    );
    assert_eq!(
        result["approval_id"],
        id.as_str(),
        "the result names the approval used"
    );
}

#[test]
fn cli_call_refused_by_the_operator_names_the_approval_and_exits_1() {
    let sb = Skillbox::start(Options::default());
    let (child, rx) = spawn_call(&sb, "signer:write_note", &json!({"text": "no"}));
    let (id, _) = approval_id_printed(&rx);
    let out = sb.cli(&["approvals", "deny", &id, "--reason", "not now"]);
    assert!(out.status.success(), "{}", text(&out));
    let (code, result) = finish(child);
    assert_eq!(code, Some(1), "{result}");
    assert_eq!(result["success"], false, "{result}");
    assert_eq!(result["error_kind"], "approval_denied", "{result}");
    assert_eq!(result["approval_id"], id.as_str(), "{result}");
    let error = result["error"].as_str().unwrap_or_default();
    assert!(error.contains(&id) && error.contains("not now"), "{error}");
}

#[test]
fn approvals_show_write_arguments_and_the_signature_payload_decoded() {
    let sb = Skillbox::start(Options::default());
    let write = sb.call_in_background("signer:write_note", json!({"text": "pay rent"}));
    let message = "pay 1 coin to bob";
    let sign = sb.call_in_background("signer:sign", json!({"data": STANDARD.encode(message)}));
    let pending_write = sb.wait_pending("signer", "write_note");
    let pending_sign = sb.wait_pending("signer", "sign");
    assert_eq!(pending_write["args"], json!({"text": "pay rent"}));
    let payload = &pending_sign["payload"];
    assert_eq!(payload["text"], message, "{pending_sign}");
    assert_eq!(payload["type"], "message", "{pending_sign}");
    let sha = ring::digest::digest(&ring::digest::SHA256, message.as_bytes());
    let sha: String = sha.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(payload["sha256"], sha.as_str(), "{pending_sign}");

    let out = sb.cli(&["approvals", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("ARGUMENTS"), "{listed}");
    assert!(listed.contains(r#"{"text":"pay rent"}"#), "{listed}");
    assert!(
        listed.contains(&format!(
            "sign message \"{message}\" (sha256 {}",
            &sha[..12]
        )),
        "{listed}"
    );

    for p in [&pending_write, &pending_sign] {
        let r = sb.decide(p["id"].as_str().unwrap(), "approve", None);
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let w = write.join().unwrap();
    assert_eq!(w["approval_id"], pending_write["id"], "{w}");
    let s = sign.join().unwrap();
    assert_eq!(s["data"]["ok"], true, "{s}");
    assert_eq!(
        s["approval_id"], pending_sign["id"],
        "a sign tool's result names its approval: {s}"
    );
}

fn personal_echo(ws: &Path) {
    let dir = ws.join("personal/echo");
    write(
        &dir.join("skill.yaml"),
        "name: echo\nversion: 9.0.0\ndescription: The personal echo that shadows the project's.\n\
         tools:\n  - name: echo\n    description: says where it comes from\n\
         \x20   command: [\"python3\", \"scripts/echo.py\"]\n",
    );
    write(
        &dir.join("scripts/echo.py"),
        "import json, sys\nreq = json.loads(sys.stdin.readline())\n\
         print(json.dumps({\"jsonrpc\": \"2.0\", \"id\": 0, \"result\": {\"from\": \"personal\"}}), flush=True)\n",
    );
    open_up(&ws.join("personal"));
}

#[test]
fn skills_roots_a_personal_root_shadows_a_project_skill_and_its_tool_runs() {
    let sb = Skillbox::start(Options {
        extra_toml: "[skills]\nroots = [\"personal\", \"skills\"]\n".into(),
        prepare: Some(personal_echo),
        ..Options::default()
    });
    let skills = sb.request("GET", "/v1/skills", None).json();
    let echoes: Vec<&Value> = skills["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "echo")
        .collect();
    assert_eq!(echoes.len(), 1, "{skills}");
    assert_eq!(
        echoes[0]["version"], "9.0.0",
        "the personal root wins: {skills}"
    );
    // The executor sees both roots and runs the winner ...
    assert_eq!(
        sb.call_ok("echo:echo", json!({"text": "hi"})),
        json!({"from": "personal"})
    );
    // ... and still runs skills only the project root has.
    let r = sb.call_ok("word-count:count", json!({"text": "one two three"}));
    assert!(r.to_string().contains('3'), "{r}");

    let out = sb.cli(&["skill", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let ws = sb.ws.canonicalize().unwrap();
    let shadow = format!(
        "shadowed echo: {} is used instead of {}",
        ws.join("personal/echo").display(),
        ws.join("skills/echo").display()
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&shadow),
        "skill list prints the shadow log: {}",
        text(&out)
    );
    assert!(
        std::fs::read_to_string(&sb.stdout)
            .unwrap()
            .contains(&format!("skills:    {}", ws.join("personal").display())),
        "up prints its roots: {}",
        sb.logs()
    );
}

#[test]
fn skill_remove_goes_through_the_running_core_and_refuses_unmanaged_folders() {
    let sb = Skillbox::start(Options::default());
    let hello = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/workspace/skills/hello");
    let out = sb.cli(&["skill", "install", hello.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    poll(
        "the installed skill in the running core",
        POLL_TIMEOUT,
        || {
            let v = sb.request("GET", "/v1/skills", None).json();
            v["skills"]
                .as_array()?
                .iter()
                .any(|s| s["name"] == "hello")
                .then_some(())
        },
    );

    let out = sb.cli(&["skill", "remove", "hello"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("removed hello"), "{said}");
    assert!(
        said.contains("the running core reloaded its skills"),
        "{said}"
    );
    let v = sb.request("GET", "/v1/skills", None).json();
    assert!(
        !v["skills"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "hello"),
        "gone at once, without waiting for the watch: {v}"
    );
    assert!(!sb.ws.join("skills/hello").exists());

    // A folder skillbox did not install is the operator's: refused, left in place.
    let out = sb.cli(&["skill", "remove", "echo"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("remove refused (check unmanaged)"), "{err}");
    assert!(sb.ws.join("skills/echo").is_dir());
}

#[test]
fn skill_remove_without_a_core_removes_on_disk_with_the_same_checks() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join("skills")).unwrap();
    let run = |args: &[&str]| {
        Command::new(binary("skillbox"))
            .args(args)
            .arg("--workspace")
            .arg(ws)
            .output()
            .unwrap()
    };
    let hello = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/workspace/skills/hello");
    let out = run(&["skill", "install", hello.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let out = run(&["skill", "remove", "hello"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no core is running on this workspace"),
        "{}",
        text(&out)
    );
    assert!(!ws.join("skills/hello").exists());
    let out = run(&["skill", "remove", "hello"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("check not_installed"),
        "{}",
        text(&out)
    );
    let out = run(&["skill", "remove", "../etc"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a skill name"),
        "{}",
        text(&out)
    );
}

fn needy_skill(ws: &Path) {
    write(
        &ws.join("skills/needy/SKILL.md"),
        "---\nname: needy\ndescription: Needs a token the core does not hold. Use in tests.\n\
         prerequisites: { env: [NEEDY_TOKEN] }\n---\n# needy\n",
    );
    open_up(&ws.join("skills/needy"));
}

#[test]
fn doctor_reports_the_sandbox_the_core_and_each_unavailable_skill_with_a_fix() {
    let sb = Skillbox::start(Options {
        prepare: Some(needy_skill),
        ..Options::default()
    });
    let out = sb.cli(&["doctor"]);
    let said = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "an unavailable skill is a problem: {said}"
    );
    for line in [
        "ok   kernel: the sandbox is enforced",
        "ok   core: answers at http://",
        "ok   executor: answers",
    ] {
        assert!(said.contains(line), "{line:?} missing: {said}");
    }
    let needy = said
        .lines()
        .position(|l| l.starts_with("FAIL skill needy:"))
        .unwrap_or_else(|| panic!("no line for the unavailable skill: {said}"));
    let lines: Vec<&str> = said.lines().collect();
    assert!(lines[needy].contains("NEEDY_TOKEN"), "{said}");
    assert!(lines[needy + 1].trim_start().starts_with("fix: "), "{said}");
    // Network namespaces, as the running executor reports them: ok, or a warning (never a
    // problem) saying what to change.
    let netns = lines
        .iter()
        .position(|l| l.contains(" network namespaces: the running executor "))
        .unwrap_or_else(|| panic!("no network namespaces line: {said}"));
    if lines[netns].starts_with("warn ") {
        assert!(
            lines[netns].contains("skills with network (declared or granted) are unavailable"),
            "{said}"
        );
        assert!(
            lines[netns + 1].contains("CAP_SYS_ADMIN and CAP_NET_ADMIN"),
            "{said}"
        );
    } else {
        assert!(lines[netns].starts_with("ok   "), "{said}");
    }

    let out = sb.cli(&["doctor", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false, "{v}");
    assert!(v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["what"] == "skill needy" && c["ok"] == false));
    assert!(v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["what"] == "network namespaces" && c["ok"] == true));
}

#[test]
fn doctor_without_a_running_core_says_how_to_start_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("skills")).unwrap();
    let out = Command::new(binary("skillbox"))
        .args(["doctor", "--workspace"])
        .arg(dir.path())
        .output()
        .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("FAIL core: no running core found"), "{said}");
    assert!(
        said.contains("fix: start it: skillbox up --workspace"),
        "{said}"
    );
}

#[test]
fn doctor_warns_when_git_is_missing_and_says_what_it_costs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("skills")).unwrap();
    let out = Command::new(binary("skillbox"))
        .args(["doctor", "--workspace"])
        .arg(dir.path())
        .env("PATH", dir.path().join("no-programs-here"))
        .output()
        .unwrap();
    let said = text(&out);
    assert!(
        said.contains("warn git: the git program is not on PATH: `skill add`"),
        "{said}"
    );
    assert!(said.contains("fix: install git"), "{said}");
}

fn example_notes(ws: &Path) {
    let notes = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/workspace/skills/notes");
    copy_dir(&notes, &ws.join("skills/notes"));
    open_up(&ws.join("skills/notes"));
}

#[test]
fn example_notes_skill_reads_at_once_and_waits_for_approval_to_write_and_sign() {
    let sb = Skillbox::start(Options {
        prepare: Some(example_notes),
        ..Options::default()
    });
    let r = sb.call_ok("notes:read_todo", json!({}));
    assert_eq!(r["content"], crate::harness::skills::TODO, "{r}");
    assert!(sb.approvals(None).is_empty(), "a read tool asks nobody");

    let add = sb.call_in_background("notes:add_todo", json!({"item": "call the bank"}));
    let pending = sb.wait_pending("notes", "add_todo");
    assert_eq!(pending["args"], json!({"item": "call the bank"}));
    sb.decide(pending["id"].as_str().unwrap(), "approve", None);
    let r = add.join().unwrap();
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(
        r["data"]["content"],
        format!("{}call the bank\n", crate::harness::skills::TODO),
        "{r}"
    );
    assert_eq!(
        r["data"]["written"], false,
        "the tool proposes, it does not write: {r}"
    );

    let sign = sb.call_in_background("notes:sign_note", json!({"text": "I owe Bob 1 coin"}));
    let pending = sb.wait_pending("notes", "sign_note");
    assert_eq!(pending["payload"]["text"], "I owe Bob 1 coin", "{pending}");
    sb.decide(pending["id"].as_str().unwrap(), "deny", Some("no debts"));
    let r = sign.join().unwrap();
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["approval_id"], pending["id"], "{r}");
    assert!(r["error"].as_str().unwrap().contains("no debts"), "{r}");

    let sign = sb.call_in_background("notes:sign_note", json!({"text": "hello"}));
    let pending = sb.wait_pending("notes", "sign_note");
    sb.decide(pending["id"].as_str().unwrap(), "approve", None);
    let r = sign.join().unwrap();
    assert_eq!(r["success"], true, "{r}");
    let key = STANDARD
        .decode(r["data"]["public_key"].as_str().unwrap())
        .unwrap();
    let sig = STANDARD
        .decode(r["data"]["signature"].as_str().unwrap())
        .unwrap();
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &key)
        .verify(b"hello", &sig)
        .expect("the note's signature verifies");
}
