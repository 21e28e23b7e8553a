//! A minimal skill folder for tests that need one on disk (core's install tests, the CLI
//! crate's tests include this file with `#[path]`).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Writes a skill with `skill.yaml` (name, version), `SKILL.md` and a script.
pub fn write_skill(dir: &Path, name: &str, version: &str, extra: &str) {
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: A test skill {extra}\n---\nUse it.\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("skill.yaml"),
        format!("name: {name}\nversion: {version}\ndescription: A test skill {extra}\n"),
    )
    .unwrap();
    let script = dir.join("scripts/run.sh");
    std::fs::write(&script, format!("#!/bin/sh\necho {extra}\n")).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
}
