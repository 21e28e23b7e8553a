//! `skillbox skill add` through the real binary, run from a folder other than the
//! workspace: a relative SOURCE is read from where the command runs.

use std::path::Path;
use std::process::Command;

use crate::git_repo::{skill_files, Repo};

/// `skillbox skill add ARGS --workspace WS`, run in `here`.
fn add_from(here: &Path, ws: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_skillbox"))
        .args(["skill", "add"])
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .current_dir(here)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn add_reads_a_relative_source_from_the_current_folder_not_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let host = dir.path().join("host");
    let repo = Repo::new(&host, "acme", "tools");
    skill_files(&repo, "skills/alpha", "alpha", "");
    skill_files(&repo, "skills/beta", "beta", "");
    repo.commit("two skills");

    // `./work-acme-tools` (the publisher's work tree) exists beside the command, not in
    // the workspace.
    let (code, out) = add_from(&host, &ws, &["./work-acme-tools", "--skill", "alpha"]);
    assert_eq!(code, 0, "{out}");
    assert!(ws.join("skills/alpha/SKILL.md").is_file(), "{out}");

    // `../acme/tools.git` (the bare repository) from inside the work tree.
    let (code, out) = add_from(&repo.work, &ws, &["../acme/tools.git", "--skill", "beta"]);
    assert_eq!(code, 0, "{out}");
    assert!(ws.join("skills/beta/SKILL.md").is_file(), "{out}");

    // A path that is not there is refused naming where it was looked for.
    let (code, out) = add_from(&host, &ws, &["./no-such-repo"]);
    assert_ne!(code, 0, "{out}");
    let looked = host.canonicalize().unwrap().join("no-such-repo");
    assert!(out.contains(&looked.display().to_string()), "{out}");
    assert!(out.contains("check source"), "{out}");
}
