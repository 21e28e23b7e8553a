//! Tool rules: names, parameter schemas, commands and entry files.

use std::path::Path;

use tempfile::tempdir;

use super::common::*;

fn one_tool(root: &Path, tool: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
    let yaml = skill_yaml("t", &format!("tools:\n  - {tool}\n"));
    let mut all = vec![("skill.yaml", yaml.as_str())];
    all.extend_from_slice(files);
    write_skill(root, "t", &all)
}

#[test]
fn tool_valid_names_load() {
    let root = tempdir().unwrap();
    let yaml = skill_yaml(
        "t",
        &format!(
            "tools:\n  - {{ name: get_price, command: [\"true\"] }}\n  - {{ name: a1, command: [\"true\"] }}\n  - {{ name: {}, command: [\"true\"] }}\n",
            "x".repeat(64)
        ),
    );
    let dir = write_skill(root.path(), "t", &[("skill.yaml", &yaml)]);
    assert_eq!(clean(&dir).tools.len(), 3);
}

#[test]
fn tool_invalid_name_is_refused() {
    let root = tempdir().unwrap();
    for name in ["getPrice", "get-price", "\"\"", &"x".repeat(65)] {
        let dir = one_tool(
            root.path(),
            &format!("{{ name: {name}, command: [\"true\"] }}"),
            &[],
        );
        assert_skipped_for(
            &dir,
            "skill.yaml",
            "tools[0].name",
            "use 1-64 of a-z, 0-9 and _",
        );
    }
}

#[test]
fn tool_duplicate_name_is_refused() {
    let root = tempdir().unwrap();
    let yaml = skill_yaml(
        "t",
        "tools:\n  - { name: run, command: [\"true\"] }\n  - { name: run, command: [\"false\"] }\n",
    );
    let dir = write_skill(root.path(), "t", &[("skill.yaml", &yaml)]);
    assert_skipped_for(&dir, "skill.yaml", "tools[1].name", "declared twice");
}

#[test]
fn tool_parameters_schema_compiles() {
    let root = tempdir().unwrap();
    let tool = r#"{ name: q, command: ["true"], parameters: { type: object, properties: { n: { type: integer, minimum: 1 } }, required: [n], additionalProperties: false } }"#;
    let dir = one_tool(root.path(), tool, &[]);
    let skill = clean(&dir);
    assert_eq!(skill.tools[0].parameters["properties"]["n"]["minimum"], 1);
}

#[test]
fn tool_parameters_schema_not_compiling_is_refused() {
    let root = tempdir().unwrap();
    let dir = one_tool(
        root.path(),
        r#"{ name: q, command: ["true"], parameters: { type: 12 } }"#,
        &[],
    );
    assert_skipped_for(
        &dir,
        "skill.yaml",
        "tools[0].parameters",
        "does not compile",
    );
}

#[test]
fn tool_output_schema_loads_when_it_is_an_object_schema() {
    let root = tempdir().unwrap();
    let tool = r#"{ name: q, command: ["true"], output_schema: { type: object, properties: { n: { type: integer } }, required: [n] } }"#;
    let dir = one_tool(root.path(), tool, &[]);
    let skill = clean(&dir);
    assert_eq!(
        skill.tools[0].output_schema.as_ref().unwrap()["required"][0],
        "n"
    );
    let none = one_tool(root.path(), r#"{ name: r, command: ["true"] }"#, &[]);
    assert!(clean(&none).tools[0].output_schema.is_none());
}

#[test]
fn tool_output_schema_not_of_an_object_or_not_compiling_is_refused() {
    let root = tempdir().unwrap();
    for (schema, why) in [
        ("{ type: array }", "must be a JSON Schema of an object"),
        ("[1]", "must be a JSON Schema of an object"),
        (
            "{ type: object, properties: { n: { type: 12 } } }",
            "does not compile",
        ),
    ] {
        let dir = one_tool(
            root.path(),
            &format!("{{ name: q, command: [\"true\"], output_schema: {schema} }}"),
            &[],
        );
        assert_skipped_for(&dir, "skill.yaml", "tools[0].output_schema", why);
    }
}

#[test]
fn tool_parameters_not_an_object_is_refused() {
    let root = tempdir().unwrap();
    for params in ["[1, 2]", "\"object\"", "true"] {
        let dir = one_tool(
            root.path(),
            &format!("{{ name: q, command: [\"true\"], parameters: {params} }}"),
            &[],
        );
        assert_skipped_for(
            &dir,
            "skill.yaml",
            "tools[0].parameters",
            "must be a JSON Schema object",
        );
    }
}

#[test]
fn tool_command_on_path_or_inside_skill_loads() {
    let root = tempdir().unwrap();
    let dir = one_tool(
        root.path(),
        r#"{ name: a, command: ["python3", "scripts/x.py", "--flag=1", "/etc/ssl/certs"] }"#,
        &[],
    );
    clean(&dir);
    let dir = one_tool(
        root.path(),
        r#"{ name: a, command: ["scripts/run.sh", "arg"] }"#,
        &[("scripts/run.sh", "#!/bin/sh\n")],
    );
    clean(&dir);
    let dir = one_tool(
        root.path(),
        r#"{ name: a, command: ["/usr/bin/env", "python3"] }"#,
        &[],
    );
    clean(&dir);
}

#[test]
fn tool_command_empty_is_refused() {
    let root = tempdir().unwrap();
    let dir = one_tool(root.path(), "{ name: a, command: [] }", &[]);
    assert_skipped_for(&dir, "skill.yaml", "tools[0].command", "empty");
    let dir = one_tool(root.path(), "{ name: a, command: [\"\"] }", &[]);
    assert_skipped_for(
        &dir,
        "skill.yaml",
        "tools[0].command[0]",
        "program name is empty",
    );
}

#[test]
fn tool_command_missing_is_refused() {
    let root = tempdir().unwrap();
    let dir = one_tool(root.path(), "{ name: a }", &[]);
    assert_skipped_for(&dir, "skill.yaml", "tools[0]", "missing field `command`");
}

#[test]
fn tool_command_argument_leaving_the_skill_is_refused() {
    let root = tempdir().unwrap();
    let dir = one_tool(
        root.path(),
        r#"{ name: a, command: ["python3", "../other/x.py"] }"#,
        &[],
    );
    assert_skipped_for(
        &dir,
        "skill.yaml",
        "tools[0].command[1]",
        "leaves the skill folder",
    );
    let dir = one_tool(
        root.path(),
        r#"{ name: a, command: ["python3", "scripts/../../x.py"] }"#,
        &[],
    );
    assert_skipped_for(
        &dir,
        "skill.yaml",
        "tools[0].command[1]",
        "leaves the skill folder",
    );
}

#[test]
fn tool_command_program_leaving_the_skill_is_refused() {
    let root = tempdir().unwrap();
    let dir = one_tool(root.path(), r#"{ name: a, command: ["../bin/run"] }"#, &[]);
    assert_skipped_for(
        &dir,
        "skill.yaml",
        "tools[0].command[0]",
        "\"..\" is not allowed",
    );
}

#[test]
fn tool_command_relative_program_missing_is_refused() {
    let root = tempdir().unwrap();
    let dir = one_tool(
        root.path(),
        r#"{ name: a, command: ["scripts/run.sh"] }"#,
        &[],
    );
    assert_skipped_for(&dir, "skill.yaml", "tools[0].command[0]", "does not exist");
    let dir = one_tool(
        root.path(),
        r#"{ name: a, command: ["./scripts"] }"#,
        &[("scripts/x", "")],
    );
    assert_skipped_for(
        &dir,
        "skill.yaml",
        "tools[0].command[0]",
        "not a regular file",
    );
}

#[cfg(unix)]
#[test]
fn tool_command_symlink_inside_skill_loads() {
    let root = tempdir().unwrap();
    let dir = one_tool(
        root.path(),
        r#"{ name: a, command: ["bin/run"] }"#,
        &[("scripts/run.sh", "#!/bin/sh\n")],
    );
    std::fs::create_dir(dir.join("bin")).unwrap();
    std::os::unix::fs::symlink("../scripts/run.sh", dir.join("bin/run")).unwrap();
    clean(&dir);
}

#[cfg(unix)]
#[test]
fn tool_command_symlink_escaping_skill_is_refused() {
    let root = tempdir().unwrap();
    let outside = root.path().join("outside.sh");
    std::fs::write(&outside, "#!/bin/sh\n").unwrap();
    let dir = one_tool(root.path(), r#"{ name: a, command: ["bin/run"] }"#, &[]);
    std::fs::create_dir(dir.join("bin")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("bin/run")).unwrap();
    assert_skipped_for(
        &dir,
        "skill.yaml",
        "tools[0].command[0]",
        "resolves outside the skill folder",
    );
}
