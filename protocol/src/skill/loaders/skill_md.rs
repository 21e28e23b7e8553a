//! `SKILL.md` loader: Agent Skills frontmatter, skillbox routing fields (top level or under
//! `metadata.skillbox`) and OpenClaw's `metadata.openclaw.requires`/`os`.

use std::io::Read;
use std::path::Path;

use serde_json::{Map, Value};

use super::super::diagnostics::Diagnostic;
use super::super::frontmatter::{self, FrontmatterError, MAX_FRONTMATTER_BYTES};
use super::super::manifest::Manifest;
use super::super::model::{CostHint, Prerequisites};
use super::super::nesting::{check_yaml, MAX_MANIFEST_DEPTH};

/// Frontmatter keys of the Agent Skills spec.
pub const SPEC_KEYS: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

/// skillbox's routing keys, accepted at top level or under `metadata.skillbox`.
pub const ROUTING_KEYS: [&str; 6] = [
    "triggers",
    "anti_triggers",
    "cost_hint",
    "prerequisites",
    "parallel_safe",
    "always",
];

/// What the `SKILL.md` loader yields.
#[derive(Debug)]
pub(crate) struct SkillMd {
    pub manifest: Manifest,
    /// Byte offset of the Markdown body.
    pub body_offset: u64,
}

/// Reads the frontmatter of `path` (never the body) and maps it to a manifest.
/// Returns `Err` with the reason when the skill must be skipped.
pub(crate) fn load(path: &Path, diags: &mut Vec<Diagnostic>) -> Result<SkillMd, Diagnostic> {
    let head = read_head(path)?;
    let split = frontmatter::split(&head.text).map_err(|e| {
        let e = match (e, head.truncated) {
            (FrontmatterError::Unterminated, true) => FrontmatterError::TooLarge {
                max: MAX_FRONTMATTER_BYTES,
            },
            (e, _) => e,
        };
        Diagnostic::error(path, "-", e.to_string())
    })?;
    let value: Value = if split.yaml.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        check_yaml(split.yaml, MAX_MANIFEST_DEPTH)
            .map_err(|e| Diagnostic::error(path, "frontmatter", e.to_string()))?;
        serde_norway::from_str(split.yaml).map_err(|e| {
            Diagnostic::error(path, "frontmatter", format!("YAML does not parse: {e}"))
        })?
    };
    let Value::Object(map) = value else {
        return Err(Diagnostic::error(
            path,
            "frontmatter",
            "the frontmatter must be a YAML mapping (key: value lines)",
        ));
    };
    let manifest = map_frontmatter(path, &map, diags);
    Ok(SkillMd {
        manifest,
        body_offset: split.body_offset as u64,
    })
}

struct Head {
    text: String,
    truncated: bool,
}

/// Reads at most enough of the file to hold the largest allowed frontmatter.
fn read_head(path: &Path) -> Result<Head, Diagnostic> {
    let limit = MAX_FRONTMATTER_BYTES + 4096;
    let file = std::fs::File::open(path)
        .map_err(|e| Diagnostic::error(path, "-", format!("cannot open: {e}")))?;
    let mut bytes = Vec::with_capacity(8192);
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Diagnostic::error(path, "-", format!("cannot read: {e}")))?;
    let truncated = bytes.len() > limit;
    bytes.truncate(limit);
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) if e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
        Err(e) => {
            return Err(Diagnostic::error(
                path,
                "-",
                format!(
                    "not UTF-8 text (invalid byte at offset {})",
                    e.utf8_error().valid_up_to()
                ),
            ))
        }
    };
    Ok(Head { text, truncated })
}

fn map_frontmatter(path: &Path, map: &Map<String, Value>, diags: &mut Vec<Diagnostic>) -> Manifest {
    let mut m = Manifest::default();
    for key in map.keys() {
        if !SPEC_KEYS.contains(&key.as_str()) && !ROUTING_KEYS.contains(&key.as_str()) {
            diags.push(Diagnostic::warning(
                path,
                key,
                format!(
                    "unknown frontmatter key; the Agent Skills spec allows {}, and skillbox adds {} \
                     (put other data under `metadata`)",
                    SPEC_KEYS.join(", "),
                    ROUTING_KEYS.join(", ")
                ),
            ));
        }
    }
    let mut f = Fields { path, diags };
    m.name = f.string(map, "name", "name");
    m.description = f.string(map, "description", "description");
    m.license = f.string(map, "license", "license");
    m.compatibility = f.string(map, "compatibility", "compatibility");
    m.allowed_tools = match map.get("allowed-tools") {
        Some(Value::String(s)) => Some(s.split_whitespace().map(str::to_string).collect()),
        Some(v) => f.list(v, "allowed-tools"),
        None => None,
    };
    let metadata = match map.get("metadata") {
        None => None,
        Some(Value::Object(md)) => Some(md),
        Some(_) => {
            f.diags.push(Diagnostic::warning(
                path,
                "metadata",
                "must be a mapping of keys to values; ignored",
            ));
            None
        }
    };
    let skillbox = metadata.and_then(|md| match md.get("skillbox") {
        Some(Value::Object(sb)) => Some(sb),
        Some(_) => {
            f.diags.push(Diagnostic::error(
                path,
                "metadata.skillbox",
                format!(
                    "must be a mapping with keys among {}",
                    ROUTING_KEYS.join(", ")
                ),
            ));
            None
        }
        None => None,
    });
    if let Some(sb) = skillbox {
        for key in sb.keys().filter(|k| !ROUTING_KEYS.contains(&k.as_str())) {
            f.diags.push(Diagnostic::error(
                path,
                format!("metadata.skillbox.{key}"),
                format!("unknown key; allowed: {}", ROUTING_KEYS.join(", ")),
            ));
        }
    }
    // Top level wins over metadata.skillbox.
    let routing = |key: &str| -> Option<(&Value, String)> {
        map.get(key).map(|v| (v, key.to_string())).or_else(|| {
            skillbox
                .and_then(|sb| sb.get(key))
                .map(|v| (v, format!("metadata.skillbox.{key}")))
        })
    };
    if let Some((v, field)) = routing("triggers") {
        m.triggers = f.list(v, &field);
    }
    if let Some((v, field)) = routing("anti_triggers") {
        m.anti_triggers = f.list(v, &field);
    }
    if let Some((v, field)) = routing("cost_hint") {
        m.cost_hint = f.cost_hint(v, &field);
    }
    if let Some((v, field)) = routing("parallel_safe") {
        m.parallel_safe = f.boolean(v, &field);
    }
    if let Some((v, field)) = routing("always") {
        m.always = f.boolean(v, &field);
    }
    if let Some((v, field)) = routing("prerequisites") {
        m.prerequisites = f.prerequisites(v, &field);
    }
    if let Some(Value::Object(oc)) = metadata.and_then(|md| md.get("openclaw")) {
        let from_openclaw = f.openclaw(oc);
        m.prerequisites = Some(merge_prereqs(m.prerequisites.take(), from_openclaw));
    }
    m
}

/// skillbox's own prerequisites win per list; OpenClaw's fill the lists left empty.
fn merge_prereqs(ours: Option<Prerequisites>, openclaw: Prerequisites) -> Prerequisites {
    let Some(mut p) = ours else { return openclaw };
    let fill = |a: &mut Vec<String>, b: Vec<String>| {
        if a.is_empty() {
            *a = b;
        }
    };
    fill(&mut p.bins, openclaw.bins);
    fill(&mut p.any_bins, openclaw.any_bins);
    fill(&mut p.env, openclaw.env);
    fill(&mut p.os, openclaw.os);
    p
}

struct Fields<'a> {
    path: &'a Path,
    diags: &'a mut Vec<Diagnostic>,
}

impl Fields<'_> {
    fn string(&mut self, map: &Map<String, Value>, key: &str, field: &str) -> Option<String> {
        match map.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => {
                self.diags
                    .push(Diagnostic::error(self.path, field, "must be a string"));
                None
            }
        }
    }

    fn list(&mut self, v: &Value, field: &str) -> Option<Vec<String>> {
        match v {
            Value::String(s) => Some(vec![s.clone()]),
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match item {
                        Value::String(s) => out.push(s.clone()),
                        _ => self.diags.push(Diagnostic::error(
                            self.path,
                            format!("{field}[{i}]"),
                            "must be a string",
                        )),
                    }
                }
                Some(out)
            }
            Value::Null => None,
            _ => {
                self.diags.push(Diagnostic::error(
                    self.path,
                    field,
                    "must be a list of strings",
                ));
                None
            }
        }
    }

    fn boolean(&mut self, v: &Value, field: &str) -> Option<bool> {
        match v {
            Value::Bool(b) => Some(*b),
            _ => {
                self.diags
                    .push(Diagnostic::error(self.path, field, "must be true or false"));
                None
            }
        }
    }

    fn cost_hint(&mut self, v: &Value, field: &str) -> Option<CostHint> {
        match serde_json::from_value(v.clone()) {
            Ok(c) => Some(c),
            Err(_) => {
                self.diags.push(Diagnostic::error(
                    self.path,
                    field,
                    "must be one of low, medium, high",
                ));
                None
            }
        }
    }

    fn prerequisites(&mut self, v: &Value, field: &str) -> Option<Prerequisites> {
        let Value::Object(p) = v else {
            self.diags.push(Diagnostic::error(
                self.path,
                field,
                "must be a mapping with bins, any_bins, env, os",
            ));
            return None;
        };
        let mut out = Prerequisites::default();
        for (key, val) in p {
            let sub = format!("{field}.{key}");
            let list = self.list(val, &sub).unwrap_or_default();
            match key.as_str() {
                "bins" => out.bins = list,
                "any_bins" => out.any_bins = list,
                "env" => out.env = list,
                "os" => out.os = list,
                _ => self.diags.push(Diagnostic::error(
                    self.path,
                    sub,
                    "unknown key; allowed: bins, any_bins, env, os",
                )),
            }
        }
        Some(out)
    }

    /// OpenClaw's `requires.{bins,anyBins,env}` and `os`; its other keys (`install`,
    /// `emoji`, `requires.config`, ...) are not ours to check.
    fn openclaw(&mut self, oc: &Map<String, Value>) -> Prerequisites {
        let mut out = Prerequisites::default();
        if let Some(Value::Object(req)) = oc.get("requires") {
            let get = |s: &mut Self, k: &str| {
                req.get(k)
                    .and_then(|v| s.list(v, &format!("metadata.openclaw.requires.{k}")))
                    .unwrap_or_default()
            };
            out.bins = get(self, "bins");
            out.any_bins = get(self, "anyBins");
            out.env = get(self, "env");
        }
        if let Some(os) = oc.get("os") {
            out.os = self.list(os, "metadata.openclaw.os").unwrap_or_default();
        }
        out
    }
}
