//! Skill repairs through the real gateway (`POST /v1/skills/{name}/repairs`) and hot
//! reload of the skills root.

use std::time::Duration;

use serde_json::json;

use crate::harness::{poll, Options, Skillbox};

const NOTES: &str = "---\nname: notes\ndescription: Keeps notes. Use when the user asks to note something.\n---\n# Notes\n\nRun the note tool with the text.\n";

/// Writes the `notes` skill and waits for the skills watch to load it (no reload call).
fn start_with_notes() -> Skillbox {
    let sb = Skillbox::start(Options::default());
    let dir = sb.state().parent().unwrap().join("skills/notes");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), NOTES).unwrap();
    poll(
        "the watch to load a new skill",
        Duration::from_secs(10),
        || (sb.request("GET", "/v1/skills/notes", None).status == 200).then_some(()),
    );
    sb
}

/// A run of `notes` through `POST /v1/route/execute` (it has no tool, so it fails): the
/// run a repair answers.
fn failed_run(sb: &Skillbox) -> String {
    let r = sb.request(
        "POST",
        "/v1/route/execute",
        Some(&json!({"query": "$notes remember the milk", "args": {}})),
    );
    let run = r.json();
    let id = run["plan"]["route_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{run}"));
    assert!(
        run["transitions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["skill"] == "notes"),
        "{run}"
    );
    id.to_string()
}

fn proposal(sb: &Skillbox, path: &str, content: &str) -> serde_json::Value {
    json!({
        "run_id": failed_run(sb),
        "error_signature": "invalid_args: text missing",
        "root_cause": "the body does not say the argument is named text",
        "expected_effect": "the agent passes {\"text\": ...}",
        "task_progress": 0.8,
        "root_cause_count": 1,
        "patch": [{"path": path, "content": content}],
    })
}

#[test]
fn repair_route_applies_a_patch_and_the_catalog_shows_it() {
    let sb = start_with_notes();
    let fixed = NOTES.replace("with the text.", "with `{\"text\": \"...\"}`.");
    let r = sb.request(
        "POST",
        "/v1/skills/notes/repairs",
        Some(&proposal(&sb, "SKILL.md", &fixed)),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.json();
    assert_eq!(body["repair"]["outcome"], "applied", "{body}");
    assert_eq!(body["repair"]["attempt"], 1, "{body}");
    assert_eq!(
        body["repair"]["patched_files"],
        json!(["SKILL.md"]),
        "{body}"
    );
    let skill = sb.request("GET", "/v1/skills/notes", None).json();
    assert!(
        skill["body"].as_str().unwrap().contains("{\"text\""),
        "{skill}"
    );
}

#[test]
fn repair_route_refuses_an_out_of_scope_path_and_an_ineligible_failure() {
    let sb = start_with_notes();
    let r = sb.request(
        "POST",
        "/v1/skills/notes/repairs",
        Some(&proposal(&sb, "../echo/SKILL.md", "x\n")),
    );
    assert_eq!(r.status, 403, "{}", r.body);
    let body = r.json();
    assert_eq!(body["check"], "scope", "{body}");
    assert_eq!(body["error_kind"], "permission_denied", "{body}");

    // A run id that names no run of this core gets no budget.
    let mut made_up = proposal(&sb, "SKILL.md", NOTES);
    made_up["run_id"] = json!("made-up-1");
    let r = sb.request("POST", "/v1/skills/notes/repairs", Some(&made_up));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("is not a run of this core"), "{}", r.body);

    let mut far = proposal(&sb, "SKILL.md", NOTES);
    far["task_progress"] = json!(0.2);
    let r = sb.request("POST", "/v1/skills/notes/repairs", Some(&far));
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["check"], "eligibility", "{}", r.body);
}
