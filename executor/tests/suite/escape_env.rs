//! Environment leaks: the tool sees exactly the contract's variables (docs/skill-format.md) and the
//! declared names the caller supplied, never anything of the executor's own environment.

use std::collections::BTreeMap;

use serde_json::Value;

use super::harness::{assert_mentions, scratch_root, shell_skill, Manifest, SkillRoot, Start};

const EXECUTOR_SECRET: &str = "executor-secret-7f3a";
const AWS_SECRET: &str = "aws-secret-9c1e";

/// The tool's environment exactly as exec'd: `/proc/self/environ`, not `os.environ`.
const DUMP_ENVIRON: &str = r#"
raw = open("/proc/self/environ", "rb").read().decode()
reply(dict(kv.split("=", 1) for kv in raw.split("\0") if kv))
"#;

/// The dumped environment (without the harness's `_prestarted` mark).
fn environ(data: &Value) -> BTreeMap<String, String> {
    let mut data = data.clone();
    if let Some(map) = data.as_object_mut() {
        map.remove("_prestarted");
    }
    serde_json::from_value(data).unwrap()
}

fn names(env: &BTreeMap<String, String>) -> Vec<&str> {
    env.keys().map(String::as_str).collect()
}

fn assert_no_secret(env: &BTreeMap<String, String>) {
    for (name, value) in env {
        for secret in [EXECUTOR_SECRET, AWS_SECRET, "parent-api-key"] {
            assert!(
                !value.contains(secret),
                "{name} carries a secret of the executor's environment: {value}"
            );
        }
    }
}

#[test]
fn sandbox_hides_executor_environment_from_tool() {
    sandbox_hides_executor_environment_from_tool_as(Start::Cold);
}

#[test]
fn sandbox_hides_executor_environment_from_tool_prestarted() {
    sandbox_hides_executor_environment_from_tool_as(Start::Prestarted);
}

fn sandbox_hides_executor_environment_from_tool_as(start: Start) {
    let root = SkillRoot::new();
    root.python_skill_as(start, "attack", DUMP_ENVIRON);
    let outcome = root
        .call("attack:run")
        .process_env("SKILLBOX_TEST_SECRET", EXECUTOR_SECRET)
        .process_env("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
        .process_env("PYTHONPATH", "/tmp/evil-modules")
        .run();
    start.check(&outcome);
    let env = environ(outcome.data());
    assert_eq!(
        names(&env),
        [
            "HOME",
            "LANG",
            "PATH",
            "SKILLBOX_CALL_ID",
            "SKILLBOX_SKILL",
            "SKILLBOX_SKILL_DIR",
            "SKILLBOX_TOOL",
            "TMPDIR",
            "XDG_CONFIG_HOME"
        ],
        "{env:?}"
    );
    assert_no_secret(&env);
    assert_eq!(env["PATH"], "/usr/local/bin:/usr/bin:/bin");
    assert_eq!(env["LANG"], "C.UTF-8");
    assert_eq!(env["HOME"], env["TMPDIR"]);
    assert_eq!(env["HOME"], env["XDG_CONFIG_HOME"]);
    assert!(
        env["HOME"].starts_with(&*scratch_root().to_string_lossy()),
        "HOME {} is not a scratch dir",
        env["HOME"]
    );
    assert_eq!(env["SKILLBOX_SKILL"], "attack");
    assert_eq!(
        env["SKILLBOX_SKILL_DIR"],
        root.skills().join("attack").to_string_lossy()
    );
    assert_eq!(env["SKILLBOX_TOOL"], "run");
    assert_eq!(env["SKILLBOX_CALL_ID"], start.env_call_id(&outcome));
}

#[test]
fn sandbox_passes_declared_env_and_drops_undeclared() {
    let root = SkillRoot::new();
    root.python_skill_with(
        "attack",
        DUMP_ENVIRON,
        Manifest {
            skill: "permissions: { env: [API_KEY] }",
            ..Default::default()
        },
    );
    let outcome = root
        .call("attack:run")
        .env_flag("API_KEY=declared-value")
        .env_flag("UNDECLARED_TOKEN=undeclared-value")
        .env_flag("PATH=/tmp/evil")
        .process_env("SKILLBOX_TEST_SECRET", EXECUTOR_SECRET)
        .run();
    let env = environ(outcome.data());
    assert_eq!(
        names(&env),
        [
            "API_KEY",
            "HOME",
            "LANG",
            "PATH",
            "SKILLBOX_CALL_ID",
            "SKILLBOX_SKILL",
            "SKILLBOX_SKILL_DIR",
            "SKILLBOX_TOOL",
            "TMPDIR",
            "XDG_CONFIG_HOME"
        ],
        "{env:?}"
    );
    assert_eq!(env["API_KEY"], "declared-value");
    assert_eq!(
        env["PATH"], "/usr/local/bin:/usr/bin:/bin",
        "an undeclared --env must not override PATH"
    );
    assert!(
        !env.values().any(|v| v.contains("undeclared-value")),
        "{env:?}"
    );
    assert_no_secret(&env);
}

#[test]
fn sandbox_does_not_fill_declared_env_from_executor_environment() {
    let root = SkillRoot::new();
    root.python_skill_with(
        "attack",
        DUMP_ENVIRON,
        Manifest {
            skill: "permissions: { env: [API_KEY] }",
            ..Default::default()
        },
    );
    // The name is declared but the caller supplies no value: the executor's own API_KEY
    // must not stand in for it.
    let outcome = root
        .call("attack:run")
        .process_env("API_KEY", "parent-api-key")
        .run();
    let env = environ(outcome.data());
    assert!(!env.contains_key("API_KEY"), "{env:?}");
    assert_no_secret(&env);
}

#[test]
fn exec_refuses_env_values_on_the_command_line() {
    let root = SkillRoot::new();
    shell_skill(&root, "echo never\n");
    let output = std::process::Command::new(super::harness::EXECUTOR)
        .args(["exec", "--skills"])
        .arg(root.skills())
        .args([
            "--tool",
            "shell:run",
            "--env",
            "API_KEY=visible-to-every-process",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_mentions(&stderr, "--env takes a NAME only");
    assert_mentions(&stderr, "/proc/<pid>/cmdline");
    assert!(output.stdout.is_empty(), "nothing ran: {output:?}");
}

#[test]
fn exec_takes_env_values_from_its_environment_by_name() {
    let root = SkillRoot::new();
    root.python_skill_with(
        "named",
        "reply({'key': os.environ.get('API_KEY')})",
        Manifest {
            skill: "permissions: { env: [API_KEY] }",
            ..Default::default()
        },
    );
    let output = std::process::Command::new(super::harness::EXECUTOR)
        .args(["exec", "--skills"])
        .arg(root.skills())
        .args(["--tool", "named:run", "--env", "API_KEY"])
        .arg("--scratch-root")
        .arg(scratch_root())
        .env("API_KEY", "from-the-environment")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(r#""key":"from-the-environment""#),
        "{stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
}
