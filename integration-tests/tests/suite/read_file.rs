//! The readFile proxy, driven by the `files` skill, which declares `notes/**`.

use serde_json::{json, Value};

use crate::harness::skills::{OUTSIDE, TODO};
use crate::harness::{Options, Skillbox};

fn read(sb: &Skillbox, path: &str) -> Value {
    sb.call_ok("files:read", json!({"path": path}))
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
    // The state folder (token, keys, secrets) is in the workspace but not declared.
    assert_refused(
        &read(&sb, ".skillbox/api-token"),
        &["not covered by the skill's permissions.workspace.read"],
    );
}
