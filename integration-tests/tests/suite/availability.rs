//! Availability is judged where tools run: a program that only the core's host has is not
//! enough for a skill, because its tools start in the executor's sandbox with the sandbox
//! `PATH`. Routing, `/v1/skills` and calls give the same verdict.

use std::os::unix::fs::PermissionsExt;

use serde_json::{json, Value};

use crate::harness::{Options, Skillbox};

const CORE_ONLY: &str = "skillbox-core-only-program";

fn skill(name: &str, program: &str, command: &str) -> (String, String) {
    (
        name.to_string(),
        format!(
            "name: {name}\n\
             description: Reports the {name} marker through {program}\n\
             triggers: [{name}]\n\
             prerequisites: {{ bins: [{program}] }}\n\
             tools:\n  \
               - name: run\n    \
                 description: runs {program}\n    \
                 command: {command}\n    \
                 protocol: plain\n    \
                 parameters: {{ type: object }}\n"
        ),
    )
}

fn summary<'a>(skills: &'a Value, name: &str) -> &'a Value {
    skills["skills"]
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no skill {name} in {skills}"))
}

#[test]
fn program_only_on_the_core_path_makes_a_skill_unavailable_everywhere() {
    let bin = tempfile::tempdir().unwrap();
    let program = bin.path().join(CORE_ONLY);
    std::fs::write(&program, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let sb = Skillbox::start(Options {
        core_path_prefix: Some(bin.path().to_path_buf()),
        extra_skills: vec![
            skill("coreonly", CORE_ONLY, &format!("[\"{CORE_ONLY}\"]")),
            skill("shellready", "sh", r#"["sh", "-c", "echo ready"]"#),
        ],
        ..Options::default()
    });

    let skills = sb.request("GET", "/v1/skills", None).json();
    let coreonly = summary(&skills, "coreonly");
    assert_eq!(coreonly["available"], false, "{coreonly}");
    let reason = coreonly["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(CORE_ONLY) && reason.contains("sandbox PATH"),
        "{coreonly}"
    );
    assert_eq!(
        summary(&skills, "shellready")["available"],
        true,
        "{skills}"
    );

    let plan = sb
        .request("POST", "/v1/route", Some(&json!({ "query": "coreonly" })))
        .json();
    let candidate = plan["candidates"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["skill"] == "coreonly"))
        .unwrap_or_else(|| panic!("coreonly not a candidate: {plan}"));
    assert!(
        candidate["breakdown"]["context_readiness"].as_f64() < Some(1.0),
        "{candidate}"
    );
    assert!(
        !plan["selected"]
            .as_array()
            .is_some_and(|s| s.iter().any(|n| n == "coreonly")),
        "an unavailable skill was selected: {plan}"
    );

    let result = sb.call("coreonly:run", json!({}));
    assert_eq!(result["success"], false, "{result}");
    assert_eq!(result["error_kind"], "unavailable", "{result}");
    assert!(
        result["error"]
            .as_str()
            .unwrap_or_default()
            .contains(CORE_ONLY),
        "{result}"
    );
    let ready = sb.call("shellready:run", json!({}));
    assert_eq!(ready["success"], true, "{ready}");
    assert_eq!(ready["data"]["stdout"], "ready\n", "{ready}");
}
