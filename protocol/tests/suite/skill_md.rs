//! The `SKILL.md` loader: frontmatter keys, routing fields, OpenClaw metadata, broken files.

use skillbox_protocol::skill::{CostHint, ManifestFormat, Prerequisites, Severity};
use tempfile::tempdir;

use super::common::*;

#[test]
fn skill_md_spec_fields_load() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "pdf",
        &[(
            "SKILL.md",
            "---\nname: pdf\ndescription: >\n  Fill and merge PDF files.\n  Use for forms.\nlicense: Apache-2.0\ncompatibility: Needs python3\nallowed-tools: Bash Read\nmetadata:\n  author: someone\n  version: \"1.0\"\n---\n# PDF\n",
        )],
    );
    let skill = clean(&dir);
    assert_eq!(skill.name, "pdf");
    assert_eq!(
        skill.description,
        "Fill and merge PDF files. Use for forms.\n"
    );
    assert_eq!(skill.license.as_deref(), Some("Apache-2.0"));
    assert_eq!(skill.compatibility.as_deref(), Some("Needs python3"));
    assert_eq!(skill.allowed_tools, ["Bash", "Read"]);
    assert_eq!(skill.formats, [ManifestFormat::SkillMd]);
    assert!(skill.tools.is_empty());
    assert_eq!(skill.version, None);
}

#[test]
fn skill_md_unknown_top_level_key_warns() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "x",
        &[(
            "SKILL.md",
            &skill_md("x", "Does X.", "homepage: https://example.org\n"),
        )],
    );
    let skill = loaded(&dir);
    assert_diag(
        &skill.warnings,
        Severity::Warning,
        "SKILL.md",
        "homepage",
        "unknown frontmatter key",
    );
    assert_eq!(skill.warnings.len(), 1);
}

#[test]
fn skill_md_routing_fields_at_top_level_load_clean() {
    let root = tempdir().unwrap();
    let extra = "triggers: [price, 价格]\nanti_triggers: weather\ncost_hint: medium\nparallel_safe: true\nalways: true\nprerequisites:\n  bins: [python3]\n  env: [API_KEY]\n";
    let dir = write_skill(
        root.path(),
        "route",
        &[("SKILL.md", &skill_md("route", "Does X.", extra))],
    );
    let skill = clean(&dir);
    assert_eq!(skill.routing.triggers, ["price", "价格"]);
    assert_eq!(skill.routing.anti_triggers, ["weather"]);
    assert_eq!(skill.routing.cost_hint, Some(CostHint::Medium));
    assert!(skill.routing.parallel_safe && skill.routing.always);
    assert_eq!(skill.prerequisites.bins, ["python3"]);
    assert_eq!(skill.prerequisites.env, ["API_KEY"]);
}

#[test]
fn skill_md_routing_fields_under_metadata_skillbox_load_clean() {
    let root = tempdir().unwrap();
    let extra = "metadata:\n  skillbox:\n    triggers: [price]\n    cost_hint: high\n    parallel_safe: false\n    prerequisites: { any_bins: [curl, wget], os: [linux] }\n";
    let dir = write_skill(
        root.path(),
        "route",
        &[("SKILL.md", &skill_md("route", "Does X.", extra))],
    );
    let skill = clean(&dir);
    assert_eq!(skill.routing.triggers, ["price"]);
    assert_eq!(skill.routing.cost_hint, Some(CostHint::High));
    assert!(!skill.routing.parallel_safe);
    assert_eq!(skill.prerequisites.any_bins, ["curl", "wget"]);
    assert_eq!(skill.prerequisites.os, ["linux"]);
}

#[test]
fn skill_md_top_level_routing_wins_over_metadata_skillbox() {
    let root = tempdir().unwrap();
    let extra = "triggers: [top]\nmetadata:\n  skillbox:\n    triggers: [nested]\n    anti_triggers: [nested-anti]\n";
    let dir = write_skill(
        root.path(),
        "route",
        &[("SKILL.md", &skill_md("route", "Does X.", extra))],
    );
    let skill = clean(&dir);
    assert_eq!(skill.routing.triggers, ["top"]);
    assert_eq!(skill.routing.anti_triggers, ["nested-anti"]);
}

#[test]
fn skill_md_routing_field_of_wrong_type_is_refused() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "r",
        &[("SKILL.md", &skill_md("r", "Does X.", "cost_hint: free\n"))],
    );
    assert_skipped_for(&dir, "SKILL.md", "cost_hint", "low, medium, high");
    let extra = "metadata:\n  skillbox:\n    parallel_safe: maybe\n";
    let dir = write_skill(
        root.path(),
        "r",
        &[("SKILL.md", &skill_md("r", "Does X.", extra))],
    );
    assert_skipped_for(
        &dir,
        "SKILL.md",
        "metadata.skillbox.parallel_safe",
        "true or false",
    );
}

#[test]
fn skill_md_unknown_key_under_metadata_skillbox_is_refused() {
    let root = tempdir().unwrap();
    let extra = "metadata:\n  skillbox:\n    triggers: [a]\n    trigers: [b]\n";
    let dir = write_skill(
        root.path(),
        "r",
        &[("SKILL.md", &skill_md("r", "Does X.", extra))],
    );
    assert_skipped_for(&dir, "SKILL.md", "metadata.skillbox.trigers", "unknown key");
}

#[test]
fn skill_md_other_metadata_keys_are_free() {
    let root = tempdir().unwrap();
    let extra = "metadata:\n  author: me\n  anything: { nested: [1, 2] }\n";
    let dir = write_skill(
        root.path(),
        "r",
        &[("SKILL.md", &skill_md("r", "Does X.", extra))],
    );
    clean(&dir);
}

/// Written the way the OpenClaw corpus writes it: inline JSON with trailing commas.
const OPENCLAW_METADATA: &str = r#"metadata:
  {
    "openclaw":
      {
        "emoji": "🔐",
        "os": ["darwin", "linux"],
        "requires": { "bins": ["op", "jq"], "anyBins": ["curl", "wget"], "env": ["OP_TOKEN"], "config": ["x"], },
        "install":
          [
            {
              "id": "brew",
              "kind": "brew",
              "bins": ["op"],
            },
          ],
      },
  }
"#;

#[test]
fn skill_md_openclaw_requires_and_os_map_to_prerequisites() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "oc",
        &[("SKILL.md", &skill_md("oc", "Does X.", OPENCLAW_METADATA))],
    );
    let skill = clean(&dir);
    assert_eq!(
        skill.prerequisites,
        Prerequisites {
            bins: vec!["op".into(), "jq".into()],
            any_bins: vec!["curl".into(), "wget".into()],
            env: vec!["OP_TOKEN".into()],
            os: vec!["darwin".into(), "linux".into()],
        }
    );
}

#[test]
fn skill_md_skillbox_prerequisites_win_per_list_over_openclaw() {
    let root = tempdir().unwrap();
    let extra = "prerequisites: { bins: [mine] }\nmetadata: { \"openclaw\": { \"requires\": { \"bins\": [\"theirs\"], \"env\": [\"TOKEN\"] } } }\n";
    let dir = write_skill(
        root.path(),
        "oc",
        &[("SKILL.md", &skill_md("oc", "Does X.", extra))],
    );
    let skill = clean(&dir);
    assert_eq!(skill.prerequisites.bins, ["mine"]);
    assert_eq!(skill.prerequisites.env, ["TOKEN"]);
}

#[test]
fn skill_md_openclaw_requires_of_wrong_type_is_refused() {
    let root = tempdir().unwrap();
    let extra = "metadata: { \"openclaw\": { \"requires\": { \"bins\": { \"op\": 1 } } } }\n";
    let dir = write_skill(
        root.path(),
        "oc",
        &[("SKILL.md", &skill_md("oc", "Does X.", extra))],
    );
    assert_skipped_for(
        &dir,
        "SKILL.md",
        "metadata.openclaw.requires.bins",
        "list of strings",
    );
    let extra = "metadata: { \"openclaw\": { \"os\": [\"darwin\", 7] } }\n";
    let dir = write_skill(
        root.path(),
        "oc",
        &[("SKILL.md", &skill_md("oc", "Does X.", extra))],
    );
    assert_skipped_for(
        &dir,
        "SKILL.md",
        "metadata.openclaw.os[1]",
        "must be a string",
    );
}

#[test]
fn skill_md_prerequisite_bin_with_a_path_is_refused() {
    let root = tempdir().unwrap();
    let extra = "prerequisites: { bins: [/usr/bin/python3] }\n";
    let dir = write_skill(
        root.path(),
        "p",
        &[("SKILL.md", &skill_md("p", "Does X.", extra))],
    );
    assert_skipped_for(&dir, "SKILL.md", "prerequisites.bins[0]", "program name");
}

#[test]
fn skill_md_broken_yaml_is_skipped_with_reason() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "broken",
        &[(
            "SKILL.md",
            "---\nname: broken\ndescription: [unclosed\n---\nbody\n",
        )],
    );
    assert_skipped_for(&dir, "SKILL.md", "frontmatter", "YAML does not parse");
    let dir = write_skill(
        root.path(),
        "scalar",
        &[("SKILL.md", "---\njust text\n---\nbody\n")],
    );
    assert_skipped_for(&dir, "SKILL.md", "frontmatter", "must be a YAML mapping");
}

#[test]
fn skill_md_missing_frontmatter_is_skipped_with_reason() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "nofm",
        &[("SKILL.md", "# Just Markdown\n\nname: nofm\n")],
    );
    assert_skipped_for(&dir, "SKILL.md", "-", "must start with a line \"---\"");
    let dir = write_skill(
        root.path(),
        "open",
        &[("SKILL.md", "---\nname: open\ndescription: x\n")],
    );
    assert_skipped_for(&dir, "SKILL.md", "-", "no closing");
}

#[test]
fn skill_md_crlf_and_bom_load() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "crlf",
        &[(
            "SKILL.md",
            "\u{feff}---\r\nname: crlf\r\ndescription: Does X.\r\n---\r\n# Body\r\n",
        )],
    );
    let skill = clean(&dir);
    assert_eq!(skill.read_body().unwrap(), "# Body\r\n");
}

#[test]
fn skill_md_compatibility_up_to_500_chars_loads() {
    let root = tempdir().unwrap();
    let extra = format!("compatibility: {}\n", "c".repeat(500));
    let dir = write_skill(
        root.path(),
        "c",
        &[("SKILL.md", &skill_md("c", "Does X.", &extra))],
    );
    clean(&dir);
}

#[test]
fn skill_md_compatibility_over_500_chars_warns() {
    let root = tempdir().unwrap();
    let extra = format!("compatibility: {}\n", "c".repeat(501));
    let dir = write_skill(
        root.path(),
        "c",
        &[("SKILL.md", &skill_md("c", "Does X.", &extra))],
    );
    let skill = loaded(&dir);
    assert_diag(
        &skill.warnings,
        Severity::Warning,
        "SKILL.md",
        "compatibility",
        "501 characters",
    );
}

#[test]
fn skill_md_body_stays_on_disk_until_read() {
    let root = tempdir().unwrap();
    let text = "---\nname: b\ndescription: Does X.\n---\n# Title\n\nBODY-MARKER line\n";
    let dir = write_skill(root.path(), "b", &[("SKILL.md", text)]);
    let skill = clean(&dir);
    let body = skill.body.as_ref().unwrap();
    assert_eq!(body.path, dir.join("SKILL.md"));
    assert_eq!(
        usize::try_from(body.offset).unwrap(),
        text.find("# Title").unwrap()
    );
    assert_eq!(skill.read_body().unwrap(), "# Title\n\nBODY-MARKER line\n");
}

#[test]
fn skill_md_body_past_the_frontmatter_read_limit_is_read_whole() {
    let root = tempdir().unwrap();
    let body = "x".repeat(200 * 1024);
    let text = format!("---\nname: big\ndescription: Does X.\n---\n{body}");
    let dir = write_skill(root.path(), "big", &[("SKILL.md", &text)]);
    let skill = clean(&dir);
    assert_eq!(skill.read_body().unwrap(), body);
}

#[test]
fn skill_md_frontmatter_over_limit_is_skipped() {
    let root = tempdir().unwrap();
    let text = format!(
        "---\nname: huge\ndescription: Does X.\n{}---\nbody\n",
        "k: v\n".repeat(20_000)
    );
    let dir = write_skill(root.path(), "huge", &[("SKILL.md", &text)]);
    assert_skipped_for(&dir, "SKILL.md", "-", "larger than");
}

#[test]
fn skill_md_not_utf8_is_skipped() {
    let root = tempdir().unwrap();
    let dir = root.path().join("bin");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        b"---\nname: bin\ndescription: \xff\xfe\n---\n",
    )
    .unwrap();
    assert_skipped_for(&dir, "SKILL.md", "-", "not UTF-8");
}

#[test]
fn load_rejects_symlinked_manifest_pointing_outside() {
    let root = tempdir().unwrap();
    let outside = root.path().join("secret.md");
    std::fs::write(
        &outside,
        "---\nname: evil\ndescription: reads a secret\n---\nSECRET BODY\n",
    )
    .unwrap();
    let dir = root.path().join("skills").join("evil");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("SKILL.md")).unwrap();
    let s = skipped(&dir);
    assert!(s.reason().contains("cannot be a symlink"), "{}", s.reason());
}
