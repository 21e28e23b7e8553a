//! `validate_skill(dir, strict)`: lenient passes warnings, strict does not.

use skillbox_protocol::skill::{validate_skill, Severity};
use tempfile::tempdir;

use super::common::*;

#[test]
fn validate_clean_skill_passes_both_modes() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "ok",
        &[("SKILL.md", &skill_md("ok", "Does X.", ""))],
    );
    for strict in [false, true] {
        let v = validate_skill(&dir, strict);
        assert!(v.passed, "strict={strict}: {:#?}", v.diagnostics);
        assert_eq!(v.name.as_deref(), Some("ok"));
        assert!(v.diagnostics.is_empty());
        assert_eq!(v.dir, dir);
    }
}

#[test]
fn validate_warning_passes_lenient_and_fails_strict() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "warn",
        &[("SKILL.md", &skill_md("warn", "Does X.", "homepage: x\n"))],
    );
    let lenient = validate_skill(&dir, false);
    assert!(lenient.passed);
    assert_eq!(lenient.name.as_deref(), Some("warn"));
    assert_diag(
        &lenient.diagnostics,
        Severity::Warning,
        "SKILL.md",
        "homepage",
        "unknown",
    );
    let strict = validate_skill(&dir, true);
    assert!(!strict.passed);
    assert_eq!(strict.diagnostics, lenient.diagnostics);
}

#[test]
fn validate_error_fails_both_modes() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "err",
        &[("skill.yaml", &skill_yaml("err", "version: one\n"))],
    );
    for strict in [false, true] {
        let v = validate_skill(&dir, strict);
        assert!(!v.passed);
        assert_eq!(v.name, None);
        assert_diag(
            &v.diagnostics,
            Severity::Error,
            "skill.yaml",
            "version",
            "semantic version",
        );
    }
}

#[test]
fn validate_folder_without_manifest_fails_with_advice() {
    let root = tempdir().unwrap();
    let dir = write_skill(root.path(), "empty", &[("README.md", "hi")]);
    let v = validate_skill(&dir, false);
    assert!(!v.passed);
    assert_eq!(v.diagnostics.len(), 1);
    assert_eq!(v.diagnostics[0].severity, Severity::Error);
    assert_eq!(v.diagnostics[0].file, dir);
    assert!(v.diagnostics[0].message.contains("not a skill"));
}

#[test]
fn validate_diagnostics_list_errors_before_warnings() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "mixed",
        &[("SKILL.md", "---\nname: Mixed_Name\nhomepage: x\n---\n")],
    );
    let v = validate_skill(&dir, false);
    assert!(!v.passed);
    let first_warning = v
        .diagnostics
        .iter()
        .position(|d| d.severity == Severity::Warning)
        .unwrap();
    assert!(v.diagnostics[..first_warning]
        .iter()
        .all(|d| d.severity == Severity::Error));
    assert!(v.diagnostics[first_warning..]
        .iter()
        .all(|d| d.severity == Severity::Warning));
    assert_eq!(v.diagnostics[0].field, "description");
}
