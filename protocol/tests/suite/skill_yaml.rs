//! The `skill.yaml` loader: the docs/skill-format.md example, defaults, version, limits and
//! unknown keys named by their exact path.

use skillbox_protocol::skill::{
    CostHint, Execution, ManifestFormat, SandboxKind, Security, Severity, ToolEntry, ToolProtocol,
    DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_MS,
};
use tempfile::tempdir;

use super::common::*;

/// The example of docs/skill-format.md, verbatim.
const DOCUMENTED_EXAMPLE: &str = r#"name: crypto-price
version: 0.1.0                      # semver; required for signed install
description: Get cryptocurrency prices
triggers: [price, 价格]
anti_triggers: [weather]
cost_hint: low
parallel_safe: true
prerequisites: { bins: [python3], env: [COINGECKO_API_KEY] }
permissions:
  env: [COINGECKO_API_KEY]          # names; the core supplies the values per call
  network: ["api.coingecko.com", "*.example.org:8443"]   # only through context fetch
  workspace: { read: ["notes/**"] } # core readFile scope, relative to the workspace
execution:
  timeout_ms: 30000
  memory_mb: 256
  max_output_bytes: 1048576
tools:
  - name: get_price                 # [a-z0-9_]{1,64}; full name is "<skill>:<tool>"
    description: Current price of a coin
    command: ["python3", "scripts/price.py"]   # argv; relative paths are inside the skill
    protocol: jsonrpc               # jsonrpc (default) | plain
    security: read                  # read | write | sign
    timeout_ms: 10000               # optional, overrides execution.timeout_ms
    parameters:                     # JSON Schema for the arguments; validated before spawn
      type: object
      properties: { coin: { type: string } }
      required: [coin]
"#;

#[test]
fn skill_yaml_contract_example_loads_clean() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "crypto-price",
        &[
            ("skill.yaml", DOCUMENTED_EXAMPLE),
            ("scripts/price.py", "print(1)\n"),
        ],
    );
    let skill = clean(&dir);
    assert_eq!(skill.name, "crypto-price");
    assert_eq!(skill.version.as_deref(), Some("0.1.0"));
    assert_eq!(skill.formats, [ManifestFormat::SkillYaml]);
    assert_eq!(skill.routing.triggers, ["price", "价格"]);
    assert_eq!(skill.routing.anti_triggers, ["weather"]);
    assert_eq!(skill.routing.cost_hint, Some(CostHint::Low));
    assert!(skill.routing.parallel_safe);
    assert_eq!(skill.prerequisites.bins, ["python3"]);
    assert_eq!(skill.permissions.env, ["COINGECKO_API_KEY"]);
    assert_eq!(
        skill.permissions.network,
        ["api.coingecko.com", "*.example.org:8443"]
    );
    assert_eq!(skill.permissions.workspace.read, ["notes/**"]);
    assert_eq!(skill.execution, Execution::default());
    assert!(skill.body.is_none());
    assert_eq!(skill.read_body().unwrap(), "");
    let tool = skill.tool("get_price").unwrap();
    assert_eq!(
        tool.entry,
        ToolEntry::Command {
            argv: vec!["python3".into(), "scripts/price.py".into()]
        }
    );
    assert_eq!(tool.protocol, ToolProtocol::Jsonrpc);
    assert_eq!(tool.security, Security::Read);
    assert_eq!(skill.timeout_ms(tool), 10_000);
    assert_eq!(tool.parameters["required"][0], "coin");
}

#[test]
fn skill_yaml_defaults_apply_when_absent() {
    let root = tempdir().unwrap();
    let extra = "tools:\n  - name: t\n    command: [\"true\"]\n";
    let dir = write_skill(root.path(), "d", &[("skill.yaml", &skill_yaml("d", extra))]);
    let skill = clean(&dir);
    assert!(skill.permissions.env.is_empty());
    assert!(skill.permissions.network.is_empty());
    assert!(skill.permissions.workspace.read.is_empty());
    assert_eq!(skill.execution.timeout_ms, DEFAULT_TIMEOUT_MS);
    assert_eq!(skill.execution.memory_mb, DEFAULT_MEMORY_MB);
    assert_eq!(skill.execution.max_output_bytes, DEFAULT_MAX_OUTPUT_BYTES);
    let tool = &skill.tools[0];
    assert_eq!(tool.security, Security::Read);
    assert_eq!(tool.protocol, ToolProtocol::Jsonrpc);
    assert_eq!(tool.parameters, serde_json::json!({"type": "object"}));
    assert_eq!(skill.timeout_ms(tool), DEFAULT_TIMEOUT_MS);
}

#[test]
fn skill_yaml_semver_version_loads() {
    let root = tempdir().unwrap();
    for v in ["1.2.3", "0.1.0-alpha.1", "2.0.0+build.5"] {
        let dir = write_skill(
            root.path(),
            "v",
            &[("skill.yaml", &skill_yaml("v", &format!("version: {v}\n")))],
        );
        assert_eq!(clean(&dir).version.as_deref(), Some(v));
    }
}

#[test]
fn skill_yaml_version_not_semver_is_refused() {
    let root = tempdir().unwrap();
    for v in ["\"1.0\"", "v1.2.3", "latest"] {
        let dir = write_skill(
            root.path(),
            "v",
            &[("skill.yaml", &skill_yaml("v", &format!("version: {v}\n")))],
        );
        assert_skipped_for(&dir, "skill.yaml", "version", "not a semantic version");
    }
}

#[test]
fn skill_yaml_limits_in_range_load() {
    let root = tempdir().unwrap();
    let extra = "execution: { timeout_ms: 1, memory_mb: 16, max_output_bytes: 1024, max_file_mb: 1, loopback: true, unix_sockets: true }\n";
    let dir = write_skill(root.path(), "l", &[("skill.yaml", &skill_yaml("l", extra))]);
    let skill = clean(&dir);
    assert_eq!(
        skill.execution,
        Execution {
            timeout_ms: 1,
            memory_mb: 16,
            max_output_bytes: 1024,
            sandbox: SandboxKind::Process,
            prestart: 0,
            max_file_mb: 1,
            loopback: true,
            unix_sockets: true,
        }
    );
    let extra = "execution: { timeout_ms: 3600000, memory_mb: 65536, max_output_bytes: 268435456, max_file_mb: 16384 }\n";
    let dir = write_skill(root.path(), "l", &[("skill.yaml", &skill_yaml("l", extra))]);
    clean(&dir);
}

#[test]
fn skill_yaml_sandbox_container_is_read_and_process_is_the_default() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "c",
        &[(
            "skill.yaml",
            &skill_yaml("c", "execution: { sandbox: container }\n"),
        )],
    );
    assert_eq!(clean(&dir).execution.sandbox, SandboxKind::Container);
    let dir = write_skill(root.path(), "p", &[("skill.yaml", &skill_yaml("p", ""))]);
    assert_eq!(clean(&dir).execution.sandbox, SandboxKind::Process);
}

#[test]
fn skill_yaml_prestart_is_read_and_zero_is_the_default() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "w",
        &[(
            "skill.yaml",
            &skill_yaml("w", "execution: { prestart: 8 }\n"),
        )],
    );
    assert_eq!(clean(&dir).execution.prestart, 8);
    let dir = write_skill(root.path(), "z", &[("skill.yaml", &skill_yaml("z", ""))]);
    assert_eq!(clean(&dir).execution.prestart, 0);
}

#[test]
fn skill_yaml_unknown_sandbox_kind_is_refused() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "v",
        &[(
            "skill.yaml",
            &skill_yaml("v", "execution: { sandbox: vm }\n"),
        )],
    );
    assert_skipped_for(&dir, "skill.yaml", "execution.sandbox", "unknown variant");
}

#[test]
fn skill_yaml_limits_out_of_range_are_refused() {
    let root = tempdir().unwrap();
    for (extra, field) in [
        ("execution: { timeout_ms: 0 }\n", "execution.timeout_ms"),
        (
            "execution: { timeout_ms: 3600001 }\n",
            "execution.timeout_ms",
        ),
        ("execution: { memory_mb: 1 }\n", "execution.memory_mb"),
        ("execution: { memory_mb: 65537 }\n", "execution.memory_mb"),
        (
            "execution: { max_output_bytes: 10 }\n",
            "execution.max_output_bytes",
        ),
        ("execution: { prestart: 9 }\n", "execution.prestart"),
        ("execution: { max_file_mb: 0 }\n", "execution.max_file_mb"),
        (
            "execution: { max_file_mb: 16385 }\n",
            "execution.max_file_mb",
        ),
        (
            "tools:\n  - name: t\n    command: [\"true\"]\n    timeout_ms: 0\n",
            "tools[0].timeout_ms",
        ),
    ] {
        let dir = write_skill(root.path(), "l", &[("skill.yaml", &skill_yaml("l", extra))]);
        assert_skipped_for(&dir, "skill.yaml", field, "out of range");
    }
}

#[test]
fn skill_yaml_negative_limit_is_refused_by_type() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "l",
        &[(
            "skill.yaml",
            &skill_yaml("l", "execution: { memory_mb: -5 }\n"),
        )],
    );
    assert_skipped_for(&dir, "skill.yaml", "execution.memory_mb", "expected u64");
    let s = skipped(&dir);
    assert_eq!(s.diagnostics.len(), 1, "{:#?}", s.diagnostics);
    assert!(s.diagnostics[0].message.starts_with("invalid type"));
}

#[test]
fn skill_yaml_unknown_key_names_its_path() {
    let root = tempdir().unwrap();
    let extra = "tools:\n  - name: t\n    comand: [\"true\"]\n";
    let dir = write_skill(root.path(), "u", &[("skill.yaml", &skill_yaml("u", extra))]);
    assert_skipped_for(
        &dir,
        "skill.yaml",
        "tools[0].comand",
        "unknown field `comand`",
    );

    let dir = write_skill(
        root.path(),
        "u",
        &[("skill.yaml", &skill_yaml("u", "permision: {}\n"))],
    );
    assert_skipped_for(&dir, "skill.yaml", "permision", "unknown field");

    let extra = "permissions:\n  workspace: { write: [\"x\"] }\n";
    let dir = write_skill(root.path(), "u", &[("skill.yaml", &skill_yaml("u", extra))]);
    assert_skipped_for(
        &dir,
        "skill.yaml",
        "permissions.workspace.write",
        "unknown field",
    );
}

#[test]
fn skill_yaml_wrong_enum_value_names_its_path() {
    let root = tempdir().unwrap();
    let extra = "tools:\n  - name: t\n    command: [\"true\"]\n    security: admin\n";
    let dir = write_skill(root.path(), "e", &[("skill.yaml", &skill_yaml("e", extra))]);
    assert_skipped_for(&dir, "skill.yaml", "tools[0].security", "admin");
}

#[test]
fn skill_yaml_broken_yaml_is_skipped() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "b",
        &[("skill.yaml", "name: b\ndescription: [oops\n")],
    );
    let s = skipped(&dir);
    // Only the parse error: no made-up "name missing" / "description missing" findings.
    assert_eq!(s.diagnostics.len(), 1, "{:#?}", s.diagnostics);
    assert_eq!(s.diagnostics[0].severity, Severity::Error);
    assert!(s.diagnostics[0].file.ends_with("skill.yaml"));
}

#[test]
fn skill_yaml_over_size_limit_is_skipped() {
    let root = tempdir().unwrap();
    let big = format!("{}# {}\n", skill_yaml("big", ""), "x".repeat(1024 * 1024));
    let dir = write_skill(root.path(), "big", &[("skill.yaml", &big)]);
    assert_skipped_for(&dir, "skill.yaml", "-", "manifest limit");
}

#[test]
fn skill_yaml_with_100k_nested_brackets_is_refused_before_parsing() {
    // 100,000 `[` (the reported attack): refused by the size bound before parsing.
    let root = tempdir().unwrap();
    let big = format!("{}x: {}\n", skill_yaml("deep", ""), "[".repeat(100_000));
    let dir = write_skill(root.path(), "deep", &[("skill.yaml", &big)]);
    assert_skipped_for(&dir, "skill.yaml", "-", "65536-byte manifest limit");
}

#[test]
fn skill_yaml_nested_past_the_depth_limit_is_refused_before_parsing() {
    // Under the size bound, 60,000 `[` would keep the YAML scanner busy for seconds: the
    // nesting pre-check refuses it and names the limit.
    let root = tempdir().unwrap();
    let deep = format!("{}x: {}\n", skill_yaml("deep", ""), "[".repeat(60_000));
    let dir = write_skill(root.path(), "deep", &[("skill.yaml", &deep)]);
    assert_skipped_for(&dir, "skill.yaml", "-", "nests deeper than 64 levels");
}

#[test]
fn skill_md_frontmatter_nested_past_the_depth_limit_is_refused_before_parsing() {
    let root = tempdir().unwrap();
    let md = format!(
        "---\nname: deep\ndescription: d\nx: {}\n---\nbody\n",
        "[".repeat(60_000)
    );
    let dir = write_skill(root.path(), "deep", &[("SKILL.md", &md)]);
    assert_skipped_for(
        &dir,
        "SKILL.md",
        "frontmatter",
        "nests deeper than 64 levels",
    );
}

#[test]
fn package_json_nested_past_the_depth_limit_is_refused_before_parsing() {
    let root = tempdir().unwrap();
    let json = format!(
        "{{\"name\": \"deep\", \"skillbox\": {{\"x\": {}}}}}",
        "[".repeat(60_000)
    );
    let dir = write_skill(root.path(), "deep", &[("package.json", &json)]);
    assert_skipped_for(&dir, "package.json", "-", "nests deeper than 64 levels");
}
