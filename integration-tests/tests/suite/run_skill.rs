//! `run_skill {name, task}` (seed 001 §19) under `skillbox up`, over REST: an agent
//! delegates a task to a skill and gets a child context for its sub-agent, with the skill
//! pinned, its instructions and the call chain; the chain continues from that context and
//! every refusal says why: a loop, a chain past `[routing] max_delegate_depth` (2), an
//! unknown skill, a skill the caller's token may not use, a missing task; each delegation is
//! a route record of kind `delegation` (`GET /v1/routes`). The MCP side is
//! in core's gateway tests (`gateway/mcp/tests/run_skill.rs`).

use serde_json::{json, Value};

use crate::harness::{Options, Skillbox};

fn run_skill(sb: &Skillbox, token: Option<&str>, context: Option<&str>, name: &str) -> Value {
    let mut body = json!({"tool": "run_skill", "args": {"name": name, "task": "say hello"}});
    if let Some(c) = context {
        body["context_id"] = c.into();
    }
    match token {
        Some(t) => sb.request_as(t, "POST", "/v1/tools/call", Some(&body)),
        None => sb.request("POST", "/v1/tools/call", Some(&body)),
    }
    .json()
}

#[test]
fn run_skill_delegates_into_a_child_context_and_refuses_loops_depth_and_strangers() {
    let sb = Skillbox::start(Options::default());

    // From the bot's context: a child context with echo pinned and its instructions.
    let r = run_skill(&sb, None, Some("chat-7"), "echo");
    assert_eq!(r["success"], true, "{r}\n{}", sb.logs());
    let d = &r["data"];
    assert_eq!(d["status"], "delegated", "{r}");
    assert_eq!(d["context_id"], "chat-7::echo", "{r}");
    assert_eq!(d["target_skill"], "echo");
    assert_eq!(d["call_chain"], json!(["echo"]));
    assert_eq!(d["skill_file"], "SKILL.md");
    assert_eq!(d["task"], "say hello");
    assert!(
        d["instructions"].as_str().is_some_and(|i| !i.is_empty()),
        "{r}"
    );
    let child = sb.request("GET", "/v1/contexts/chat-7::echo", None).json();
    assert!(
        child.to_string().contains("\"echo\""),
        "the skill is pinned there: {child}"
    );

    // The sub-agent delegates on from its context: the chain is carried.
    let r = run_skill(&sb, None, Some("chat-7::echo"), "word-count");
    assert_eq!(
        r["data"]["call_chain"],
        json!(["echo", "word-count"]),
        "{r}"
    );
    assert_eq!(r["data"]["context_id"], "chat-7::echo::word-count", "{r}");

    // Each delegation is a route record of kind `delegation` beside the routing decisions:
    // the task as the query, the context it came from, the skill as the primary.
    let route_id = r["data"]["route_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(route_id.starts_with("rt_"), "{r}");
    let rec = sb
        .request("GET", &format!("/v1/routes/{route_id}"), None)
        .json();
    let rec = if rec.get("route").is_some() {
        rec["route"].clone()
    } else {
        rec
    };
    assert_eq!(rec["query"], "say hello", "{rec}");
    assert_eq!(rec["context_id"], "chat-7::echo", "{rec}");
    assert_eq!(rec["primary"], "word-count", "{rec}");
    assert_eq!(rec["plan"]["kind"], "delegation", "{rec}");
    assert_eq!(
        rec["plan"]["context_id"], "chat-7::echo::word-count",
        "{rec}"
    );
    assert_eq!(
        rec["plan"]["call_chain"],
        json!(["echo", "word-count"]),
        "{rec}"
    );
    let listed = sb.request("GET", "/v1/routes?limit=10", None).json();
    let delegations = (listed["routes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter())
    .filter(|r| r["plan"]["kind"] == "delegation")
    .count();
    assert_eq!(
        delegations, 2,
        "both delegations so far are listed: {listed}"
    );

    // A loop, and a third level past max_delegate_depth = 2.
    let r = run_skill(&sb, None, Some("chat-7::echo::word-count"), "echo");
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("loop: echo → word-count → echo"),
        "{r}"
    );
    let r = run_skill(&sb, None, Some("chat-7::echo::word-count"), "signer");
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("depth 3 is over [routing] max_delegate_depth = 2"),
        "{r}"
    );

    // No context: the chain starts at `run`.
    let r = run_skill(&sb, None, None, "signer");
    assert_eq!(r["data"]["context_id"], "run::signer", "{r}");

    // An unknown skill, a skill the token may not use, no task.
    let r = run_skill(&sb, None, None, "ghost");
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("ghost"), "{r}");
    let tg = sb.bot_token("tg", &["--skills", "echo"]);
    let r = run_skill(&sb, Some(&tg), None, "signer");
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error_kind"], "permission_denied", "{r}");
    assert_eq!(run_skill(&sb, Some(&tg), None, "echo")["success"], true);
    let r = sb
        .request(
            "POST",
            "/v1/tools/call",
            Some(&json!({"tool": "run_skill", "args": {"name": "echo", "task": " "}})),
        )
        .json();
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("needs a task"), "{r}");
}
