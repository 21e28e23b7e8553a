//! Skills as their authors publish them (a SKILL.md and scripts, no manifest of tools),
//! run under `skillbox up` in a context: a script that reads an uploaded file and writes
//! one the bot downloads; a two-step job whose second step reads the first one's output;
//! a script the agent writes and runs with `exec_command`; a long command driven with
//! `write_stdin`; a session that outlives its idle timeout; and the refusals (another
//! context's session id, a closed session's processes gone, a file over the quota, a
//! restricted context's refusal to lend another skill's envelope).

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::skills::{open_up, write};
use crate::harness::{poll, Options, Skillbox};

/// A form filler shaped like the published document skills: instructions naming its
/// script by `{baseDir}`, and a script that prints its usage and exits 1 when misused.
fn published_skills(ws: &Path) {
    let dir = ws.join("skills/form-filler");
    write(
        &dir.join("SKILL.md"),
        "---\nname: form-filler\ndescription: Fill a text form from a JSON file of field values and write the filled form.\n---\n\
         # Form filler\n\nRun `python3 {baseDir}/scripts/fill_form.py fields.json form.txt out.txt`.\n",
    );
    write(
        &dir.join("scripts/fill_form.py"),
        "import json, sys\n\
         if len(sys.argv) != 4:\n    print('usage: fill_form.py FIELDS.json FORM OUT'); sys.exit(1)\n\
         fields = json.load(open(sys.argv[1]))\n\
         text = open(sys.argv[2]).read()\n\
         for k, v in fields.items():\n    text = text.replace('{{' + k + '}}', str(v))\n\
         open(sys.argv[3], 'w').write(text)\n\
         print('wrote', sys.argv[3])\n",
    );
    open_up(&dir);
}

fn start(extra_toml: &str) -> Skillbox {
    Skillbox::start(Options {
        prepare: Some(published_skills),
        extra_toml: extra_toml.to_string(),
        ..Options::default()
    })
}

/// `POST /v1/tools/call` of `tool` in `context` as the operator.
fn call_in(sb: &Skillbox, context: &str, tool: &str, args: Value) -> Value {
    sb.request(
        "POST",
        "/v1/tools/call",
        Some(&json!({"tool": tool, "args": args, "context_id": context})),
    )
    .json()
}

fn put(sb: &Skillbox, context: &str, path: &str, bytes: &[u8]) {
    let local = sb.ws.join(format!("upload-{}", path.replace('/', "_")));
    std::fs::write(&local, bytes).unwrap();
    let out = sb.cli(&["files", "put", context, path, local.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn get(sb: &Skillbox, context: &str, path: &str) -> Option<Vec<u8>> {
    let local = sb.ws.join(format!("download-{}", path.replace('/', "_")));
    let out = sb.cli(&["files", "get", context, path, local.to_str().unwrap()]);
    out.status.success().then(|| std::fs::read(&local).unwrap())
}

fn paths(result: &Value) -> Vec<String> {
    result["files"]
        .as_array()
        .unwrap_or_else(|| panic!("no files in {result}"))
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_published_script_fills_an_uploaded_form_and_the_bot_downloads_the_result() {
    let sb = start("");
    put(
        &sb,
        "job-1",
        "fields.json",
        br#"{"name": "Ada", "city": "Paris"}"#,
    );
    put(
        &sb,
        "job-1",
        "form.txt",
        b"Name: {{name}}\nCity: {{city}}\n",
    );
    // The instructions name the script by the folder variable.
    let loaded = sb.call_ok("load_skill", json!({"name": "form-filler"}));
    let body = loaded["body"].as_str().unwrap();
    assert!(
        body.contains("python3 $SKILLBOX_SKILL_DIR/scripts/fill_form.py"),
        "{body}"
    );
    // A misuse shows the script's usage (stdout) with the exit code.
    let r = call_in(
        &sb,
        "job-1",
        "run_skill_script",
        json!({"name": "form-filler", "script": "fill_form.py"}),
    );
    assert_eq!(r["success"], false, "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(error.contains("exited with code 1"), "{error}");
    assert!(error.contains("usage: fill_form.py"), "{error}");
    let r = call_in(
        &sb,
        "job-1",
        "run_skill_script",
        json!({"name": "form-filler", "script": "scripts/fill_form.py", "args": ["fields.json", "form.txt", "filled.txt"]}),
    );
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(paths(&r), ["filled.txt"], "{r}");
    assert_eq!(
        get(&sb, "job-1", "filled.txt").unwrap(),
        b"Name: Ada\nCity: Paris\n"
    );
    // The same command through the shell, with the instructions' own spelling.
    let r = call_in(
        &sb,
        "job-1",
        "exec_command",
        json!({"cmd": "python3 $SKILLBOX_SKILL_DIR/scripts/fill_form.py fields.json form.txt again.txt && cat again.txt", "skill": "form-filler"}),
    );
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["exit_code"], 0, "{r}");
    assert!(
        r["data"]["output"]
            .as_str()
            .unwrap()
            .contains("City: Paris"),
        "{r}"
    );
    // The listing says which call wrote it.
    let listed = sb.request("GET", "/v1/contexts/job-1/files", None).json();
    let again = listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "again.txt")
        .cloned()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(again["written_by"], r["call_id"], "{listed}");
}

#[test]
fn step_two_reads_step_one_output_and_an_agent_written_script_runs() {
    let sb = start("");
    let r = call_in(
        &sb,
        "job-2",
        "exec_command",
        json!({"cmd": "mkdir -p out && seq 1 5 > out/numbers.txt"}),
    );
    assert_eq!(r["data"]["exit_code"], 0, "{r}");
    assert_eq!(paths(&r), ["out/numbers.txt"]);
    put(
        &sb,
        "job-2",
        "sum.py",
        b"print(sum(int(l) for l in open('out/numbers.txt')))\n",
    );
    let r = call_in(
        &sb,
        "job-2",
        "exec_command",
        json!({"cmd": ["python3", "sum.py"]}),
    );
    assert_eq!(r["data"]["output"].as_str().unwrap().trim(), "15", "{r}");
    // A removal reaches the context; a non-zero exit is still a success with its code.
    let r = call_in(
        &sb,
        "job-2",
        "exec_command",
        json!({"cmd": "rm out/numbers.txt; exit 3"}),
    );
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["exit_code"], 3, "{r}");
    assert!(get(&sb, "job-2", "out/numbers.txt").is_none());
    // Another context sees none of it.
    let r = call_in(&sb, "job-3", "exec_command", json!({"cmd": "ls"}));
    assert_eq!(r["data"]["output"], "", "{r}");
}

#[test]
fn a_long_command_is_driven_with_write_stdin_and_closed_with_its_processes() {
    let sb = start("");
    let r = call_in(
        &sb,
        "job-4",
        "exec_command",
        json!({"cmd": "cat", "yield_ms": 200}),
    );
    let session = r["data"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    assert!(r["data"].get("exit_code").is_none(), "{r}");
    let r = call_in(
        &sb,
        "job-4",
        "write_stdin",
        json!({"session_id": session, "chars": "hello\n", "yield_ms": 500}),
    );
    assert_eq!(r["data"]["output"], "hello\n", "{r}");
    // Another context cannot name it.
    let r = call_in(
        &sb,
        "job-5",
        "write_stdin",
        json!({"session_id": session, "chars": "x\n"}),
    );
    assert_eq!(r["error_kind"], "not_found", "{r}");
    // An interactive interpreter keeps its state between writes.
    let r = call_in(
        &sb,
        "job-4",
        "exec_command",
        json!({"cmd": ["python3", "-i", "-q"], "yield_ms": 300}),
    );
    let py = r["data"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    call_in(
        &sb,
        "job-4",
        "write_stdin",
        json!({"session_id": py, "chars": "x = 6 * 7\n", "yield_ms": 300}),
    );
    let r = call_in(
        &sb,
        "job-4",
        "write_stdin",
        json!({"session_id": py, "chars": "print(x)\n", "yield_ms": 1000}),
    );
    assert!(r["data"]["output"].as_str().unwrap().contains("42"), "{r}");
    // A background process of a session dies when the session is closed.
    let r = call_in(
        &sb,
        "job-4",
        "exec_command",
        json!({"cmd": "sleep 1000 & echo $!; wait", "yield_ms": 500}),
    );
    let sleeper = r["data"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    let pid: u32 = r["data"]["output"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{r}"));
    let r = call_in(&sb, "job-4", "close_context", json!({}));
    assert_eq!(r["data"]["closed"], 3, "{r}");
    poll(
        "the session's sleep to end",
        Duration::from_secs(10),
        || (!Path::new(&format!("/proc/{pid}")).exists()).then_some(()),
    );
    let r = call_in(
        &sb,
        "job-4",
        "write_stdin",
        json!({"session_id": sleeper, "chars": ""}),
    );
    assert_eq!(r["error_kind"], "not_found", "{r}");
    let r = call_in(
        &sb,
        "job-4",
        "write_stdin",
        json!({"session_id": session, "chars": "again\n"}),
    );
    assert_eq!(r["error_kind"], "not_found", "{r}");
}

#[test]
fn a_session_past_its_idle_timeout_has_ended() {
    let sb = start("[exec]\nidle_timeout_ms = 500\n");
    let r = call_in(
        &sb,
        "job-6",
        "exec_command",
        json!({"cmd": "cat", "yield_ms": 100}),
    );
    let session = r["data"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    std::thread::sleep(Duration::from_millis(1500));
    let r = call_in(
        &sb,
        "job-6",
        "write_stdin",
        json!({"session_id": session, "chars": "late\n"}),
    );
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error_kind"], "not_found", "{r}");
}

#[test]
fn a_file_over_the_quota_is_not_kept_and_the_call_says_so() {
    let sb = start("[files]\nmax_file_bytes = 1000\n");
    let r = call_in(
        &sb,
        "job-7",
        "exec_command",
        json!({"cmd": "head -c 5000 /dev/zero > big.bin; echo small > small.txt"}),
    );
    // A command's answer says it in its output (the command itself ran).
    let output = r["data"]["output"].as_str().unwrap();
    assert!(
        output.contains("big.bin") && output.contains("max_file_bytes"),
        "{r}"
    );
    assert_eq!(paths(&r), ["small.txt"], "{r}");
    assert!(get(&sb, "job-7", "big.bin").is_none());
    assert_eq!(get(&sb, "job-7", "small.txt").unwrap(), b"small\n");
}

#[test]
fn a_granted_env_name_reaches_a_published_skill_that_declares_none() {
    let sb = Skillbox::start(Options {
        prepare: Some(published_skills),
        extra_toml: "[grants.form-filler]\nenv = [\"FORM_API_KEY\"]\n".to_string(),
        secrets: vec![("FORM_API_KEY".into(), "k-123".into())],
        ..Options::default()
    });
    let echo = json!({"cmd": "echo ${FORM_API_KEY:-none}", "skill": "form-filler"});
    let r = call_in(&sb, "job-8", "exec_command", echo);
    assert_eq!(r["data"]["output"], "k-123\n", "{r}");
    // Without the skill's envelope, no secret.
    let r = call_in(
        &sb,
        "job-9",
        "exec_command",
        json!({"cmd": "echo ${FORM_API_KEY:-none}"}),
    );
    assert_eq!(r["data"]["output"], "none\n", "{r}");
    let detail = sb.request("GET", "/v1/skills/form-filler", None).json();
    assert_eq!(detail["permissions"]["env"], json!([]), "{detail}");
    assert_eq!(
        detail["granted"]["env"],
        json!(["FORM_API_KEY"]),
        "{detail}"
    );
    assert_eq!(
        detail["effective_permissions"]["env"],
        json!(["FORM_API_KEY"]),
        "{detail}"
    );
}

/// [`published_skills`] and `echo-only`, whose `allowed-tools` restrict a context pinning
/// it to `echo:echo` (seed 004).
fn published_and_restricting_skills(ws: &Path) {
    published_skills(ws);
    let dir = ws.join("skills/echo-only");
    write(
        &dir.join("SKILL.md"),
        "---\nname: echo-only\ndescription: Only ever echo.\nallowed-tools: [\"echo:echo\"]\n---\n# Echo only\n",
    );
    open_up(&dir);
}

#[test]
fn restricted_context_cannot_lend_another_skills_envelope() {
    let sb = Skillbox::start(Options {
        prepare: Some(published_and_restricting_skills),
        extra_toml: "[grants.form-filler]\nenv = [\"FORM_API_KEY\"]\n".to_string(),
        secrets: vec![("FORM_API_KEY".into(), "k-123".into())],
        ..Options::default()
    });
    let pin = |context: &str, skill: &str| {
        let r = sb.request(
            "PUT",
            &format!("/v1/contexts/{context}/skills/{skill}"),
            None,
        );
        assert_eq!(r.status, 200, "{}", r.body);
    };
    pin("job-10", "echo-only");
    let refused = |r: &Value, builtin: &str| {
        assert_eq!(r["error_kind"], "permission_denied", "{r}");
        let error = r["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("{builtin} may not use skill \"form-filler\"")),
            "{error}"
        );
        assert!(error.contains("skillbox context pin"), "{error}");
    };
    // The attack: a context restricted to echo borrows form-filler's secret.
    let borrow = json!({"cmd": "echo ${FORM_API_KEY:-none}", "skill": "form-filler"});
    refused(
        &call_in(&sb, "job-10", "exec_command", borrow.clone()),
        "exec_command",
    );
    let script = json!({"name": "form-filler", "script": "fill_form.py"});
    refused(
        &call_in(&sb, "job-10", "run_skill_script", script),
        "run_skill_script",
    );
    // A skill active in the context, and no skill, still run.
    let r = call_in(
        &sb,
        "job-10",
        "exec_command",
        json!({"cmd": "echo hi", "skill": "echo"}),
    );
    assert_eq!(r["data"]["output"], "hi\n", "{r}");
    let r = call_in(
        &sb,
        "job-10",
        "exec_command",
        json!({"cmd": "echo ${FORM_API_KEY:-none}"}),
    );
    assert_eq!(r["data"]["output"], "none\n", "{r}");

    // A session inherits its envelope at each write_stdin: once the context is restricted
    // to other skills, form-filler's session is no longer written to.
    let cat = json!({"cmd": "cat", "skill": "form-filler", "yield_ms": 200});
    let r = call_in(&sb, "job-11", "exec_command", cat);
    let session = r["data"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    pin("job-11", "echo-only");
    let write = json!({"session_id": session, "chars": "one\n", "yield_ms": 500});
    refused(
        &call_in(&sb, "job-11", "write_stdin", write.clone()),
        "write_stdin",
    );
    // Pinned, the skill is lent again.
    pin("job-11", "form-filler");
    let r = call_in(&sb, "job-11", "write_stdin", write);
    assert_eq!(r["data"]["output"], "one\n", "{r}");
    let r = call_in(&sb, "job-11", "exec_command", borrow);
    assert_eq!(r["data"]["output"], "k-123\n", "{r}");
}

/// An `exec_command` answer says how long the call took, as its record does (it said 0).
#[test]
fn exec_command_answers_the_duration_its_record_keeps() {
    let sb = start("");
    let r = call_in(
        &sb,
        "dur-1",
        "exec_command",
        json!({"cmd": "sleep 0.2; echo done"}),
    );
    assert_eq!(r["data"]["exit_code"], 0, "{r}");
    let took = r["duration_ms"].as_u64().unwrap_or_default();
    assert!(took >= 200, "{r}");
    let call = sb
        .request(
            "GET",
            &format!("/v1/calls/{}", r["call_id"].as_str().unwrap()),
            None,
        )
        .json();
    assert_eq!(call["duration_ms"].as_u64(), Some(took), "{call}");
}
