//! `package.json` loader: the OwliaBot JS skill format, whose skill fields live under
//! `owliabot` (or `skillbox`). npm's own fields other than name, version, description and
//! main are not ours and are ignored; unknown keys inside our field are errors.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::super::diagnostics::Diagnostic;
use super::super::manifest::{empty_object_schema, Manifest, PartialExecution};
use super::super::model::{CostHint, Prerequisites, Security, Tool, ToolEntry, ToolProtocol};
use super::super::nesting::{check_json, MAX_MANIFEST_DEPTH};
use super::skill_yaml::{read_manifest, PermissionsYaml};

/// Entry module when `main` is absent (npm's default).
pub const DEFAULT_MAIN: &str = "index.js";

#[derive(Debug, Deserialize)]
struct PackageJson {
    name: Option<String>,
    version: Option<String>,
    description: Option<String>,
    license: Option<Value>,
    main: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SkillField {
    requires: Option<Requires>,
    #[serde(default)]
    tools: Vec<JsTool>,
    // skillbox extensions, same meaning as in skill.yaml.
    permissions: Option<PermissionsYaml>,
    triggers: Option<Vec<String>>,
    anti_triggers: Option<Vec<String>>,
    cost_hint: Option<CostHint>,
    parallel_safe: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Requires {
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    bins: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsTool {
    name: String,
    #[serde(default)]
    description: String,
    parameters: Option<Value>,
    #[serde(rename = "outputSchema")]
    output_schema: Option<Value>,
    security: Option<JsSecurity>,
    /// Milliseconds.
    timeout: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsSecurity {
    level: Security,
}

/// Whether `package.json` at `path` carries a skill field (a plain npm package is not a
/// skill). Unreadable or non-JSON files count as skills so the error gets reported.
pub(crate) fn has_skill_field(path: &Path) -> bool {
    let Ok(text) = read_manifest(path) else {
        return true;
    };
    if check_json(&text, MAX_MANIFEST_DEPTH).is_err() {
        return true;
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(o)) => o.contains_key("owliabot") || o.contains_key("skillbox"),
        _ => true,
    }
}

/// Parses `package.json`. Returns `Err` when the skill must be skipped.
pub(crate) fn load(path: &Path) -> Result<Manifest, Diagnostic> {
    let text = read_manifest(path)?;
    check_json(&text, MAX_MANIFEST_DEPTH)
        .map_err(|e| Diagnostic::error(path, "-", e.to_string()))?;
    let root: Value = serde_json::from_str(&text)
        .map_err(|e| Diagnostic::error(path, "-", format!("not valid JSON: {e}")))?;
    let Value::Object(obj) = &root else {
        return Err(Diagnostic::error(path, "-", "must be a JSON object"));
    };
    let (key, field) = match (obj.get("owliabot"), obj.get("skillbox")) {
        (Some(_), Some(_)) => {
            return Err(Diagnostic::error(
                path,
                "skillbox",
                "give either \"owliabot\" or \"skillbox\", not both",
            ))
        }
        (Some(f), None) => ("owliabot", f.clone()),
        (None, Some(f)) => ("skillbox", f.clone()),
        (None, None) => {
            return Err(Diagnostic::error(
                path,
                "owliabot",
                "a package.json skill needs an \"owliabot\" or \"skillbox\" field",
            ))
        }
    };
    let pkg: PackageJson = serde_json::from_value(root.clone())
        .map_err(|e| Diagnostic::error(path, "-", format!("npm fields: {e}")))?;
    let sf: SkillField = serde_path_to_error::deserialize(field).map_err(|e| {
        Diagnostic::error(
            path,
            format!("{key}.{}", e.path()),
            e.into_inner().to_string(),
        )
    })?;
    let main = pkg.main.unwrap_or_else(|| DEFAULT_MAIN.to_string());
    let requires = sf.requires;
    let prerequisites = requires.as_ref().map(|r| Prerequisites {
        bins: r.bins.clone(),
        env: r.env.clone(),
        ..Default::default()
    });
    let mut permissions = sf
        .permissions
        .map(PermissionsYaml::into_partial)
        .unwrap_or_default();
    if permissions.env.is_none() {
        permissions.env = requires.map(|r| r.env);
    }
    Ok(Manifest {
        name: pkg.name,
        version: pkg.version,
        description: pkg.description,
        license: pkg.license.and_then(|l| l.as_str().map(str::to_string)),
        compatibility: None,
        allowed_tools: None,
        triggers: sf.triggers,
        anti_triggers: sf.anti_triggers,
        cost_hint: sf.cost_hint,
        parallel_safe: sf.parallel_safe,
        always: None,
        prerequisites,
        permissions,
        execution: PartialExecution::default(),
        tools: Some(
            sf.tools
                .into_iter()
                .map(|t| Tool {
                    name: t.name,
                    description: t.description,
                    entry: ToolEntry::JsExport { main: main.clone() },
                    protocol: ToolProtocol::Jsonrpc,
                    security: t.security.map(|s| s.level).unwrap_or_default(),
                    timeout_ms: t.timeout,
                    parameters: t.parameters.unwrap_or_else(empty_object_schema),
                    output_schema: t.output_schema,
                })
                .collect(),
        ),
    })
}
