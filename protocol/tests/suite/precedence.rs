//! Precedence per field: `skill.yaml` over `package.json` over `SKILL.md` (docs/skill-format.md).

use skillbox_protocol::skill::{CostHint, ManifestFormat, Severity, ToolEntry};
use tempfile::tempdir;

use super::common::*;

const MD: &str = "---\nname: multi\ndescription: from md\nlicense: Apache-2.0\ncompatibility: from md\ntriggers: [md]\nanti_triggers: [md-anti]\ncost_hint: high\nalways: true\n---\n# Body from md\n";
const PKG: &str = r#"{ "name": "multi", "version": "2.0.0", "description": "from pkg", "license": "MIT",
  "owliabot": { "triggers": ["pkg"], "cost_hint": "medium", "tools": [{ "name": "js" }] } }"#;
const YAML: &str =
    "name: multi\ndescription: from yaml\ntriggers: [yaml]\nexecution: { timeout_ms: 5000 }\n";

#[test]
fn precedence_takes_each_field_from_the_highest_manifest_that_has_it() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "multi",
        &[
            ("SKILL.md", MD),
            ("package.json", PKG),
            ("skill.yaml", YAML),
            ("index.js", ""),
        ],
    );
    let skill = clean(&dir);
    assert_eq!(
        skill.formats,
        [
            ManifestFormat::SkillMd,
            ManifestFormat::PackageJson,
            ManifestFormat::SkillYaml
        ]
    );
    // skill.yaml wins where it speaks.
    assert_eq!(skill.description, "from yaml");
    assert_eq!(skill.routing.triggers, ["yaml"]);
    assert_eq!(skill.execution.timeout_ms, 5000);
    // package.json next.
    assert_eq!(skill.version.as_deref(), Some("2.0.0"));
    assert_eq!(skill.license.as_deref(), Some("MIT"));
    assert_eq!(skill.routing.cost_hint, Some(CostHint::Medium));
    assert_eq!(skill.tools.len(), 1);
    assert!(matches!(skill.tools[0].entry, ToolEntry::JsExport { .. }));
    // SKILL.md fills the rest, and its body stays available.
    assert_eq!(skill.compatibility.as_deref(), Some("from md"));
    assert_eq!(skill.routing.anti_triggers, ["md-anti"]);
    assert!(skill.routing.always);
    assert_eq!(skill.read_body().unwrap(), "# Body from md\n");
}

#[test]
fn precedence_tools_from_skill_yaml_replace_package_json_tools() {
    let root = tempdir().unwrap();
    let yaml = "name: multi\ndescription: y\ntools:\n  - { name: py, command: [\"true\"] }\n";
    let dir = write_skill(
        root.path(),
        "multi",
        &[
            ("package.json", PKG),
            ("skill.yaml", yaml),
            ("index.js", ""),
        ],
    );
    let skill = clean(&dir);
    assert_eq!(skill.tools.len(), 1);
    assert_eq!(skill.tools[0].name, "py");
}

#[test]
fn precedence_conflicting_names_warn_and_highest_wins() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "multi",
        &[
            ("SKILL.md", &skill_md("old-name", "from md", "")),
            ("skill.yaml", &skill_yaml("multi", "")),
        ],
    );
    let skill = loaded(&dir);
    assert_eq!(skill.name, "multi");
    assert_diag(
        &skill.warnings,
        Severity::Warning,
        "SKILL.md",
        "name",
        "differs from \"multi\" in skill.yaml",
    );
}

#[test]
fn precedence_description_missing_everywhere_is_reported_against_the_highest_manifest() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "multi",
        &[
            ("SKILL.md", "---\nname: multi\n---\n"),
            ("skill.yaml", "name: multi\n"),
        ],
    );
    assert_skipped_for(&dir, "skill.yaml", "description", "missing");
}

#[test]
fn precedence_description_from_lower_manifest_fills_in() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "multi",
        &[
            ("SKILL.md", &skill_md("multi", "from md", "")),
            ("skill.yaml", "name: multi\n"),
        ],
    );
    assert_eq!(clean(&dir).description, "from md");
}

#[test]
fn precedence_error_in_a_lower_manifest_still_skips() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "multi",
        &[
            ("SKILL.md", "---\nname: [broken\n---\n"),
            ("skill.yaml", "name: multi\n"),
        ],
    );
    assert_skipped_for(&dir, "SKILL.md", "frontmatter", "YAML does not parse");
    // The description may be in the broken file: it is not reported missing.
    let s = skipped(&dir);
    assert_no_diag(&s.diagnostics, "description");
    assert_eq!(s.diagnostics.len(), 1, "{:#?}", s.diagnostics);
}
