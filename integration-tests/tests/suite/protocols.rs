//! A tool call through the gateway for each way a tool can speak: `jsonrpc` (python),
//! `plain` (POSIX shell) and a JavaScript `package.json` skill run by the Node runner.

use serde_json::json;

use crate::harness::server::HELLO;
use crate::harness::{on_sandbox_path, Options, Skillbox};

#[test]
fn tool_call_runs_jsonrpc_python_and_plain_shell_tools_through_the_gateway() {
    let sb = Skillbox::start(Options::default());

    let tools = sb.request("GET", "/v1/tools", None).json();
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for want in ["echo:echo", "word-count:count", "jsnet:get", "vault:env"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }

    // jsonrpc, python (the example skill).
    let r = sb.call("echo:echo", json!({"text": "héllo wörld"}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"], json!({"echo": {"text": "héllo wörld"}}));
    assert!(r["call_id"].as_str().is_some_and(|c| !c.is_empty()), "{r}");
    assert!(r["duration_ms"].is_u64(), "{r}");

    // plain, shell (the example skill): stdout, stderr and exit code.
    let r = sb.call_ok("word-count:count", json!({"text": "one two three four"}));
    assert_eq!(r["exit_code"], 0, "{r}");
    assert_eq!(r["stdout"].as_str().map(str::trim), Some("4"), "{r}");

    // The schema is checked before anything runs.
    let r = sb.call("echo:echo", json!({"text": 5}));
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error_kind"], "invalid_args", "{r}");

    // An unknown tool is not_found.
    let r = sb.call("echo:nope", json!({}));
    assert_eq!(r["error_kind"], "not_found", "{r}");
}

#[test]
fn tool_call_runs_a_javascript_package_json_skill_through_the_node_runner() {
    if !on_sandbox_path("node") {
        eprintln!(
            "SKIPPED tool_call_runs_a_javascript_package_json_skill_through_the_node_runner: \
             no node on the sandbox PATH"
        );
        return;
    }
    let sb = Skillbox::start(Options::default());
    // context.fetch through the core to the local server the skill declares.
    let r = sb.call_ok("jsnet:get", json!({"url": sb.allowed.url("/hello")}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["body"], HELLO, "{r}");
    assert_eq!(r["skill"], "jsnet", "{r}");
    assert!(sb.allowed.hits().contains(&"/hello".to_string()));

    // ...and the JS runner hands refusals to the skill as errors with the contract code.
    let r = sb.call_ok("jsnet:get", json!({"url": "https://example.com/"}));
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["code"], -32001, "{r}");
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("not in the skill's permissions.network"),
        "{r}"
    );
}
