//! The partial skill each manifest format yields, and the merge by precedence
//! (`skill.yaml` over `package.json` over `SKILL.md`, docs/skill-format.md).

use serde_json::Value;

use super::model::{CostHint, ManifestFormat, Prerequisites, SecretBinding, Tool, WorkspaceAccess};

/// Limits as one manifest gives them (absent fields fall through to lower precedence).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PartialExecution {
    pub timeout_ms: Option<u64>,
    pub memory_mb: Option<u64>,
    pub max_output_bytes: Option<u64>,
    pub sandbox: Option<super::model::SandboxKind>,
    pub prestart: Option<u64>,
    pub max_file_mb: Option<u64>,
    pub loopback: Option<bool>,
    pub unix_sockets: Option<bool>,
}

/// Permissions as one manifest gives them.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PartialPermissions {
    pub env: Option<Vec<String>>,
    pub network: Option<Vec<String>>,
    pub workspace: Option<WorkspaceAccess>,
    pub secrets: Option<Vec<SecretBinding>>,
    pub delegate: Option<Vec<String>>,
}

/// What one manifest file says about a skill.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Manifest {
    pub name: Option<String>,
    pub version: Option<String>,
    pub description: Option<String>,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub allowed_tools: Option<Vec<String>>,
    pub triggers: Option<Vec<String>>,
    pub anti_triggers: Option<Vec<String>>,
    pub cost_hint: Option<CostHint>,
    pub parallel_safe: Option<bool>,
    pub always: Option<bool>,
    pub prerequisites: Option<Prerequisites>,
    pub permissions: PartialPermissions,
    pub execution: PartialExecution,
    pub tools: Option<Vec<Tool>>,
}

/// Manifests of one skill folder with the format each came from.
#[derive(Debug, Default)]
pub(crate) struct Manifests {
    /// Highest precedence first.
    pub by_precedence: Vec<(ManifestFormat, Manifest)>,
}

macro_rules! first {
    ($ms:expr, $($field:tt)+) => {
        $ms.iter().find_map(|(_, m)| m.$($field)+.clone())
    };
}

impl Manifests {
    /// Adds a manifest, keeping precedence order.
    pub fn push(&mut self, format: ManifestFormat, manifest: Manifest) {
        self.by_precedence.push((format, manifest));
        self.by_precedence.sort_by_key(|m| std::cmp::Reverse(m.0));
    }

    /// The merged manifest: each field from the highest-precedence manifest that has it.
    pub fn merged(&self) -> Manifest {
        let ms = &self.by_precedence;
        Manifest {
            name: first!(ms, name),
            version: first!(ms, version),
            description: first!(ms, description),
            license: first!(ms, license),
            compatibility: first!(ms, compatibility),
            allowed_tools: first!(ms, allowed_tools),
            triggers: first!(ms, triggers),
            anti_triggers: first!(ms, anti_triggers),
            cost_hint: first!(ms, cost_hint),
            parallel_safe: first!(ms, parallel_safe),
            always: first!(ms, always),
            prerequisites: first!(ms, prerequisites),
            permissions: PartialPermissions {
                env: first!(ms, permissions.env),
                network: first!(ms, permissions.network),
                workspace: first!(ms, permissions.workspace),
                secrets: first!(ms, permissions.secrets),
                delegate: first!(ms, permissions.delegate),
            },
            execution: PartialExecution {
                timeout_ms: first!(ms, execution.timeout_ms),
                memory_mb: first!(ms, execution.memory_mb),
                max_output_bytes: first!(ms, execution.max_output_bytes),
                sandbox: first!(ms, execution.sandbox),
                prestart: first!(ms, execution.prestart),
                max_file_mb: first!(ms, execution.max_file_mb),
                loopback: first!(ms, execution.loopback),
                unix_sockets: first!(ms, execution.unix_sockets),
            },
            tools: first!(ms, tools),
        }
    }

    /// Formats present, lowest precedence first.
    pub fn formats(&self) -> Vec<ManifestFormat> {
        let mut f: Vec<_> = self.by_precedence.iter().map(|(f, _)| *f).collect();
        f.sort();
        f
    }
}

/// The default parameters schema of a tool that declares none.
pub(crate) fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_takes_each_field_from_highest_precedence() {
        let mut ms = Manifests::default();
        ms.push(
            ManifestFormat::SkillMd,
            Manifest {
                name: Some("md".into()),
                description: Some("from md".into()),
                license: Some("MIT".into()),
                ..Default::default()
            },
        );
        ms.push(
            ManifestFormat::SkillYaml,
            Manifest {
                description: Some("from yaml".into()),
                ..Default::default()
            },
        );
        ms.push(
            ManifestFormat::PackageJson,
            Manifest {
                name: Some("pkg".into()),
                description: Some("from pkg".into()),
                ..Default::default()
            },
        );
        let m = ms.merged();
        assert_eq!(m.description.as_deref(), Some("from yaml"));
        assert_eq!(m.name.as_deref(), Some("pkg"));
        assert_eq!(m.license.as_deref(), Some("MIT"));
        assert_eq!(
            ms.formats(),
            vec![
                ManifestFormat::SkillMd,
                ManifestFormat::PackageJson,
                ManifestFormat::SkillYaml
            ]
        );
    }
}
