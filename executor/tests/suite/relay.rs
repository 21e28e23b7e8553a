//! `exec --stdio`: the request comes as one JSON-RPC line on stdin, the tool's capability
//! requests are relayed to the "core" (this test) as `core.*` request lines on stdout and
//! answered on stdin, and the result is the last stdout line (response id 0).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::harness::{assert_mentions, scratch_root, shell_skill, Manifest, SkillRoot, EXECUTOR};

/// Longest wait for one stdout line or for the executor's exit.
const DEADLINE: Duration = Duration::from_secs(30);

/// Python for a tool: one capability request (id 1) and its answer.
const CAPABILITY: &str = r#"
def capability(method, params):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}) + "\n")
    sys.stdout.flush()
    return json.loads(sys.stdin.readline())
"#;

/// A jsonrpc skill `relay` whose tool `run` runs `script` (unindented) after [`CAPABILITY`].
fn relay_skill(root: &SkillRoot, script: &str, skill: &str) {
    root.python_skill_with(
        "relay",
        &format!("{CAPABILITY}\n{script}"),
        Manifest {
            skill,
            ..Default::default()
        },
    );
}

/// The `tool.execute` request line for `relay:run`.
fn execute_line(args: Value, env: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "tool.execute", "params": {
        "call_id": "call-relay-1", "capability_token": "cap-token-xyz",
        "skill": "relay", "tool": "run", "args": args, "envelope": {"env": env},
    }})
}

/// A running `skillbox-executor exec --stdio`, driven as the core drives it.
struct StdioExec {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

impl StdioExec {
    fn start(root: &SkillRoot) -> Self {
        let mut child = Command::new(EXECUTOR)
            .arg("exec")
            .arg("--stdio")
            .arg("--skills")
            .arg(root.skills())
            .arg("--scratch-root")
            .arg(scratch_root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start skillbox-executor exec --stdio");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let (tx, err_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            let _ = tx.send(text);
        });
        Self {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr: err_rx,
        }
    }

    /// Writes one line on the executor's stdin (errors ignored: it may have exited).
    fn send_raw(&mut self, line: &[u8]) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(line).and_then(|()| stdin.write_all(b"\n"));
            let _ = stdin.flush();
        }
    }

    fn send(&mut self, message: &Value) {
        self.send_raw(message.to_string().as_bytes());
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next stdout line, as JSON.
    fn next(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|e| panic!("no stdout line within {DEADLINE:?} ({e})"));
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
    }

    /// Waits for the exit (stdin left as it is); returns the exit code, the stdout lines
    /// not read yet and stderr.
    fn finish(mut self) -> (i32, Vec<String>, String) {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > DEADLINE {
                let _ = self.child.kill();
                panic!("skillbox-executor exec --stdio did not exit within {DEADLINE:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let stderr = self.stderr.recv_timeout(DEADLINE).unwrap_or_default();
        let rest: Vec<String> = self.lines.iter().collect();
        (status.code().unwrap_or(-1), rest, stderr)
    }
}

/// Asserts that `line` is the final response (id 0) and returns its `ToolResult`.
#[track_caller]
fn final_result(line: &Value) -> &Value {
    assert_eq!(line["jsonrpc"], "2.0", "{line}");
    assert_eq!(line["id"], 0, "not the final response: {line}");
    assert!(line.get("error").is_none(), "{line}");
    assert_eq!(line["result"]["call_id"], "call-relay-1", "{line}");
    &line["result"]
}

/// Asserts the executor exited 0 with nothing after the final line.
#[track_caller]
fn assert_clean_exit(exec: StdioExec) {
    let (code, rest, stderr) = exec.finish();
    assert_eq!(code, 0, "exit code; stderr: {stderr}");
    assert!(rest.is_empty(), "stdout after the result: {rest:?}");
}

#[test]
fn stdio_relays_fetch_as_core_fetch_and_returns_answer_to_tool() {
    let root = SkillRoot::new();
    relay_skill(
        &root,
        r#"reply({"answer": capability("fetch", {"url": "https://prices.test/btc", "headers": {"accept": "json"}})})"#,
        "",
    );
    let mut exec = StdioExec::start(&root);
    exec.send(&execute_line(json!({"coin": "btc"}), json!({})));
    let request = exec.next();
    assert_eq!(
        request,
        json!({"jsonrpc": "2.0", "id": 1, "method": "core.fetch", "params": {
            "call_id": "call-relay-1", "capability_token": "cap-token-xyz",
            "request": {"url": "https://prices.test/btc", "headers": {"accept": "json"}},
        }})
    );
    let fetched = json!({"status": 200, "headers": {}, "body": "{\"btc\": 97000}"});
    exec.send(&json!({"jsonrpc": "2.0", "id": 1, "result": fetched}));
    let line = exec.next();
    let result = final_result(&line);
    assert_eq!(result["success"], true, "{line}");
    assert_eq!(
        result["data"]["answer"],
        json!({"jsonrpc": "2.0", "id": 1, "result": fetched}),
        "{line}"
    );
    // stdin stays open: the executor must exit after the result all the same.
    assert_clean_exit(exec);
}

#[test]
fn stdio_passes_core_error_answer_to_tool() {
    let root = SkillRoot::new();
    relay_skill(
        &root,
        r#"reply({"answer": capability("readFile", {"path": "secrets/keys.txt"})})"#,
        "",
    );
    let mut exec = StdioExec::start(&root);
    exec.send(&execute_line(json!({}), json!({})));
    let request = exec.next();
    assert_eq!(request["method"], "core.readFile", "{request}");
    assert_eq!(
        request["params"]["request"],
        json!({"path": "secrets/keys.txt"})
    );
    exec.send(&json!({"jsonrpc": "2.0", "id": request["id"], "error": {
        "code": -32001, "message": "permission denied: readFile is not declared"}}));
    let line = exec.next();
    let answer = &final_result(&line)["data"]["answer"];
    assert_eq!(
        answer["error"],
        json!({"code": -32001, "message": "permission denied: readFile is not declared"}),
        "{line}"
    );
    assert_eq!(answer["id"], 1, "{line}");
    assert_clean_exit(exec);
}

#[test]
fn stdio_answers_capability_unavailable_when_core_closes_stdin() {
    let root = SkillRoot::new();
    relay_skill(
        &root,
        r#"reply({"answer": capability("sign", {"type": "message", "data": "aGk="})})"#,
        "",
    );
    let mut exec = StdioExec::start(&root);
    exec.send(&execute_line(json!({}), json!({})));
    exec.close_stdin();
    // The relayed request may or may not be written before the executor sees the end of
    // stdin; either way the tool gets -32003 and the result is the last line.
    let mut line = exec.next();
    if line["id"] != 0 {
        assert_eq!(line["method"], "core.sign", "{line}");
        line = exec.next();
    }
    let answer = &final_result(&line)["data"]["answer"];
    assert_eq!(
        answer["error"],
        json!({"code": -32003, "message": "the core closed the relay"}),
        "{line}"
    );
    assert_clean_exit(exec);
}

#[test]
fn stdio_passes_declared_env_without_putting_it_on_command_line() {
    let root = SkillRoot::new();
    relay_skill(
        &root,
        concat!(
            "capability(\"fetch\", {\"url\": \"https://prices.test/wait\"})\n",
            "reply({\"api_key\": os.environ.get(\"API_KEY\"), \"undeclared\": os.environ.get(\"OTHER_TOKEN\")})\n",
        ),
        "permissions: { env: [API_KEY] }",
    );
    let secret = "sk-live-relay-4242";
    let mut exec = StdioExec::start(&root);
    exec.send(&execute_line(
        json!({}),
        json!({"API_KEY": secret, "OTHER_TOKEN": "undeclared-7"}),
    ));
    // The tool is running and waits for its answer: look at the executor's command line.
    let request = exec.next();
    assert_eq!(request["method"], "core.fetch", "{request}");
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", exec.child.id())).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(cmdline.contains("exec --stdio"), "{cmdline}");
    assert!(
        !cmdline.contains(secret),
        "the secret is on the command line: {cmdline}"
    );
    assert!(
        !cmdline.contains("cap-token-xyz"),
        "the token is on the command line: {cmdline}"
    );
    exec.send(
        &json!({"jsonrpc": "2.0", "id": 1, "result": {"status": 204, "headers": {}, "body": ""}}),
    );
    let line = exec.next();
    let data = &final_result(&line)["data"];
    assert_eq!(data["api_key"], secret, "{line}");
    assert_eq!(
        data["undeclared"],
        Value::Null,
        "an undeclared env name reached the tool: {line}"
    );
    assert_clean_exit(exec);
}

/// Sends `first` as the request line and expects exit code 2, empty stdout and `reason`
/// on stderr.
#[track_caller]
fn assert_first_line_refused(first: &[u8], reason: &str) {
    let root = SkillRoot::new();
    relay_skill(&root, r#"reply("ran")"#, "");
    let mut exec = StdioExec::start(&root);
    exec.send_raw(first);
    let (code, stdout, stderr) = exec.finish();
    assert_eq!(code, 2, "exit code; stderr: {stderr}");
    assert!(stdout.is_empty(), "stdout must stay empty: {stdout:?}");
    assert_mentions(&stderr, reason);
}

#[test]
fn stdio_rejects_non_json_first_line_as_usage_error() {
    assert_first_line_refused(
        b"relay:run {\"coin\": \"btc\"}",
        "the request line on stdin is not JSON-RPC 2.0 (not valid JSON",
    );
}

#[test]
fn stdio_rejects_first_line_with_wrong_method_as_usage_error() {
    let mut line = execute_line(json!({}), json!({}));
    line["method"] = json!("tool.list");
    assert_first_line_refused(
        line.to_string().as_bytes(),
        "the first line on stdin calls \"tool.list\"; exec --stdio runs one \"tool.execute\" or \"session.exec\" request",
    );
}

#[test]
fn stdio_rejects_first_line_without_params_as_usage_error() {
    assert_first_line_refused(
        br#"{"jsonrpc":"2.0","id":0,"method":"tool.execute"}"#,
        "the first request has no \"params\"",
    );
}

#[test]
fn stdio_rejects_first_line_with_unparsable_params_as_usage_error() {
    assert_first_line_refused(
        br#"{"jsonrpc":"2.0","id":0,"method":"tool.execute","params":{"skill":"relay","tool":"run"}}"#,
        "the tool.execute params do not parse: missing field `call_id`",
    );
}

#[test]
fn stdio_rejects_oversize_first_line_as_usage_error() {
    let big = vec![b' '; skillbox_protocol::jsonrpc::MAX_MESSAGE_BYTES + 1];
    assert_first_line_refused(&big, "longer than 8388608 bytes");
}

#[test]
fn stdio_rejects_missing_first_line_as_usage_error() {
    let root = SkillRoot::new();
    let mut exec = StdioExec::start(&root);
    exec.close_stdin();
    let (code, stdout, stderr) = exec.finish();
    assert_eq!(code, 2, "exit code; stderr: {stderr}");
    assert!(stdout.is_empty(), "stdout must stay empty: {stdout:?}");
    assert_mentions(&stderr, "stdin ended before the request");
}

#[test]
fn stdio_with_tool_flag_is_clap_usage_error() {
    let root = SkillRoot::new();
    let output = Command::new(EXECUTOR)
        .arg("exec")
        .arg("--stdio")
        .arg("--skills")
        .arg(root.skills())
        .arg("--tool")
        .arg("relay:run")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    assert!(output.stdout.is_empty());
    assert_mentions(
        &stderr,
        "the argument '--stdio' cannot be used with '--tool <SKILL:TOOL>'",
    );
}

#[test]
fn stdio_runs_plain_tool_and_returns_its_output() {
    let root = SkillRoot::new();
    shell_skill(
        &root,
        "read -r line\necho \"stdin=$line\"\necho warning >&2\nexit 0\n",
    );
    let mut exec = StdioExec::start(&root);
    let mut request = execute_line(json!({"k": "v"}), json!({}));
    request["params"]["skill"] = json!("shell");
    exec.send(&request);
    let line = exec.next();
    let result = final_result(&line);
    assert_eq!(result["success"], true, "{line}");
    assert_eq!(
        result["data"],
        json!({"stdout": "stdin={\"k\":\"v\"}\n", "stderr": "warning\n", "exit_code": 0}),
        "{line}"
    );
    assert_clean_exit(exec);
}

/// The `session.exec` request line (id 0) for `cmd`, under no skill, in an empty folder.
fn session_line(cmd: Value, yield_ms: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "session.exec", "params": {
        "session_id": "s-relay-1", "call_id": "call-session-1", "capability_token": "cap-token-xyz",
        "cmd": cmd, "yield_ms": yield_ms, "max_output_bytes": 65536,
        "files": {"files": [], "max_file_bytes": 1048576, "max_total_bytes": 1048576, "max_files": 16},
        "limits": {"idle_timeout_ms": 60000, "lifetime_ms": 60000, "output_kept_bytes": 65536, "memory_mb": 256},
    }})
}

/// The result of the response `line` to the core's request `id`.
#[track_caller]
fn response_to(line: &Value, id: u64) -> &Value {
    assert_eq!(line["id"], id, "not the response to {id}: {line}");
    &line["result"]
}

#[test]
fn stdio_session_serves_writes_and_exits_when_closed() {
    let root = SkillRoot::new();
    let mut exec = StdioExec::start(&root);
    exec.send(&session_line(json!(["cat"]), 100));
    let line = exec.next();
    assert_eq!(response_to(&line, 0)["running"], true, "{line}");
    exec.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "session.write",
        "params": {"session_id": "s-relay-1", "chars": "hello\n", "yield_ms": 2000, "max_output_bytes": 65536}}));
    let line = exec.next();
    let answer = response_to(&line, 7);
    assert_eq!(answer["output"], "hello\n", "{line}");
    assert_eq!(answer["running"], true, "{line}");
    exec.send(&json!({"jsonrpc": "2.0", "id": 8, "method": "tool.execute", "params": {}}));
    let line = exec.next();
    assert_eq!(line["id"], 8, "{line}");
    assert_eq!(line["error"]["code"], -32601, "{line}");
    assert_mentions(
        line["error"]["message"].as_str().unwrap_or_default(),
        "a session's container serves \"session.write\" and \"session.close\"",
    );
    exec.send(
        &json!({"jsonrpc": "2.0", "id": 9, "method": "session.close",
        "params": {"session_ids": ["s-relay-1"]}}),
    );
    let line = exec.next();
    assert_eq!(response_to(&line, 9)["closed"], 1, "{line}");
    // Nothing is awaited any more: the process ends with its stdin still open.
    let (code, rest, stderr) = exec.finish();
    assert_eq!(code, 0, "exit code; stderr: {stderr}");
    assert!(rest.is_empty(), "nothing more on stdout: {rest:?}");
}

#[test]
fn stdio_session_that_ended_within_its_yield_is_answered_and_the_process_exits() {
    let root = SkillRoot::new();
    let mut exec = StdioExec::start(&root);
    exec.send(&session_line(json!("echo from-the-session; exit 3"), 5000));
    let line = exec.next();
    let answer = response_to(&line, 0);
    assert_eq!(answer["running"], false, "{line}");
    assert_eq!(answer["exit_code"], 3, "{line}");
    assert_eq!(answer["output"], "from-the-session\n", "{line}");
    let (code, _, stderr) = exec.finish();
    assert_eq!(code, 0, "exit code; stderr: {stderr}");
}

#[test]
fn stdio_session_refuses_a_skill_it_does_not_hold() {
    let root = SkillRoot::new();
    let mut exec = StdioExec::start(&root);
    let mut first = session_line(json!(["true"]), 100);
    first["params"]["skill"] = json!("elsewhere");
    exec.send(&first);
    let line = exec.next();
    assert_eq!(line["id"], 0, "{line}");
    assert_mentions(
        line["error"]["message"].as_str().unwrap_or_default(),
        "no skill named \"elsewhere\"",
    );
    let (code, _, stderr) = exec.finish();
    assert_eq!(code, 0, "exit code; stderr: {stderr}");
}

/// One rule for every launcher (tool call and session alike, from the one plan): a name
/// the skill declares reaches its program, one it does not is dropped, whatever the core
/// sends. (A dependency build carries no env from the core at all: `deps.build` params
/// have no envelope, and the wire type refuses one.)
#[test]
fn a_declared_env_name_reaches_a_tool_and_a_session_and_an_undeclared_one_neither() {
    let root = SkillRoot::new();
    relay_skill(
        &root,
        "reply({\"api_key\": os.environ.get(\"API_KEY\"), \"undeclared\": os.environ.get(\"OTHER_TOKEN\")})\n",
        "permissions: { env: [API_KEY] }",
    );
    let env = json!({"API_KEY": "declared-1", "OTHER_TOKEN": "undeclared-7"});

    let mut exec = StdioExec::start(&root);
    exec.send(&execute_line(json!({}), env.clone()));
    let line = exec.next();
    let data = &final_result(&line)["data"];
    assert_eq!(data["api_key"], "declared-1", "tool call: {line}");
    assert_eq!(data["undeclared"], Value::Null, "tool call: {line}");
    assert_clean_exit(exec);

    let mut exec = StdioExec::start(&root);
    let mut first = session_line(
        json!("printf '%s|%s' \"${API_KEY:-none}\" \"${OTHER_TOKEN:-none}\""),
        5000,
    );
    first["params"]["skill"] = json!("relay");
    first["params"]["envelope"] = json!({ "env": env });
    exec.send(&first);
    let line = exec.next();
    let answer = response_to(&line, 0);
    assert_eq!(answer["output"], "declared-1|none", "session: {line}");
    let (code, _, stderr) = exec.finish();
    assert_eq!(code, 0, "exit code; stderr: {stderr}");
}
