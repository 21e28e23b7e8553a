//! Name and description rules, whichever manifest supplies them.

use skillbox_protocol::skill::Severity;
use tempfile::tempdir;

use super::common::*;

#[test]
fn name_spec_charset_loads_clean() {
    let root = tempdir().unwrap();
    for name in ["pdf", "web-artifacts-builder", "a1-b2", &"a".repeat(64)] {
        let dir = write_skill(
            root.path(),
            name,
            &[("SKILL.md", &skill_md(name, "Does X.", ""))],
        );
        assert_eq!(clean(&dir).name, name);
    }
}

#[test]
fn name_with_uppercase_or_underscore_warns() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "My_Skill",
        &[("SKILL.md", &skill_md("My_Skill", "Does X.", ""))],
    );
    let skill = loaded(&dir);
    assert_eq!(skill.name, "My_Skill");
    assert_diag(
        &skill.warnings,
        Severity::Warning,
        "SKILL.md",
        "name",
        "a-z, 0-9 and single hyphens",
    );
    assert_eq!(skill.warnings.len(), 1, "{:#?}", skill.warnings);
}

#[test]
fn name_with_double_or_edge_hyphens_warns() {
    let root = tempdir().unwrap();
    for name in ["a--b", "-ab", "ab-"] {
        let dir = write_skill(
            root.path(),
            name,
            &[("SKILL.md", &skill_md(name, "Does X.", ""))],
        );
        let skill = loaded(&dir);
        assert_diag(
            &skill.warnings,
            Severity::Warning,
            "SKILL.md",
            "name",
            "not at either end",
        );
    }
}

#[test]
fn name_over_64_chars_warns() {
    let root = tempdir().unwrap();
    let name = "a".repeat(65);
    let dir = write_skill(
        root.path(),
        &name,
        &[("SKILL.md", &skill_md(&name, "Does X.", ""))],
    );
    assert_diag(
        &loaded(&dir).warnings,
        Severity::Warning,
        "SKILL.md",
        "name",
        "1-64 characters",
    );
}

#[test]
fn name_differing_from_folder_warns() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "folder",
        &[("SKILL.md", &skill_md("other", "Does X.", ""))],
    );
    let skill = loaded(&dir);
    assert_eq!(skill.name, "other");
    assert_diag(
        &skill.warnings,
        Severity::Warning,
        "SKILL.md",
        "name",
        "differs from its folder \"folder\"",
    );
}

#[test]
fn name_missing_warns_and_uses_folder() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "folder-name",
        &[("SKILL.md", "---\ndescription: Does X.\n---\nbody\n")],
    );
    let skill = loaded(&dir);
    assert_eq!(skill.name, "folder-name");
    assert_diag(
        &skill.warnings,
        Severity::Warning,
        "SKILL.md",
        "name",
        "missing",
    );
}

#[test]
fn name_that_is_a_path_is_refused() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "ab",
        &[("SKILL.md", &skill_md("a/b", "Does X.", ""))],
    );
    assert_skipped_for(&dir, "SKILL.md", "name", "cannot be a skill name");
    for bad in ["\"..\"", "\"a:b\"", "\"a b\""] {
        let dir = write_skill(
            root.path(),
            "ab",
            &[("SKILL.md", &skill_md(bad, "Does X.", ""))],
        );
        assert_skipped_for(&dir, "SKILL.md", "name", "cannot be a skill name");
    }
}

#[test]
fn description_present_loads() {
    let root = tempdir().unwrap();
    let text = "d".repeat(1024);
    let dir = write_skill(
        root.path(),
        "desc",
        &[("SKILL.md", &skill_md("desc", &text, ""))],
    );
    assert_eq!(clean(&dir).description, text);
}

#[test]
fn description_missing_skips_skill() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "nodesc",
        &[("SKILL.md", "---\nname: nodesc\n---\nbody\n")],
    );
    assert_skipped_for(&dir, "SKILL.md", "description", "missing or empty");
    let dir = write_skill(
        root.path(),
        "blank",
        &[("SKILL.md", "---\nname: blank\ndescription: \"  \"\n---\n")],
    );
    assert_skipped_for(&dir, "SKILL.md", "description", "missing or empty");
}

#[test]
fn description_over_1024_chars_warns() {
    let root = tempdir().unwrap();
    // Counted in characters, not bytes: 1025 two-byte characters.
    let text = "é".repeat(1025);
    let dir = write_skill(
        root.path(),
        "long",
        &[("SKILL.md", &skill_md("long", &text, ""))],
    );
    let skill = loaded(&dir);
    assert_diag(
        &skill.warnings,
        Severity::Warning,
        "SKILL.md",
        "description",
        "1025 characters",
    );
    let text = "é".repeat(1024);
    let dir = write_skill(
        root.path(),
        "long",
        &[("SKILL.md", &skill_md("long", &text, ""))],
    );
    clean(&dir);
}

#[test]
fn description_missing_is_reported_against_skill_yaml_when_it_is_the_only_manifest() {
    let root = tempdir().unwrap();
    let dir = write_skill(root.path(), "y", &[("skill.yaml", "name: y\n")]);
    assert_skipped_for(&dir, "skill.yaml", "description", "missing or empty");
}
