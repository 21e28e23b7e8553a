//! Helpers: write skill folders, load them, and find diagnostics by field.

use std::path::{Path, PathBuf};

use skillbox_protocol::skill::{load_skill, Diagnostic, LoadOutcome, Severity, Skill, Skipped};

/// Writes `files` (path relative to the folder, content) into `root/folder`.
pub fn write_skill(root: &Path, folder: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = root.join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    for (rel, text) in files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
    dir
}

/// A `SKILL.md` with `name`, `description`, extra frontmatter lines and a short body.
pub fn skill_md(name: &str, description: &str, extra: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n{extra}---\n# {name}\n\nBody.\n")
}

/// A `skill.yaml` with `name`, `description` and extra lines.
pub fn skill_yaml(name: &str, extra: &str) -> String {
    format!("name: {name}\ndescription: Test skill {name}\n{extra}")
}

/// Loads `dir` and expects a usable skill.
pub fn loaded(dir: &Path) -> Skill {
    match load_skill(dir) {
        LoadOutcome::Loaded(skill) => *skill,
        other => panic!("{} should load, got {other:#?}", dir.display()),
    }
}

/// Loads `dir` and expects it to be skipped.
pub fn skipped(dir: &Path) -> Skipped {
    match load_skill(dir) {
        LoadOutcome::Skipped(s) => s,
        other => panic!("{} should be skipped, got {other:#?}", dir.display()),
    }
}

/// Loads `dir` and expects a usable skill with no warnings.
pub fn clean(dir: &Path) -> Skill {
    let skill = loaded(dir);
    assert!(
        skill.warnings.is_empty(),
        "{} should load without warnings, got {:#?}",
        dir.display(),
        skill.warnings
    );
    skill
}

/// Asserts that `diags` holds a finding about `field` of `file` (a file name inside the
/// skill folder) with this severity whose message contains `needle`.
#[track_caller]
pub fn assert_diag(
    diags: &[Diagnostic],
    severity: Severity,
    file: &str,
    field: &str,
    needle: &str,
) {
    let found = diags.iter().any(|d| {
        d.severity == severity
            && d.field == field
            && d.file.file_name().and_then(|f| f.to_str()) == Some(file)
            && d.message.contains(needle)
    });
    assert!(
        found,
        "expected {severity:?} in {file} at {field:?} containing {needle:?}; got:\n{}",
        render(diags)
    );
}

/// Asserts that nothing in `diags` is about `field`.
#[track_caller]
pub fn assert_no_diag(diags: &[Diagnostic], field: &str) {
    assert!(
        diags.iter().all(|d| d.field != field),
        "expected no finding at {field:?}; got:\n{}",
        render(diags)
    );
}

/// Loads a skill whose only problem is an error at `field` and checks that error.
#[track_caller]
pub fn assert_skipped_for(dir: &Path, file: &str, field: &str, needle: &str) {
    let s = skipped(dir);
    assert_diag(&s.diagnostics, Severity::Error, file, field, needle);
    assert!(s.reason().contains(field) || s.reason().contains(needle));
}

fn render(diags: &[Diagnostic]) -> String {
    diags.iter().map(|d| format!("  {d}\n")).collect::<String>()
}
