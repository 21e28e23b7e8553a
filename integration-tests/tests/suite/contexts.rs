//! Pinned contexts, progressive disclosure and plan execution through the real gateway.

use serde_json::json;

use crate::harness::{Options, Skillbox};

#[test]
fn context_pin_limits_tool_calls_to_its_active_tools() {
    let sb = Skillbox::start(Options::default());
    // An instruction-only skill whose allowed-tools name echo's tool only.
    let dir = sb.state().parent().unwrap().join("skills/echo-only");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: echo-only\ndescription: Only ever echo.\nallowed-tools: [\"echo:echo\"]\n---\n# Echo only\nUse echo.\n",
    )
    .unwrap();
    let r = sb.request("POST", "/v1/skills/reload", None);
    assert_eq!(r.status, 200, "{}", r.body);

    let r = sb.request("PUT", "/v1/contexts/chat-1/skills/echo-only", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let ctx = r.json();
    assert_eq!(ctx["restricted"], true, "{ctx}");
    assert_eq!(
        ctx["active_tools"],
        json!([
            "echo:echo",
            "load_skill",
            "run_skill",
            "run_skill_script",
            "exec_command",
            "write_stdin",
            "close_context"
        ])
    );
    assert!(ctx["prompt"].as_str().unwrap().contains("# Echo only"));

    let call = |tool: &str, args: serde_json::Value| {
        let r = sb.request(
            "POST",
            "/v1/tools/call",
            Some(&json!({"tool": tool, "args": args, "context_id": "chat-1"})),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()
    };
    let refused = call("word-count:count", json!({"text": "a b"}));
    assert_eq!(refused["error_kind"], "permission_denied", "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("echo:echo"),
        "{refused}"
    );
    let echoed = call("echo:echo", json!({"text": "x"}));
    assert_eq!(echoed["success"], true, "{echoed}");
    let loaded = call("load_skill", json!({"name": "echo-only"}));
    // Built-in results and refusals carry a real call id, as dispatched calls do.
    for result in [&loaded, &refused] {
        let id = result["call_id"].as_str().unwrap();
        assert!(
            id.len() == 24 && id.chars().all(|c| c.is_ascii_hexdigit()),
            "{result}"
        );
    }
    assert_ne!(loaded["call_id"], refused["call_id"]);
    assert!(loaded["data"]["body"]
        .as_str()
        .unwrap()
        .contains("Use echo."));

    let r = sb.request("DELETE", "/v1/contexts/chat-1/skills/echo-only", None);
    assert_eq!(r.json()["restricted"], false, "{}", r.body);
    assert_eq!(
        call("word-count:count", json!({"text": "a b"}))["success"],
        true
    );
}

#[test]
fn route_execute_runs_the_primary_and_returns_its_transitions() {
    let sb = Skillbox::start(Options::default());
    let r = sb.request(
        "POST",
        "/v1/route/execute",
        Some(&json!({"query": "$echo hello", "args": {"text": "hello"}})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let run = r.json();
    assert_eq!(run["outcome"], "success", "{run}");
    assert_eq!(run["skill"], "echo", "{run}");
    assert_eq!(run["transitions"][0]["from"], "selected", "{run}");
    assert_eq!(run["transitions"][1]["to"], "success", "{run}");
    assert_eq!(run["plan"]["primary"], "echo", "{run}");
}

#[test]
fn skill_file_route_refuses_parent_traversal() {
    let sb = Skillbox::start(Options::default());
    let r = sb.request("GET", "/v1/skills/echo/files/SKILL.md", None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["content"].as_str().unwrap().contains("name: echo"));
    let r = sb.request("GET", "/v1/skills/echo/files/../word-count/SKILL.md", None);
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.json()["error_kind"], "permission_denied");
    let tools = sb.request("GET", "/v1/tools", None).json();
    let load = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "load_skill")
        .cloned()
        .unwrap();
    let names = &load["parameters"]["properties"]["name"]["enum"];
    assert!(names.as_array().unwrap().contains(&json!("echo")), "{load}");
}
