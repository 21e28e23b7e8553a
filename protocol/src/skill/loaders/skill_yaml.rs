//! `skill.yaml` loader: the skillbox manifest of tools, permissions and limits
//! (docs/skill-format.md). Unknown keys are errors, each naming its exact path.

use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::super::diagnostics::Diagnostic;
use super::super::manifest::{empty_object_schema, Manifest, PartialExecution, PartialPermissions};
use super::super::model::{
    CostHint, Prerequisites, SecretBinding, Security, Tool, ToolEntry, ToolProtocol,
    WorkspaceAccess,
};
use super::super::nesting::{check_yaml, MAX_MANIFEST_DEPTH};

/// Largest `skill.yaml` or `package.json` read, the same bound as a `SKILL.md`
/// frontmatter ([`super::super::frontmatter::MAX_FRONTMATTER_BYTES`]); a bigger one is
/// refused before parsing.
pub const MAX_MANIFEST_BYTES: u64 = 64 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SkillYaml {
    name: Option<String>,
    version: Option<String>,
    description: Option<String>,
    license: Option<String>,
    compatibility: Option<String>,
    triggers: Option<Vec<String>>,
    anti_triggers: Option<Vec<String>>,
    cost_hint: Option<CostHint>,
    parallel_safe: Option<bool>,
    always: Option<bool>,
    prerequisites: Option<PrerequisitesYaml>,
    permissions: Option<PermissionsYaml>,
    execution: Option<ExecutionYaml>,
    tools: Option<Vec<ToolYaml>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrerequisitesYaml {
    #[serde(default)]
    bins: Vec<String>,
    #[serde(default)]
    any_bins: Vec<String>,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    os: Vec<String>,
}

/// `permissions` as both `skill.yaml` and the `package.json` extension write it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PermissionsYaml {
    env: Option<Vec<String>>,
    network: Option<Vec<String>>,
    workspace: Option<WorkspaceYaml>,
    secrets: Option<Vec<SecretBinding>>,
    delegate: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkspaceYaml {
    #[serde(default)]
    read: Vec<String>,
}

impl PermissionsYaml {
    pub(crate) fn into_partial(self) -> PartialPermissions {
        PartialPermissions {
            env: self.env,
            network: self.network,
            workspace: self.workspace.map(|w| WorkspaceAccess { read: w.read }),
            secrets: self.secrets,
            delegate: self.delegate,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecutionYaml {
    timeout_ms: Option<u64>,
    memory_mb: Option<u64>,
    max_output_bytes: Option<u64>,
    sandbox: Option<crate::skill::model::SandboxKind>,
    prestart: Option<u64>,
    max_file_mb: Option<u64>,
    loopback: Option<bool>,
    unix_sockets: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolYaml {
    name: String,
    #[serde(default)]
    description: String,
    command: Vec<String>,
    #[serde(default)]
    protocol: ToolProtocol,
    #[serde(default)]
    security: Security,
    timeout_ms: Option<u64>,
    parameters: Option<Value>,
    output_schema: Option<Value>,
}

/// Reads a bounded manifest file as text: at most [`MAX_MANIFEST_BYTES`] (a file that
/// grows while it is read is cut there and refused too).
pub(crate) fn read_manifest(path: &Path) -> Result<String, Diagnostic> {
    let cannot = |e: std::io::Error| Diagnostic::error(path, "-", format!("cannot read: {e}"));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    file.take(MAX_MANIFEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(Diagnostic::error(
            path,
            "-",
            format!(
                "over the {MAX_MANIFEST_BYTES}-byte manifest limit: manifests are refused \
                 before parsing past it; make the file smaller"
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        Diagnostic::error(
            path,
            "-",
            format!("cannot read: not UTF-8 ({})", e.utf8_error()),
        )
    })
}

/// Parses `skill.yaml`. Returns `Err` when the skill must be skipped.
pub(crate) fn load(path: &Path) -> Result<Manifest, Diagnostic> {
    let text = read_manifest(path)?;
    check_yaml(&text, MAX_MANIFEST_DEPTH)
        .map_err(|e| Diagnostic::error(path, "-", e.to_string()))?;
    let de = serde_norway::Deserializer::from_str(&text);
    let y: SkillYaml = serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        // serde_norway already prefixes its message with the path; keep it once.
        let message = e.into_inner().to_string();
        let message = message
            .strip_prefix(&format!("{field}: "))
            .map_or_else(|| message.clone(), str::to_string);
        Diagnostic::error(path, field, message)
    })?;
    Ok(Manifest {
        name: y.name,
        version: y.version,
        description: y.description,
        license: y.license,
        compatibility: y.compatibility,
        allowed_tools: None,
        triggers: y.triggers,
        anti_triggers: y.anti_triggers,
        cost_hint: y.cost_hint,
        parallel_safe: y.parallel_safe,
        always: y.always,
        prerequisites: y.prerequisites.map(|p| Prerequisites {
            bins: p.bins,
            any_bins: p.any_bins,
            env: p.env,
            os: p.os,
        }),
        permissions: y
            .permissions
            .map(PermissionsYaml::into_partial)
            .unwrap_or_default(),
        execution: y
            .execution
            .map(|e| PartialExecution {
                timeout_ms: e.timeout_ms,
                memory_mb: e.memory_mb,
                max_output_bytes: e.max_output_bytes,
                sandbox: e.sandbox,
                prestart: e.prestart,
                max_file_mb: e.max_file_mb,
                loopback: e.loopback,
                unix_sockets: e.unix_sockets,
            })
            .unwrap_or_default(),
        tools: y.tools.map(|tools| {
            tools
                .into_iter()
                .map(|t| Tool {
                    name: t.name,
                    description: t.description,
                    entry: ToolEntry::Command { argv: t.command },
                    protocol: t.protocol,
                    security: t.security,
                    timeout_ms: t.timeout_ms,
                    parameters: t.parameters.unwrap_or_else(empty_object_schema),
                    output_schema: t.output_schema,
                })
                .collect()
        }),
    })
}
