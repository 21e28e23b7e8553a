//! `skill list` and `route` read the skills roots the running core reads: the workspace of
//! `skillbox up` by default (examples/workspace from the repository root), its `[skills]
//! roots` in precedence order; `--skills DIR` still names roots directly.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::skill_folder::write_skill;

fn skillbox(cwd: &Path, args: &[&str]) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_skillbox"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        v,
        format!("{stdout}{stderr}"),
    )
}

fn names(v: &Value) -> Vec<String> {
    v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn skill_list_defaults_to_the_workspace_that_up_defaults_to() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (code, v, out) = skillbox(&repo, &["skill", "list", "--json"]);
    assert_eq!(code, 0, "{out}");
    let found = names(&v);
    for n in ["echo", "notes", "word-count"] {
        assert!(found.contains(&n.to_string()), "{n} missing: {out}");
    }
    // `--skills DIR` still works, and names the roots itself.
    let (code, v, out) = skillbox(
        &repo,
        &[
            "skill",
            "list",
            "--json",
            "--skills",
            "examples/workspace/skills",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert!(names(&v).contains(&"notes".to_string()), "{out}");
}

/// The example workspace holds its skills itself (no link out of the folder), so a copy of
/// it, as a new user makes one to start their own, still lists the example skills.
#[test]
fn a_copy_of_the_example_workspace_keeps_its_skills() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let example = repo.join("examples/workspace");
    let skills = example.join("skills");
    let meta = std::fs::symlink_metadata(&skills).unwrap();
    assert!(
        meta.is_dir(),
        "examples/workspace/skills must be a real folder, not a link"
    );
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("mybot");
    copy_tree(&example, &copy);
    let (code, v, out) = skillbox(
        dir.path(),
        &[
            "skill",
            "list",
            "--json",
            "--workspace",
            copy.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{out}");
    let found = names(&v);
    for n in ["echo", "notes", "word-count"] {
        assert!(
            found.contains(&n.to_string()),
            "{n} missing in the copy: {out}"
        );
    }
}

/// `cp -r` without following links out of the tree: a link is copied as a link.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        let target = to.join(entry.file_name());
        if kind.is_symlink() {
            let link = std::fs::read_link(entry.path()).unwrap();
            std::os::unix::fs::symlink(link, &target).unwrap();
        } else if kind.is_dir() {
            if entry.file_name() == ".skillbox" {
                continue;
            }
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn skill_list_and_route_read_the_workspace_roots_in_precedence_order() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    write_skill(&ws.join("personal/tally"), "tally", "2.0.0", "personal");
    write_skill(&ws.join("skills/tally"), "tally", "1.0.0", "project");
    write_skill(&ws.join("skills/other"), "other", "1.0.0", "project");
    std::fs::write(
        ws.join("skillbox.toml"),
        "[skills]\nroots = [\"personal\"]\n",
    )
    .unwrap();
    let ws_arg = ws.to_str().unwrap();
    let (code, v, out) = skillbox(ws, &["skill", "list", "--json", "--workspace", ws_arg]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        names(&v),
        ["other", "tally"],
        "the install root comes last: {out}"
    );
    let tally = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "tally")
        .unwrap();
    assert_eq!(tally["version"], "2.0.0", "the first root wins: {out}");
    let shadowed = &v["shadowed"][0];
    assert_eq!(shadowed["name"], "tally", "{out}");
    assert!(
        shadowed["hidden"]
            .as_str()
            .unwrap()
            .ends_with("skills/tally"),
        "{out}"
    );

    let (code, plan, out) = skillbox(
        ws,
        &["route", "--json", "--workspace", ws_arg, "tally personal"],
    );
    assert_eq!(code, 0, "{out}");
    let candidates = plan["candidates"].as_array().unwrap();
    assert!(candidates.iter().any(|c| c["skill"] == "tally"), "{out}");

    // A root that is not a folder is refused by name.
    std::fs::write(ws.join("skillbox.toml"), "[skills]\nroots = [\"\"]\n").unwrap();
    let (code, _, out) = skillbox(ws, &["skill", "list", "--workspace", ws_arg]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("[skills] roots holds an empty path"), "{out}");
}
