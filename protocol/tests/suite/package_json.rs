//! The `package.json` loader (OwliaBot style).

use skillbox_protocol::skill::{
    load_skill, manifest_files, LoadOutcome, ManifestFormat, Security, ToolEntry, ToolProtocol,
};
use tempfile::tempdir;

use super::common::*;

const OWLIABOT: &str = r#"{
  "name": "weather-js",
  "version": "1.2.0",
  "description": "Weather for a city",
  "main": "dist/index.js",
  "license": "MIT",
  "dependencies": { "left-pad": "1.0.0" },
  "scripts": { "build": "tsc" },
  "owliabot": {
    "requires": { "env": ["WEATHER_API_KEY"], "bins": ["node"] },
    "tools": [
      {
        "name": "get_weather",
        "description": "Current weather",
        "parameters": { "type": "object", "properties": { "city": { "type": "string" } } },
        "security": { "level": "write" },
        "timeout": 5000
      },
      { "name": "forecast" }
    ]
  }
}"#;

#[test]
fn package_json_owliabot_loads() {
    let root = tempdir().unwrap();
    let dir = write_skill(
        root.path(),
        "weather-js",
        &[
            ("package.json", OWLIABOT),
            ("dist/index.js", "exports.tools = {};\n"),
        ],
    );
    let skill = clean(&dir);
    assert_eq!(skill.name, "weather-js");
    assert_eq!(skill.version.as_deref(), Some("1.2.0"));
    assert_eq!(skill.description, "Weather for a city");
    assert_eq!(skill.license.as_deref(), Some("MIT"));
    assert_eq!(skill.formats, [ManifestFormat::PackageJson]);
    assert_eq!(skill.permissions.env, ["WEATHER_API_KEY"]);
    assert_eq!(skill.prerequisites.env, ["WEATHER_API_KEY"]);
    assert_eq!(skill.prerequisites.bins, ["node"]);
    let tool = skill.tool("get_weather").unwrap();
    assert_eq!(
        tool.entry,
        ToolEntry::JsExport {
            main: "dist/index.js".into()
        }
    );
    assert_eq!(tool.security, Security::Write);
    assert_eq!(tool.protocol, ToolProtocol::Jsonrpc);
    assert_eq!(tool.timeout_ms, Some(5000));
    let forecast = skill.tool("forecast").unwrap();
    assert_eq!(forecast.security, Security::Read);
    assert_eq!(forecast.parameters, serde_json::json!({"type": "object"}));
}

#[test]
fn package_json_skillbox_field_is_an_alias() {
    let root = tempdir().unwrap();
    let pkg = r#"{ "name": "s", "description": "Does X.", "skillbox": { "tools": [{ "name": "t" }], "triggers": ["x"] } }"#;
    let dir = write_skill(root.path(), "s", &[("package.json", pkg), ("index.js", "")]);
    let skill = clean(&dir);
    assert_eq!(skill.routing.triggers, ["x"]);
    assert_eq!(
        skill.tools[0].entry,
        ToolEntry::JsExport {
            main: "index.js".into()
        }
    );
}

#[test]
fn package_json_with_both_fields_is_refused() {
    let root = tempdir().unwrap();
    let pkg = r#"{ "name": "s", "description": "Does X.", "skillbox": {}, "owliabot": {} }"#;
    let dir = write_skill(root.path(), "s", &[("package.json", pkg)]);
    assert_skipped_for(&dir, "package.json", "skillbox", "not both");
}

#[test]
fn package_json_main_missing_is_refused() {
    let root = tempdir().unwrap();
    let dir = write_skill(root.path(), "weather-js", &[("package.json", OWLIABOT)]);
    assert_skipped_for(&dir, "package.json", "tools[0].main", "does not exist");
    // npm's default entry, index.js, is checked too.
    let pkg =
        r#"{ "name": "s", "description": "Does X.", "owliabot": { "tools": [{ "name": "t" }] } }"#;
    let dir = write_skill(root.path(), "s", &[("package.json", pkg)]);
    assert_skipped_for(
        &dir,
        "package.json",
        "tools[0].main",
        "\"index.js\" does not exist",
    );
}

#[test]
fn package_json_main_escaping_skill_is_refused() {
    let root = tempdir().unwrap();
    let pkg = r#"{ "name": "s", "description": "Does X.", "main": "../x.js", "owliabot": { "tools": [{ "name": "t" }] } }"#;
    let dir = write_skill(root.path(), "s", &[("package.json", pkg)]);
    assert_skipped_for(
        &dir,
        "package.json",
        "tools[0].main",
        "\"..\" is not allowed",
    );
}

#[test]
fn package_json_unknown_key_inside_owliabot_is_refused() {
    let root = tempdir().unwrap();
    let pkg = r#"{ "name": "s", "description": "Does X.", "owliabot": { "tols": [] } }"#;
    let dir = write_skill(root.path(), "s", &[("package.json", pkg)]);
    assert_skipped_for(
        &dir,
        "package.json",
        "owliabot.tols",
        "unknown field `tols`",
    );
    let pkg = r#"{ "name": "s", "description": "Does X.", "owliabot": { "tools": [{ "name": "t", "timeout_ms": 5 }] } }"#;
    let dir = write_skill(root.path(), "s", &[("package.json", pkg), ("index.js", "")]);
    assert_skipped_for(
        &dir,
        "package.json",
        "owliabot.tools[0].timeout_ms",
        "unknown field",
    );
}

#[test]
fn package_json_unknown_npm_fields_are_ignored() {
    let root = tempdir().unwrap();
    let pkg = r#"{ "name": "s", "description": "Does X.", "private": true, "engines": { "node": ">=20" }, "owliabot": {} }"#;
    let dir = write_skill(root.path(), "s", &[("package.json", pkg)]);
    clean(&dir);
}

#[test]
fn package_json_without_owliabot_field_is_not_a_skill() {
    let root = tempdir().unwrap();
    let pkg =
        r#"{ "name": "left-pad", "version": "1.0.0", "description": "pads", "main": "index.js" }"#;
    let dir = write_skill(root.path(), "left-pad", &[("package.json", pkg)]);
    assert!(manifest_files(&dir).is_empty());
    assert_eq!(load_skill(&dir), LoadOutcome::NotASkill);
}

#[test]
fn package_json_not_json_is_reported_not_ignored() {
    let root = tempdir().unwrap();
    let dir = write_skill(root.path(), "s", &[("package.json", "{ not json")]);
    assert_skipped_for(&dir, "package.json", "-", "not valid JSON");
}

#[test]
fn package_json_bad_version_is_refused() {
    let root = tempdir().unwrap();
    let pkg = r#"{ "name": "s", "version": "1.0", "description": "Does X.", "owliabot": {} }"#;
    let dir = write_skill(root.path(), "s", &[("package.json", pkg)]);
    assert_skipped_for(&dir, "package.json", "version", "not a semantic version");
}
