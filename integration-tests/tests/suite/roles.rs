//! Roles end to end under `skillbox up`: bot tokens made and revoked with the CLI on a
//! running core, a bot refused every operator route it might try, a bot limited to its
//! skills, bot B kept out of bot A's context and calls, a bot approving its own `sign`
//! call under every setting, and `skillbox mcp` with a bot token.

use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::python::{python, run_script};
use crate::harness::{binary, Options, Skillbox};

/// What a bot might try that only the operator may do: method, path, body.
const OPERATOR_ONLY: [(&str, &str, Option<&str>); 9] = [
    ("POST", "/v1/skills/install", Some(r#"{"path": "/tmp/x"}"#)),
    ("DELETE", "/v1/skills/echo", None),
    ("POST", "/v1/skills/reload", None),
    ("POST", "/v1/trust/reload", None),
    ("GET", "/metrics", None),
    ("GET", "/v1/tokens", None),
    ("POST", "/v1/tokens", Some(r#"{"name": "sneaky"}"#)),
    ("DELETE", "/v1/tokens/tg", None),
    ("GET", "/v1/skills/echo/repairs", None),
];

fn assert_forbidden(r: &crate::harness::http::Response, what: &str) {
    assert_eq!(r.status, 403, "{what}: {}", r.body);
    let body = r.json();
    assert_eq!(body["error_kind"], "permission_denied", "{what}: {body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("needs the operator role"),
        "{what}: {body}"
    );
}

#[test]
fn bot_token_from_the_cli_calls_tools_is_refused_operator_routes_and_dies_on_revoke() {
    let sb = Skillbox::start(Options::default());
    let tg = sb.bot_token("tg", &[]);
    let r = sb.request_as(
        &tg,
        "POST",
        "/v1/tools/call",
        Some(&json!({"tool": "echo:echo", "args": {"text": "from a bot"}})),
    );
    assert_eq!(r.json()["success"], true, "{}", r.body);
    for (method, path, body) in OPERATOR_ONLY {
        let body: Option<Value> = body.map(|b| serde_json::from_str(b).unwrap());
        let r = sb.request_as(&tg, method, path, body.as_ref());
        assert_forbidden(&r, &format!("{method} {path}"));
    }
    // The console is the operator's: a bot token is no way in.
    let auth = format!("Bearer {tg}");
    let r = crate::harness::http::request(
        &sb.addr,
        "GET",
        "/console/approvals",
        &[("Authorization", auth.as_str())],
        None,
    )
    .unwrap();
    assert_ne!(
        r.status, 200,
        "the console answered a bot token: {}",
        r.body
    );
    // The call is attributed to the bot.
    let calls = sb.request("GET", "/v1/calls", None).json();
    assert_eq!(calls["calls"][0]["caller"], "tg", "{calls}");
    // Listed with its last use, never with the token.
    let out = sb.cli(&["tokens", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed[0]["name"], "tg", "{listed}");
    assert!(listed[0]["last_used_at"].is_i64(), "{listed}");
    assert!(!listed.to_string().contains(&tg), "{listed}");
    // Revoked through the running core: the next request is refused, no restart.
    let out = sb.cli(&["tokens", "revoke", "tg"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = sb.request_as(&tg, "GET", "/v1/tools", None);
    assert_eq!(r.status, 401, "a revoked token still works: {}", r.body);
}

#[test]
fn bot_limited_to_a_skill_lists_and_calls_only_that_skill() {
    let sb = Skillbox::start(Options::default());
    let tg = sb.bot_token("tg", &["--skills", "echo"]);
    let tools = sb.request_as(&tg, "GET", "/v1/tools", None).json();
    let names: Vec<&str> = (tools["tools"].as_array().unwrap().iter())
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.contains(':'))
        .collect();
    assert_eq!(names, ["echo:echo"], "{tools}");
    let r = sb
        .request_as(
            &tg,
            "POST",
            "/v1/tools/call",
            Some(&json!({"tool": "signer:write_note", "args": {"text": "x"}})),
        )
        .json();
    assert_eq!(r["error_kind"], "permission_denied", "{r}");
    assert!(
        sb.approvals(None).is_empty(),
        "a refused call asked for an approval"
    );
}

#[test]
fn bot_b_cannot_see_bot_a_s_context_or_calls() {
    let sb = Skillbox::start(Options::default());
    let a = sb.bot_token("bot-a", &[]);
    let b = sb.bot_token("bot-b", &[]);
    let r = sb.request_as(&a, "PUT", "/v1/contexts/chat-7/skills/echo", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let r = sb.request_as(&b, "GET", "/v1/contexts/chat-7", None);
    assert_eq!(r.status, 404, "{}", r.body);
    let call = json!({"tool": "echo:echo", "args": {"text": "x"}, "context_id": "chat-7"});
    let r = sb
        .request_as(&b, "POST", "/v1/tools/call", Some(&call))
        .json();
    assert_eq!(r["error_kind"], "not_found", "{r}");
    let r = sb
        .request_as(&a, "POST", "/v1/tools/call", Some(&call))
        .json();
    assert_eq!(r["success"], true, "{r}");
    let theirs = sb.request_as(&b, "GET", "/v1/calls", None).json();
    assert!(
        !theirs.to_string().contains(r["call_id"].as_str().unwrap()),
        "bot-b reads bot-a's call: {theirs}"
    );
}

#[test]
fn a_bot_never_approves_its_own_sign_call_and_the_operator_does() {
    for confirm_write in [false, true] {
        let sb = Skillbox::start(Options {
            bots_confirm_write: confirm_write,
            ..Options::default()
        });
        let tg = sb.bot_token("tg", &[]);
        let data = "cGF5IDEwMCB0byBtYWxsb3J5";
        let call = sb.call_in_background_as(&tg, "signer:sign", json!({"data": data}));
        let pending = sb.wait_pending("signer", "sign");
        assert_eq!(pending["requested_by"], "tg", "{pending}");
        let id = pending["id"].as_str().unwrap().to_string();
        let r = sb.request_as(
            &tg,
            "POST",
            &format!("/v1/approvals/{id}"),
            Some(&json!({"decision": "approve"})),
        );
        assert_eq!(
            r.status, 403,
            "bots_confirm_write={confirm_write}: {}",
            r.body
        );
        assert_eq!(r.json()["error_kind"], "permission_denied");
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            !call.is_finished(),
            "the bot's own approval let the signature through"
        );
        let r = sb.decide(&id, "approve", None);
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["decided_by"], "operator", "{}", r.body);
        let done = call.join().unwrap();
        assert_eq!(done["success"], true, "{done}");
    }
}

#[test]
fn bots_confirm_write_lets_a_bot_relay_its_users_confirmation_of_its_write_call() {
    let sb = Skillbox::start(Options {
        bots_confirm_write: true,
        ..Options::default()
    });
    let a = sb.bot_token("bot-a", &[]);
    let b = sb.bot_token("bot-b", &[]);
    let call = sb.call_in_background_as(&a, "signer:write_note", json!({"text": "ok"}));
    let pending = sb.wait_pending("signer", "write_note");
    let path = format!("/v1/approvals/{}", pending["id"].as_str().unwrap());
    let approve = json!({"decision": "approve"});
    let r = sb.request_as(&b, "POST", &path, Some(&approve));
    assert_eq!(r.status, 403, "bot-b decided bot-a's call: {}", r.body);
    let r = sb.request_as(&a, "POST", &path, Some(&approve));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["decided_by"], "bot-a");
    assert_eq!(call.join().unwrap()["success"], true);
}

#[test]
fn skillbox_mcp_with_a_bot_token_serves_only_the_bots_skills_and_warns_without_one() {
    let Some(py) = python("skillbox_mcp_with_a_bot_token_serves_only_the_bots_skills") else {
        return;
    };
    let sb = Skillbox::start(Options::default());
    let tg = sb.bot_token("tg", &["--skills", "echo"]);
    let token_file = sb.ws.join("tg.token");
    std::fs::write(&token_file, &tg).unwrap();
    let operator_token = sb.state().join("api-token");
    let out = run_script(
        &py,
        "mcp_client.py",
        &[
            "bot_scope",
            "--addr",
            &sb.addr,
            "--token-file",
            operator_token.to_str().unwrap(),
            "--stdio",
            sb.ws.to_str().unwrap(),
            "--skillbox",
            binary("skillbox").to_str().unwrap(),
            "--bot-token-file",
            token_file.to_str().unwrap(),
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    let tools: Vec<&str> = (seen["tools"].as_array().unwrap().iter())
        .filter_map(Value::as_str)
        .filter(|n| n.contains('.'))
        .collect();
    assert_eq!(tools, ["echo.echo"], "{seen}");
    assert_eq!(seen["echo"]["is_error"], false, "{seen}");
    assert!(
        seen["other"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("may not use skill"),
        "{seen}"
    );
    let calls = sb.request("GET", "/v1/calls", None).json();
    assert_eq!(calls["calls"][0]["caller"], "tg", "{calls}");

    // Without a token it says on stderr that the agent acts as the operator.
    let out = std::process::Command::new(binary("skillbox"))
        .args(["mcp", "--workspace", sb.ws.to_str().unwrap()])
        .env_remove("SKILLBOX_TOKEN")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("operator token"), "{stderr}");
}

/// `tokens create` (and `list`, `revoke`) in a folder that is no workspace, with no core
/// running there, used to print a token and make `./.skillbox/skillbox.db` that no core
/// reads: it is refused with the fix, and nothing is made.
#[test]
fn tokens_create_outside_a_workspace_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["tokens", "create", "stray"][..],
        &["tokens", "list"][..],
        &["tokens", "revoke", "stray"][..],
    ] {
        let out = std::process::Command::new(binary("skillbox"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(!out.status.success(), "{args:?}: {stdout}{stderr}");
        assert!(stdout.is_empty(), "{args:?} printed: {stdout}");
        assert!(
            stderr.contains("is not a skillbox workspace"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("--workspace DIR"), "{args:?}: {stderr}");
        assert!(
            !dir.path().join(".skillbox").exists(),
            "{args:?} made a state folder"
        );
    }
    // The same folder named with --workspace once it is one (a skillbox.toml) works.
    std::fs::write(dir.path().join("skillbox.toml"), "").unwrap();
    let out = std::process::Command::new(binary("skillbox"))
        .args(["tokens", "create", "kept", "--workspace"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.path().join(".skillbox/skillbox.db").is_file());
}

/// Revoking a bot's token is effective at once for what it left running: the command
/// session it started ends with its processes, and the call waiting on its pending write
/// approval is refused, not left for an operator to approve after the revocation.
#[test]
fn revoked_bot_keeps_no_running_session_and_no_pending_approval() {
    let sb = Skillbox::start(Options::default());
    let tg = sb.bot_token("tg", &[]);
    let exec = json!({"tool": "exec_command", "context_id": "job-r",
        "args": {"cmd": "sleep 1000 & echo $!; wait", "yield_ms": 500}});
    let r = sb
        .request_as(&tg, "POST", "/v1/tools/call", Some(&exec))
        .json();
    let session = r["data"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    let pid: u32 = r["data"]["output"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{r}"));
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    let call = sb.call_in_background_as(&tg, "signer:write_note", json!({"text": "late"}));
    let pending = sb.wait_pending("signer", "write_note");
    assert_eq!(pending["requested_by"], "tg", "{pending}");
    let id = pending["id"].as_str().unwrap().to_string();

    let out = sb.cli(&["tokens", "revoke", "tg"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The waiting call hears the refusal at once, with the reason.
    let done = call.join().unwrap();
    assert_eq!(done["error_kind"], "approval_denied", "{done}");
    assert!(
        done["error"].as_str().unwrap().contains("was revoked"),
        "{done}"
    );
    let approval = (sb.approvals(None).into_iter())
        .find(|a| a["id"] == id.as_str())
        .unwrap();
    assert_eq!(approval["status"], "denied", "{approval}");
    // The session's processes are gone, and the session with them.
    crate::harness::poll(
        "the revoked bot's sleep to end",
        Duration::from_secs(10),
        || (!std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(()),
    );
    let poll = json!({"tool": "write_stdin", "context_id": "job-r",
        "args": {"session_id": session, "chars": ""}});
    let r = sb.request("POST", "/v1/tools/call", Some(&poll)).json();
    assert_eq!(r["error_kind"], "not_found", "{r}");
}
