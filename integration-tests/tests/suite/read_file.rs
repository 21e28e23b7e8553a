//! The readFile proxy, driven by the `files` skill, which declares `notes/**`, and by
//! skills written per test that declare `**` or only their own folder.

use std::os::unix::fs::symlink;

use serde_json::{json, Value};

use crate::harness::skills::{write_reader_skill, OUTSIDE, TODO};
use crate::harness::{Options, Skillbox};

fn read(sb: &Skillbox, path: &str) -> Value {
    read_as(sb, "files", path)
}

fn read_as(sb: &Skillbox, skill: &str, path: &str) -> Value {
    sb.call_ok(&format!("{skill}:read"), json!({"path": path}))
}

fn assert_refused(r: &Value, needles: &[&str]) {
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["code"], -32001, "{r}");
    let message = r["message"].as_str().unwrap();
    assert!(message.starts_with("readFile refused"), "{message}");
    for n in needles {
        assert!(message.contains(n), "{n:?} not in {message:?}");
    }
    assert!(!message.contains(OUTSIDE.trim()), "{message}");
}

#[test]
fn read_file_reads_a_file_its_glob_declares() {
    let sb = Skillbox::start(Options::default());
    let r = read(&sb, "notes/todo.md");
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["result"]["content"], TODO, "{r}");
    let r = read(&sb, "./notes//todo.md");
    assert_eq!(r["result"]["content"], TODO, "{r}");
}

#[test]
fn read_file_refuses_dotdot_absolute_paths_symlink_escapes_and_undeclared_globs() {
    let sb = Skillbox::start(Options::default());
    assert_refused(&read(&sb, "../outside/secret.txt"), &["contains \"..\""]);
    assert_refused(&read(&sb, "notes/../../outside/secret.txt"), &["\"..\""]);
    assert_refused(
        &read(
            &sb,
            &sb.root
                .path()
                .join("outside/secret.txt")
                .display()
                .to_string(),
        ),
        &["absolute path"],
    );
    assert_refused(&read(&sb, "/etc/passwd"), &["absolute path"]);
    // notes/escape.md is covered by notes/** but links outside the workspace.
    assert_refused(
        &read(&sb, "notes/escape.md"),
        &["leads outside the workspace"],
    );
    // private.txt exists in the workspace but no glob of the skill covers it.
    assert_refused(
        &read(&sb, "private.txt"),
        &["not covered by the skill's permissions.workspace.read"],
    );
    // The state folder (token, keys, secrets) is in the workspace: never readable.
    assert_refused(
        &read(&sb, ".skillbox/api-token"),
        &["the core's state folder", "never readable by skills"],
    );
}

/// The value of the secret in `<state>/secrets.env`; no answer may carry it.
const API_KEY: &str = "sk-e2e-never-read-me";

/// A refusal to read one of the core's own files: -32001, the rule, and none of the
/// token, the secret or a key in the message.
fn assert_refused_state(sb: &Skillbox, r: &Value, needles: &[&str]) {
    assert_refused(r, &[&["never readable by skills"], needles].concat());
    let message = r["message"].as_str().unwrap();
    assert!(!message.contains(&sb.token), "the token leaked: {message}");
    assert!(!message.contains(API_KEY), "the secret leaked: {message}");
    assert!(!message.contains("PRIVATE KEY"), "a key leaked: {message}");
}

#[test]
fn read_file_never_reads_the_core_state_folder_or_config_whatever_the_glob_or_link() {
    let sb = Skillbox::start(Options {
        secrets: vec![("API_KEY".into(), API_KEY.into())],
        ..Options::default()
    });
    let skills = sb.ws.join("skills");
    // A skill that asks to read everything, and one that asks only for its own folder
    // and ships a relative symlink into the state folder.
    write_reader_skill(&skills, "greedy", &["**"]);
    write_reader_skill(&skills, "narrow", &["skills/narrow/**"]);
    std::fs::create_dir_all(skills.join("narrow/data")).unwrap();
    symlink(
        "../../../.skillbox/api-token",
        skills.join("narrow/data/tok"),
    )
    .unwrap();
    symlink("../../../skillbox.toml", skills.join("narrow/data/cfg")).unwrap();
    symlink(sb.state().join("api-token"), skills.join("narrow/data/abs")).unwrap();
    // Hard links under names notes/** covers: same inode as the token and the config.
    std::fs::hard_link(sb.state().join("api-token"), sb.ws.join("notes/token.md")).unwrap();
    std::fs::hard_link(sb.ws.join("skillbox.toml"), sb.ws.join("notes/config.md")).unwrap();
    symlink("../.skillbox/secrets.env", sb.ws.join("notes/env.md")).unwrap();
    let r = sb.request("POST", "/v1/skills/reload", None);
    assert_eq!(r.status, 200, "{}", r.body);

    // `**` reads ordinary workspace files (so the refusals below are the guard's) ...
    let r = read_as(&sb, "greedy", "notes/todo.md");
    assert_eq!(r["result"]["content"], TODO, "{r}");
    // ... and none of the core's files, however they are spelled.
    for path in [
        ".skillbox/api-token",
        ".skillbox/secrets.env",
        ".skillbox/pki/skillbox-core.key",
        ".skillbox/pki/skillbox-executor.key",
        ".skillbox/pki/ca.pem",
        "./.skillbox/api-token",
        ".SKILLBOX/api-token",
    ] {
        let r = read_as(&sb, "greedy", path);
        assert_refused_state(&sb, &r, &["the core's state folder"]);
    }
    for path in ["skillbox.toml", "./SKILLBOX.toml"] {
        let r = read_as(&sb, "greedy", path);
        assert_refused_state(&sb, &r, &["the core's configuration"]);
    }
    // A symlink in the skill's own folder is judged by where it leads.
    let r = read_as(&sb, "narrow", "skills/narrow/data/tok");
    assert_refused_state(
        &sb,
        &r,
        &[
            "resolves to \".skillbox/api-token\"",
            "the core's state folder",
        ],
    );
    let r = read_as(&sb, "narrow", "skills/narrow/data/cfg");
    assert_refused_state(&sb, &r, &["resolves to \"skillbox.toml\""]);
    let r = read_as(&sb, "narrow", "skills/narrow/data/abs");
    assert_refused(&r, &["leads outside the workspace"]);
    let r = read_as(&sb, "greedy", "notes/env.md");
    assert_refused_state(&sb, &r, &["resolves to \".skillbox/secrets.env\""]);
    // A hard link is the same file under another name.
    let r = read(&sb, "notes/token.md");
    assert_refused_state(&sb, &r, &["same file as \".skillbox/api-token\""]);
    let r = read(&sb, "notes/config.md");
    assert_refused_state(&sb, &r, &["same file as \"skillbox.toml\""]);
}
