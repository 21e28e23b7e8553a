//! Delegation (`runSkill`) under `skillbox up`: a tool's program calls another skill's
//! tool through the core. What it may do and every refusal, with the reason:
//!
//! - a declared delegation runs, at depth 1 and 2, and the parent's result lists it;
//! - a third level is over `[routing] max_delegate_depth` (2);
//! - `a → b → a` is a loop;
//! - an undeclared target is refused;
//! - the child runs under its own permissions, never the parent's: a host the parent may
//!   fetch is refused to the child;
//! - the tree shares `max_delegated_calls`;
//! - `route/execute` records each delegation as an event of the route.

use std::path::Path;

use serde_json::{json, Value};

use crate::harness::skills::{open_up, write};
use crate::harness::{Options, Skillbox};

/// One `jsonrpc` tool for every test skill: `ask` delegates `args.calls` times to
/// `args.tool` (with `args.args`) and returns the answers; without `tool` it answers as a
/// leaf, fetching `args.fetch` when given.
const HOP_PY: &str = r#"import json, os, sys

NEXT = [0]

def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()

def capability(method, params):
    NEXT[0] += 1
    send({"jsonrpc": "2.0", "id": NEXT[0], "method": method, "params": params})
    reply = json.loads(sys.stdin.readline())
    if "error" in reply:
        return {"ok": False, "code": reply["error"]["code"], "message": reply["error"]["message"]}
    return {"ok": True, "result": reply["result"]}

request = json.loads(sys.stdin.readline())
args = request["params"]["args"]
me = os.environ.get("SKILLBOX_SKILL", "?")
if "tool" in args:
    answers = [capability("runSkill", {"tool": args["tool"], "args": args.get("args", {})})
               for _ in range(args.get("calls", 1))]
    result = {"skill": me, "answers": answers}
elif "fetch" in args:
    result = {"skill": me, "fetched": capability("fetch", {"url": args["fetch"]})}
else:
    result = {"skill": me, "leaf": True}
send({"jsonrpc": "2.0", "id": 0, "result": result})
"#;

/// `(skill, permissions block)`.
fn skills(port: u16) -> [(&'static str, String); 4] {
    let net = format!("  network: [\"http://127.0.0.1:{port}\"]\n");
    [
        (
            "hop-a",
            format!("permissions:\n  delegate: [hop-b, hop-c, leaf]\n{net}"),
        ),
        (
            "hop-b",
            "permissions:\n  delegate: [hop-a, hop-c, leaf]\n".into(),
        ),
        ("hop-c", "permissions:\n  delegate: [leaf]\n".into()),
        ("leaf", String::new()),
    ]
}

fn prepare_skills(ws: &Path, port: u16) {
    for (name, permissions) in skills(port) {
        let dir = ws.join("skills").join(name);
        write(&dir.join("scripts/hop.py"), HOP_PY);
        write(
            &dir.join("skill.yaml"),
            &format!(
                "name: {name}\nversion: 0.1.0\ndescription: delegation test skill {name}\n\
                 triggers: [delegation-{name}]\n{permissions}\
                 tools:\n  - name: ask\n    description: asks another skill, or answers\n\
                 \x20   command: [\"python3\", \"scripts/hop.py\"]\n    protocol: jsonrpc\n    security: read\n\
                 \x20   parameters: {{ type: object }}\n"
            ),
        );
        open_up(&dir);
    }
}

fn prepare(ws: &Path) {
    // The test servers' port is in the config the harness wrote: the allowed one.
    let toml = std::fs::read_to_string(ws.join("skillbox.toml")).unwrap();
    let port: u16 = toml
        .split("allow_private = [\"127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|p| p.parse().ok())
        .expect("the allowed test server's port");
    prepare_skills(ws, port);
    let mut toml = toml;
    toml.push_str("\n[routing]\nmax_delegated_calls = 4\n");
    std::fs::write(ws.join("skillbox.toml"), toml).unwrap();
}

/// The answers of `ask` on `skill` with `args`.
fn ask(sb: &Skillbox, skill: &str, args: Value) -> Value {
    sb.call(&format!("{skill}:ask"), args)
}

fn refusal(answer: &Value) -> String {
    assert_eq!(answer["ok"], false, "not refused: {answer}");
    answer["message"].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_tool_delegates_within_its_declaration_depth_loop_and_budget_limits() {
    let sb = Skillbox::start(Options {
        prepare: Some(prepare),
        ..Options::default()
    });

    // Depth 1: a → leaf.
    let r = ask(&sb, "hop-a", json!({"tool": "leaf:ask"}));
    assert_eq!(r["success"], true, "{r}");
    let child = &r["data"]["answers"][0]["result"];
    assert_eq!(child["success"], true, "{r}");
    assert_eq!(child["data"]["skill"], "leaf");
    assert_eq!(r["delegated"][0]["tool"], "leaf:ask", "{r}");
    assert_eq!(r["delegated"][0]["depth"], 1);
    assert_eq!(r["delegated"][0]["call_id"], child["call_id"]);

    // Depth 2: a → b → leaf.
    let r = ask(
        &sb,
        "hop-a",
        json!({"tool": "hop-b:ask", "args": {"tool": "leaf:ask"}}),
    );
    let b = &r["data"]["answers"][0]["result"];
    assert_eq!(
        b["data"]["answers"][0]["result"]["data"]["skill"], "leaf",
        "{r}"
    );
    assert_eq!(b["delegated"][0]["depth"], 2, "{r}");

    // Depth 3: a → b → c → leaf is one level too many; c's call is refused.
    let r = ask(
        &sb,
        "hop-a",
        json!({"tool": "hop-b:ask", "args": {"tool": "hop-c:ask", "args": {"tool": "leaf:ask"}}}),
    );
    let c = &r["data"]["answers"][0]["result"]["data"]["answers"][0]["result"];
    let why = refusal(&c["data"]["answers"][0]);
    assert!(why.contains("max_delegate_depth"), "{why}");

    // A loop: a → b → a.
    let r = ask(
        &sb,
        "hop-a",
        json!({"tool": "hop-b:ask", "args": {"tool": "hop-a:ask"}}),
    );
    let why = refusal(&r["data"]["answers"][0]["result"]["data"]["answers"][0]);
    assert!(
        why.contains("loop") && why.contains("hop-a → hop-b → hop-a"),
        "{why}"
    );

    // Not declared: c may call leaf only.
    let r = ask(&sb, "hop-c", json!({"tool": "hop-b:ask"}));
    let why = refusal(&r["data"]["answers"][0]);
    assert!(
        why.contains("does not declare hop-b:ask in permissions.delegate"),
        "{why}"
    );
    assert_eq!(r["delegated"][0]["success"], false);

    // The child's own permissions: a may fetch the test server, leaf may not, and a's
    // delegation does not lend it a's.
    let url = format!("http://127.0.0.1:{}/hello", sb.allowed.port);
    let own = ask(&sb, "hop-a", json!({"fetch": url}));
    assert_eq!(own["data"]["fetched"]["ok"], true, "{own}");
    let r = ask(
        &sb,
        "hop-a",
        json!({"tool": "leaf:ask", "args": {"fetch": url}}),
    );
    let fetched = &r["data"]["answers"][0]["result"]["data"]["fetched"];
    let why = refusal(fetched);
    assert!(why.contains("fetch refused"), "{why}");

    // The budget: 4 delegations for the whole tree; the fifth is refused.
    let r = ask(&sb, "hop-a", json!({"tool": "leaf:ask", "calls": 5}));
    let answers = r["data"]["answers"].as_array().unwrap();
    assert!(answers[..4].iter().all(|a| a["ok"] == true), "{r}");
    let why = refusal(&answers[4]);
    assert!(why.contains("max_delegated_calls"), "{why}");

    // A route's record holds the delegations of its run.
    let r = sb.request(
        "POST",
        "/v1/route/execute",
        Some(&json!({"query": "delegation-hop-a", "tool": "ask", "args": {"tool": "leaf:ask"}})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let run = r.json();
    let route_id = run["plan"]["route_id"].as_str().unwrap().to_string();
    let record = sb
        .request("GET", &format!("/v1/routes/{route_id}"), None)
        .json();
    let events = record["events"].as_array().unwrap();
    let delegated: Vec<&Value> = events.iter().filter(|e| e["to"] == "delegated").collect();
    assert_eq!(delegated.len(), 1, "{record}");
    assert_eq!(delegated[0]["from"], "running");
    assert_eq!(delegated[0]["skill"], "leaf");
    assert!(
        delegated[0]["reason"]
            .as_str()
            .unwrap()
            .contains("succeeded"),
        "{record}"
    );
}
