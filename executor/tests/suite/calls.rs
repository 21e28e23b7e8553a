//! How `exec` reports calls that go wrong before or outside the sandbox's limits: broken
//! stdio protocol, arguments that fail the schema, unknown skills and tools.

use std::time::Duration;

use serde_json::json;

use super::harness::{assert_mentions, Manifest, SkillRoot};

#[test]
fn exec_rejects_non_json_stdout_line_as_protocol_error() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        print("this is not JSON-RPC", flush=True)
        reply("never read")
        "#,
    );
    let outcome = root.call("attack:run").run();
    let error = outcome.failure("protocol");
    assert_mentions(error, "not JSON-RPC");
    assert_mentions(error, "this is not JSON-RPC");
}

#[test]
fn exec_reports_exit_before_final_answer_as_protocol_error() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        sys.stderr.write("giving up early\n")
        sys.exit(3)
        "#,
    );
    let outcome = root.call("attack:run").run();
    let error = outcome.failure("protocol");
    assert_mentions(error, "exited with code 3 before its final answer");
    assert_mentions(error, "giving up early");
}

#[test]
fn exec_reports_jsonrpc_error_answer_as_tool_error() {
    let root = SkillRoot::new();
    root.python_skill(
        "attack",
        r#"
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": 0, "error": {"code": 7, "message": "no such coin"}}) + "\n")
        sys.stdout.flush()
        "#,
    );
    let outcome = root.call("attack:run").run();
    let error = outcome.failure("tool_error");
    assert_mentions(error, "error 7: no such coin");
}

/// The schema is checked before anything is spawned: the tool would sleep 10 s.
#[test]
fn exec_rejects_invalid_args_before_spawning() {
    let root = SkillRoot::new();
    root.python_skill_with(
        "attack",
        r#"
        time.sleep(10)
        reply("spawned")
        "#,
        Manifest {
            parameters: "{type: object, properties: {count: {type: integer}}, required: [count], additionalProperties: false}",
            ..Default::default()
        },
    );
    let outcome = root
        .call("attack:run")
        .args(json!({ "count": "ten", "extra": true }))
        .run();
    let error = outcome.failure("invalid_args");
    assert_mentions(error, "schema");
    assert_mentions(error, "/count");
    assert!(
        outcome.elapsed < Duration::from_secs(5),
        "{:?}",
        outcome.elapsed
    );
    assert!(outcome.duration_ms() < 1000, "{outcome}");
}

#[test]
fn exec_reports_unknown_tool_as_not_found() {
    let root = SkillRoot::new();
    root.python_skill("attack", r#"reply("ok")"#);
    let outcome = root.call("attack:no_such_tool").run();
    let error = outcome.failure("not_found");
    assert_mentions(error, "no tool \"no_such_tool\"");
}

#[test]
fn exec_reports_unknown_skill_as_not_found() {
    let root = SkillRoot::new();
    let outcome = root.call("no-such-skill:run").run();
    let error = outcome.failure("not_found");
    assert_mentions(error, "no skill named \"no-such-skill\"");
}
