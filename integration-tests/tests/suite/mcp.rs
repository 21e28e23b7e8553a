//! The MCP server (docs/mcp.md) against the real `skillbox up`, driven by the official
//! Python client (`integration-tests/python/mcp_client.py`, PyPI `mcp` 2.x) in both
//! protocol eras, over HTTP and over stdio (`skillbox mcp`), plus the HTTP refusals
//! (token, origin, GET) checked on the wire.

use std::io::{Read, Write};
use std::path::Path;

use serde_json::{json, Value};

use crate::harness::python::{python, run_script};
use crate::harness::skills::{open_up, write};
use crate::harness::{binary, Options, Skillbox};

/// Runs `mcp_client.py SCENARIO` against `sb` with `extra` arguments; its JSON.
fn scenario(py: &Path, sb: &Skillbox, name: &str, extra: &[&str]) -> Value {
    let token = sb.state().join("api-token");
    let mut args = vec![
        name,
        "--addr",
        &sb.addr,
        "--token-file",
        token.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run_script(py, "mcp_client.py", &args, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {stdout}"))
}

/// The stdio arguments: the client starts `skillbox mcp --workspace <ws>`.
fn stdio_args(sb: &Skillbox) -> Vec<String> {
    vec![
        "--stdio".into(),
        sb.ws.to_str().unwrap().into(),
        "--skillbox".into(),
        binary("skillbox").to_str().unwrap().into(),
    ]
}

/// What every list-and-call run must show, whatever the era and transport.
fn assert_list_and_call(sb: &Skillbox, out: &Value, version: &str) {
    assert_eq!(out["protocol_version"], version, "{out}");
    let tools = &out["tools"];
    for name in [
        "echo.echo",
        "signer.write_note",
        "net.fetch",
        "load_skill",
        "run_skill_script",
    ] {
        assert!(tools.get(name).is_some(), "{name} not listed: {tools}");
    }
    assert_eq!(tools["echo.echo"]["readOnlyHint"], true, "{tools}");
    assert_eq!(tools["echo.echo"]["destructiveHint"], false, "{tools}");
    assert_eq!(tools["echo.echo"]["openWorldHint"], false, "{tools}");
    assert_eq!(tools["signer.write_note"]["readOnlyHint"], false, "{tools}");
    assert_eq!(
        tools["signer.write_note"]["destructiveHint"], true,
        "{tools}"
    );
    assert_eq!(tools["signer.sign"]["destructiveHint"], true, "{tools}");
    assert_eq!(
        tools["net.fetch"]["openWorldHint"], true,
        "network permission: {tools}"
    );
    assert_eq!(
        tools["files.read"]["inputSchema"]["required"],
        json!(["path"]),
        "inputSchema is the tool's parameters: {tools}"
    );

    assert_eq!(out["echo"]["is_error"], false, "{out}");
    assert_eq!(
        out["echo"]["structured"],
        json!({"echo": {"text": "hi from mcp"}})
    );
    let text: Value = serde_json::from_str(out["echo"]["text"][0].as_str().unwrap()).unwrap();
    assert_eq!(
        text, out["echo"]["structured"],
        "the text block is the data as JSON"
    );

    // Arguments failing the schema: isError with the message the REST call gives; the
    // tool did not run.
    let rest = sb.call("files:read", json!({}));
    assert_eq!(rest["error_kind"], "invalid_args", "{rest}");
    assert_eq!(out["bad_args"]["is_error"], true, "{out}");
    assert_eq!(out["bad_args"]["text"][0], rest["error"], "{out}");

    assert_eq!(out["unknown"]["code"], -32602, "{out}");
    let m = out["unknown"]["message"].as_str().unwrap();
    assert!(m.contains("unknown tool \"ghost.run\""), "{m}");
}

#[test]
fn mcp_python_client_lists_and_calls_in_both_eras_over_http() {
    let Some(py) = python("mcp_python_client_lists_and_calls_in_both_eras_over_http") else {
        return;
    };
    let sb = Skillbox::start(Options::default());
    let modern = scenario(&py, &sb, "list_call", &["--mode", "auto"]);
    assert_list_and_call(&sb, &modern, "2026-07-28");
    let legacy = scenario(&py, &sb, "list_call", &["--mode", "legacy"]);
    assert_list_and_call(&sb, &legacy, "2025-11-25");
}

#[test]
fn mcp_python_client_lists_and_calls_over_stdio_through_skillbox_mcp() {
    let Some(py) = python("mcp_python_client_lists_and_calls_over_stdio_through_skillbox_mcp")
    else {
        return;
    };
    let sb = Skillbox::start(Options::default());
    let stdio = stdio_args(&sb);
    let stdio: Vec<&str> = stdio.iter().map(String::as_str).collect();
    for (mode, version) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let mut args = vec!["--mode", mode];
        args.extend_from_slice(&stdio);
        let out = scenario(&py, &sb, "list_call", &args);
        assert_list_and_call(&sb, &out, version);
    }
}

/// A `signer:write_note` call through MCP waits; the operator decides through the REST
/// API; the call's result follows the decision.
fn approval_run(py: &Path, sb: &Skillbox, decision: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--decision", decision];
    args.extend_from_slice(extra);
    let out = scenario(py, sb, "approval", &args);
    let id = out["decided"][0].as_str().unwrap().to_string();
    let approvals = sb.approvals(None);
    let record = approvals
        .iter()
        .find(|a| a["id"] == id.as_str())
        .unwrap_or_else(|| panic!("approval {id} not found: {approvals:?}"));
    assert_eq!(record["skill"], "signer");
    assert_eq!(record["tool"], "write_note");
    let want = if decision == "approve" {
        "used"
    } else {
        "denied"
    };
    assert_eq!(record["status"], want, "{record}");
    if !extra.contains(&"--elicit") {
        assert_eq!(
            out["waiting_when_decided"], true,
            "the MCP call was still waiting when the operator decided: {out}"
        );
    }
    out
}

#[test]
fn mcp_write_call_waits_and_runs_once_approved_through_the_rest_api() {
    let Some(py) = python("mcp_write_call_waits_and_runs_once_approved_through_the_rest_api")
    else {
        return;
    };
    let sb = Skillbox::start(Options::default());
    for mode in ["legacy", "auto"] {
        let out = approval_run(&py, &sb, "approve", &["--mode", mode]);
        assert_eq!(out["result"]["is_error"], false, "{out}");
        assert_eq!(out["result"]["structured"], json!({"written": "from mcp"}));
        assert_eq!(out["meta"]["dev.skillbox/approvalId"], out["decided"][0]);
        assert_eq!(out["links"], json!([]), "no elicitation declared, no link");
    }
}

#[test]
fn mcp_write_call_denied_through_the_rest_api_is_an_error_result_and_does_not_run() {
    let Some(py) =
        python("mcp_write_call_denied_through_the_rest_api_is_an_error_result_and_does_not_run")
    else {
        return;
    };
    let sb = Skillbox::start(Options::default());
    let out = approval_run(&py, &sb, "deny", &["--mode", "legacy"]);
    assert_eq!(out["result"]["is_error"], true, "{out}");
    let text = out["result"]["text"][0].as_str().unwrap();
    let id = out["decided"][0].as_str().unwrap();
    assert!(
        text.starts_with(&format!("approval {id} was denied")) && text.contains("did not run"),
        "{text}"
    );
    assert_eq!(out["result"]["structured"], Value::Null, "{out}");
}

#[test]
fn mcp_client_taking_url_elicitation_gets_the_console_link_of_the_approval() {
    let Some(py) =
        python("mcp_client_taking_url_elicitation_gets_the_console_link_of_the_approval")
    else {
        return;
    };
    let sb = Skillbox::start(Options::default());
    for decision in ["approve", "deny"] {
        let out = approval_run(&py, &sb, decision, &["--mode", "auto", "--elicit"]);
        let id = out["decided"][0].as_str().unwrap();
        let links = out["links"].as_array().unwrap();
        assert_eq!(links.len(), 1, "one approval, one link: {out}");
        assert_eq!(links[0]["mode"], "url");
        assert_eq!(
            links[0]["url"],
            format!("http://{}/console/approvals/{id}", sb.addr)
        );
        let approved = decision == "approve";
        assert_eq!(out["result"]["is_error"], !approved, "{out}");
        if approved {
            assert_eq!(out["result"]["structured"], json!({"written": "from mcp"}));
        }
    }
}

#[test]
fn mcp_context_endpoint_lists_and_allows_only_the_context_tools() {
    let Some(py) = python("mcp_context_endpoint_lists_and_allows_only_the_context_tools") else {
        return;
    };
    let sb = Skillbox::start(Options::default());
    let dir = sb.ws.join("skills/echo-only");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: echo-only\ndescription: Only ever echo.\nallowed-tools: [\"echo:echo\"]\n---\n# Echo only\n",
    )
    .unwrap();
    assert_eq!(sb.request("POST", "/v1/skills/reload", None).status, 200);
    let r = sb.request("PUT", "/v1/contexts/chat-1/skills/echo-only", None);
    assert_eq!(r.status, 200, "{}", r.body);

    for mode in ["auto", "legacy"] {
        let out = scenario(
            &py,
            &sb,
            "context",
            &["--mode", mode, "--path", "/mcp/chat-1"],
        );
        assert_eq!(
            out["tools"],
            json!([
                "close_context",
                "echo.echo",
                "exec_command",
                "load_skill",
                "run_skill",
                "run_skill_script",
                "write_stdin"
            ]),
            "{out}"
        );
        assert_eq!(out["inside"]["is_error"], false, "{out}");
        assert_eq!(out["outside"]["is_error"], true, "{out}");
        let text = out["outside"]["text"][0].as_str().unwrap();
        assert!(text.contains("not active in context \"chat-1\""), "{text}");
    }
    // The same tool on the endpoint without a context runs.
    let out = scenario(&py, &sb, "context", &["--mode", "auto"]);
    assert_eq!(out["outside"]["is_error"], false, "{out}");
}

#[test]
fn mcp_skills_get_digests_are_the_installed_ones() {
    let Some(py) = python("mcp_skills_get_digests_are_the_installed_ones") else {
        return;
    };
    let sb = Skillbox::start(Options::default());
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/workspace/skills/hello");
    let r = sb.request(
        "POST",
        "/v1/skills/install",
        Some(&json!({"source": source})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let out = scenario(&py, &sb, "skills", &["--mode", "auto"]);
    assert_eq!(out["protocol_version"], "2026-07-28");
    assert_eq!(
        out["capabilities"]["extensions"]["io.modelcontextprotocol/skills"],
        json!({}),
        "{out}"
    );

    let skills_root = sb.ws.join("skills");
    let lock: Value =
        serde_json::from_slice(&std::fs::read(skills_root.join(".skillbox-lock.json")).unwrap())
            .unwrap();
    let installed = skills_root.join("hello");
    let digest = skillbox_protocol::skill::package_digest(&installed).unwrap();
    assert_eq!(lock["hello"]["digest"], digest.prefixed(), "{lock}");
    let want: Vec<Value> = digest
        .files
        .iter()
        .map(|f| {
            let size = std::fs::metadata(installed.join(&f.path)).unwrap().len();
            json!({"uri": format!("skill://hello/{}", f.path), "digest": format!("sha256:{}", f.sha256), "size": size})
        })
        .collect();
    let uri = "skill://hello/SKILL.md";
    assert_eq!(out["get"][uri]["resources"], json!(want), "{out}");
    let listed = out["list"].as_array().unwrap();
    let hello = listed.iter().find(|s| s["uri"] == uri).unwrap();
    assert_eq!(hello["resources"], json!(want));
    assert_eq!(hello["frontmatter"]["name"], "hello");
    assert_eq!(out["unknown"]["code"], -32602, "{out}");
    assert_eq!(
        out["resources"][uri],
        std::fs::read_to_string(installed.join("SKILL.md")).unwrap(),
        "SKILL.md verbatim"
    );
}

/// Adds the skill `shaped`: the signer's test tool as a `read` tool that declares the
/// shape of its result.
fn add_shaped_skill(ws: &Path) {
    let skills = ws.join("skills");
    let script = std::fs::read_to_string(skills.join("signer/scripts/tool.py")).unwrap();
    write(&skills.join("shaped/scripts/tool.py"), &script);
    write(
        &skills.join("shaped/skill.yaml"),
        "name: shaped\ndescription: a tool with an output schema\ntools:\n  - name: write_note\n\
         \x20   description: echoes its text as written\n    command: [\"python3\", \"scripts/tool.py\"]\n\
         \x20   parameters: { type: object, properties: { text: { type: string } }, required: [text] }\n\
         \x20   output_schema: { type: object, properties: { written: { type: string } }, required: [written] }\n",
    );
    open_up(&skills.join("shaped"));
}

#[test]
fn mcp_tool_declaring_an_output_schema_lists_it_and_its_result_conforms() {
    let Some(py) = python("mcp_tool_declaring_an_output_schema_lists_it_and_its_result_conforms")
    else {
        return;
    };
    let sb = Skillbox::start(Options {
        prepare: Some(add_shaped_skill),
        ..Options::default()
    });
    for mode in ["auto", "legacy"] {
        let out = scenario(&py, &sb, "output_schema", &["--mode", mode]);
        assert_eq!(
            out["output_schema"]["required"],
            json!(["written"]),
            "{out}"
        );
        assert_eq!(out["echo_output_schema"], Value::Null, "{out}");
        assert_eq!(out["result"]["is_error"], false, "{out}");
        assert_eq!(out["result"]["structured"], json!({"written": "shaped"}));
    }
}

/// A raw request: status line and headers, then the body.
fn raw(addr: &str, request: &str) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head.to_ascii_lowercase(), body.to_string())
}

fn post(addr: &str, headers: &str, body: &str) -> (u16, String, String) {
    raw(
        addr,
        &format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n{headers}\r\n{body}",
            body.len()
        ),
    )
}

#[test]
fn mcp_without_the_token_is_401_with_www_authenticate_and_a_foreign_origin_is_403() {
    let sb = Skillbox::start(Options::default());
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let (status, head, body) = post(&sb.addr, "", list);
    assert_eq!(status, 401, "{body}");
    assert!(head.contains("www-authenticate: bearer"), "{head}");
    let (status, head, _) = post(&sb.addr, "Authorization: Bearer wrong\r\n", list);
    assert_eq!(status, 401);
    assert!(head.contains("www-authenticate: bearer"), "{head}");

    let auth = format!("Authorization: Bearer {}\r\n", sb.token);
    let (status, _, body) = post(
        &sb.addr,
        &format!("{auth}Origin: https://evil.example\r\n"),
        list,
    );
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("[mcp] allowed_origins"), "{body}");
    let (status, _, body) = post(&sb.addr, &auth, list);
    assert_eq!(status, 200, "no Origin (not a browser) is fine: {body}");

    let (status, head, _) = raw(
        &sb.addr,
        &format!(
            "GET /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{auth}\r\n",
            sb.addr
        ),
    );
    assert_eq!(status, 405);
    assert!(head.contains("allow: post"), "{head}");
}

#[test]
fn mcp_allowed_origin_from_config_is_served() {
    let sb = Skillbox::start(Options {
        extra_toml: "[mcp]\nallowed_origins = [\"https://app.example\"]\n".into(),
        ..Options::default()
    });
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let auth = format!("Authorization: Bearer {}\r\n", sb.token);
    let (status, _, body) = post(
        &sb.addr,
        &format!("{auth}Origin: https://app.example\r\n"),
        list,
    );
    assert_eq!(status, 200, "{body}");
    let (status, _, _) = post(
        &sb.addr,
        &format!("{auth}Origin: https://other.example\r\n"),
        list,
    );
    assert_eq!(status, 403);
}

#[test]
fn skillbox_mcp_without_a_running_core_exits_saying_how_to_start_it() {
    let ws = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(binary("skillbox"))
        .args(["mcp", "--workspace"])
        .arg(ws.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no running core found") && stderr.contains("skillbox up --workspace"),
        "{stderr}"
    );
}
