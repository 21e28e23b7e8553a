//! What a skill's scripts use that the sandbox lacks, named before a call fails
//! (docs/cli.md, `doctor` and `skill info`): a published-shaped skill whose script imports
//! a module no package provides and starts a program the sandbox does not have. Judged by
//! the executor, shown as `script_warnings` in `GET /v1/skills/{name}`, as warnings by
//! `doctor` (never a problem: the skill stays available) and by `skill info`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::skills::{open_up, write};
use crate::harness::{Options, Skillbox};

/// A skill shaped like the published ones: a SKILL.md naming a program in a shell block,
/// and a script importing a module and running a program the sandbox lacks (and others it
/// has: json, python3).
fn reporter_skill(ws: &Path) {
    let dir = ws.join("skills/reporter");
    write(
        &dir.join("SKILL.md"),
        "---\nname: reporter\ndescription: Builds a report\n---\n\
         ```bash\nskillbox-missing-cli --report out.txt\n```\n",
    );
    write(
        &dir.join("scripts/report.py"),
        "#!/usr/bin/env python3\nimport json\nimport skillbox_missing_module\n\
         import subprocess\nsubprocess.run([\"skillbox-missing-tool\", \"x\"])\n",
    );
    open_up(&dir);
}

/// The skill's entry once the executor's facts name its scripts (they come with health).
fn entry_with_warnings(sb: &Skillbox) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = sb.request("GET", "/v1/skills/reporter", None).json();
        if v["script_warnings"].is_array() || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_skills_missing_programs_and_unprovided_imports_are_named_and_it_stays_available() {
    let sb = Skillbox::start(Options {
        prepare: Some(reporter_skill),
        ..Options::default()
    });
    let v = entry_with_warnings(&sb);
    assert_eq!(v["available"], true, "a diagnostic only: {v}");
    let warnings = v["script_warnings"].to_string();
    for named in [
        "skillbox-missing-cli",
        "skillbox-missing-tool",
        "skillbox_missing_module",
    ] {
        assert!(warnings.contains(named), "{named} not named: {v}");
    }
    for present in ["python3", "\"json", " json"] {
        assert!(
            !warnings.contains(present),
            "{present} is in the sandbox: {v}"
        );
    }

    let out = sb.cli(&["doctor"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "warnings are not problems: {said}"
    );
    let lines: Vec<&str> = said.lines().collect();
    let program = lines
        .iter()
        .position(|l| l.starts_with("warn skill reporter:") && l.contains("skillbox-missing-tool"))
        .unwrap_or_else(|| panic!("no warning for the missing programs: {said}"));
    assert!(
        lines[program + 1].contains("fix: install the program"),
        "{said}"
    );
    let import = lines
        .iter()
        .position(|l| {
            l.starts_with("warn skill reporter:") && l.contains("skillbox_missing_module")
        })
        .unwrap_or_else(|| panic!("no warning for the import: {said}"));
    assert!(
        lines[import + 1].contains("[grants.reporter] requirements"),
        "{said}"
    );

    let out = sb.cli(&["skill", "info", "reporter"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(said.contains("scripts run: "), "{said}");
    assert!(
        said.contains("imports:     json, skillbox_missing_module, subprocess"),
        "{said}"
    );
    assert!(
        said.contains("warning:     its scripts import skillbox_missing_module"),
        "{said}"
    );
}
