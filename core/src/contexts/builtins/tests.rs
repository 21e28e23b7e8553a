use serde_json::{json, Map, Value};

use super::*;

/// A value of the type a property's schema names.
fn sample(schema: &Value) -> Value {
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => json!("x"),
        Some("integer") => json!(1),
        Some("boolean") => json!(true),
        Some("array") => json!(["x"]),
        _ => json!("x"),
    }
}

/// Every argument the schema lists, each with a value of its type.
fn every_listed(schema: &Value) -> Map<String, Value> {
    (schema["properties"].as_object().unwrap().iter())
        .map(|(k, v)| (k.clone(), sample(v)))
        .collect()
}

/// The schema a built-in lists and the type the pipeline parses take the same arguments:
/// every listed argument parses, each one the schema does not require may be left out, a
/// required one may not, and one the schema does not list is refused by both.
fn holds_to<T: serde::de::DeserializeOwned>(builtin: &Builtin) {
    let schema = (builtin.schema)(&["s".into()]);
    let name = builtin.name();
    let all = every_listed(&schema);
    assert!(
        serde_json::from_value::<T>(Value::Object(all.clone())).is_ok(),
        "{name}: every listed argument parses"
    );
    let required: Vec<&str> = (schema["required"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    for key in all.keys() {
        let mut without = all.clone();
        without.remove(key);
        let parsed = serde_json::from_value::<T>(Value::Object(without)).is_ok();
        assert_eq!(
            parsed,
            !required.contains(&key.as_str()),
            "{name}: without {key}"
        );
    }
    let mut extra = all;
    extra.insert("made_up".into(), json!(1));
    assert!(
        serde_json::from_value::<T>(Value::Object(extra)).is_err(),
        "{name}"
    );
    assert_eq!(schema["additionalProperties"], false, "{name}");
}

#[test]
fn each_session_builtins_schema_takes_what_its_argument_type_takes() {
    holds_to::<ExecArgs>(&exec_command::BUILTIN);
    holds_to::<WriteArgs>(&write_stdin::BUILTIN);
    holds_to::<CloseArgs>(&close_context::BUILTIN);
}

#[test]
fn every_builtin_is_listed_once_and_found_by_its_target() {
    let listed = listed(&["s".into()], true);
    assert_eq!(listed.len(), ALL.len());
    for builtin in ALL {
        assert!(std::ptr::eq(of(&builtin.target).unwrap(), builtin));
        assert_eq!(
            Target::parse(&builtin.name()).ok(),
            Some(builtin.target.clone())
        );
    }
    let without_exec: Vec<String> = (listed_names(false)).collect();
    assert_eq!(
        without_exec,
        ["load_skill", "run_skill", "run_skill_script"]
    );
}

fn listed_names(exec: bool) -> impl Iterator<Item = String> {
    (listed(&[], exec).into_iter()).map(|t| t["name"].as_str().unwrap().to_string())
}

#[test]
fn what_runs_programs_is_marked_open_world_and_what_reads_is_read_only() {
    let hint = |t: Target, key: &str| of(&t).unwrap().annotations()[key].clone();
    assert_eq!(hint(Target::LoadSkill, "readOnlyHint"), true);
    for t in [
        Target::RunSkillScript,
        Target::ExecCommand,
        Target::WriteStdin,
    ] {
        assert_eq!(hint(t.clone(), "openWorldHint"), true, "{t}");
        assert_eq!(hint(t, "readOnlyHint"), false);
    }
    assert_eq!(hint(Target::CloseContext, "destructiveHint"), true);
    assert_eq!(hint(Target::CloseContext, "openWorldHint"), false);
}

#[test]
fn the_skill_a_builtin_names_is_read_from_its_own_argument() {
    let args = json!({"name": "a", "skill": "b"});
    let named = |t: Target| of(&t).unwrap().reach.named(&args);
    assert_eq!(named(Target::LoadSkill), Some("a"));
    assert_eq!(named(Target::RunSkillScript), Some("a"));
    assert_eq!(named(Target::ExecCommand), Some("b"));
    assert_eq!(named(Target::WriteStdin), None);
    assert_eq!(named(Target::CloseContext), None);
}
