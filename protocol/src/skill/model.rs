//! The one model of a loaded skill, whichever manifest(s) it came from.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::diagnostics::Diagnostic;

/// Default wall-clock limit of a call.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// Default memory limit of a call (what its processes use; docs/sandbox.md, "Memory").
pub const DEFAULT_MEMORY_MB: u64 = 256;
/// Default cap on the size of one file a call's programs write (`RLIMIT_FSIZE`): room for
/// audio, video and big wheels.
pub const DEFAULT_MAX_FILE_MB: u64 = 1024;
/// Default cap on a call's stdout + stderr.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1024 * 1024;

/// Which file a field came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ManifestFormat {
    /// `SKILL.md` frontmatter.
    SkillMd,
    /// `package.json` with an `owliabot`/`skillbox` field.
    PackageJson,
    /// `skill.yaml`.
    SkillYaml,
}

impl ManifestFormat {
    /// The file name of this format inside a skill folder.
    pub fn file_name(self) -> &'static str {
        match self {
            ManifestFormat::SkillMd => "SKILL.md",
            ManifestFormat::PackageJson => "package.json",
            ManifestFormat::SkillYaml => "skill.yaml",
        }
    }
}

/// Expected cost of running a skill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostHint {
    /// Cheap.
    Low,
    /// Moderate.
    Medium,
    /// Expensive.
    High,
}

/// What a tool may do beyond reading, which decides whether it needs approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Security {
    /// Runs at once.
    #[default]
    Read,
    /// Changes something: waits for approval.
    Write,
    /// Signs with a core key: waits for approval.
    Sign,
}

/// How the executor talks to a tool process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolProtocol {
    /// Newline-delimited JSON-RPC 2.0 over stdio.
    #[default]
    Jsonrpc,
    /// Arguments on stdin, stdout/stderr/exit code as the result.
    Plain,
}

/// What runs for a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ToolEntry {
    /// An argv; relative paths are inside the skill folder.
    Command {
        /// The argv.
        argv: Vec<String>,
    },
    /// A function exported as `tools[name]` from a JavaScript module, run under Node by
    /// the runner skillbox ships.
    JsExport {
        /// The module, relative to the skill folder.
        main: String,
    },
}

/// One tool of a skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// `[a-z0-9_]{1,64}`; the full name is `skill:tool`.
    pub name: String,
    /// What it does.
    pub description: String,
    /// What runs.
    pub entry: ToolEntry,
    /// Stdio protocol.
    pub protocol: ToolProtocol,
    /// Security level.
    pub security: Security,
    /// Overrides the skill's `execution.timeout_ms`.
    pub timeout_ms: Option<u64>,
    /// JSON Schema of the arguments (compiled during validation).
    pub parameters: Value,
    /// JSON Schema of the result's `data`, when the tool declares one (an object schema;
    /// MCP clients get it as the tool's `outputSchema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// Routing metadata (docs/skill-format.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Routing {
    /// Words or phrases that should select the skill.
    pub triggers: Vec<String>,
    /// Words or phrases that argue against it.
    pub anti_triggers: Vec<String>,
    /// Expected cost.
    pub cost_hint: Option<CostHint>,
    /// Whether it may run beside another skill.
    pub parallel_safe: bool,
    /// Always active.
    pub always: bool,
}

/// What must hold on the host for the skill to be usable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Prerequisites {
    /// Every one of these programs must be on `PATH`.
    pub bins: Vec<String>,
    /// At least one of these programs must be on `PATH` (empty: no condition).
    pub any_bins: Vec<String>,
    /// Env values the core must hold.
    pub env: Vec<String>,
    /// Operating systems (`linux`, `darwin`, `win32`); empty means any.
    pub os: Vec<String>,
}

/// Workspace access through the core's `readFile`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceAccess {
    /// Globs relative to the workspace.
    pub read: Vec<String>,
}

/// What a skill declared it may use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Permissions {
    /// Env names whose values the core supplies per call.
    pub env: Vec<String>,
    /// Network patterns the core's fetch may reach for it.
    pub network: Vec<String>,
    /// Workspace read scope.
    pub workspace: WorkspaceAccess,
    /// Secrets bound to hosts: the tool sees a placeholder, the egress proxy puts the
    /// value in requests to those hosts only (docs/permissions.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretBinding>,
    /// Skills (`name`) or tools (`name:tool`) its programs may call through `runSkill`;
    /// each runs under its own permissions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegate: Vec<String>,
}

impl Permissions {
    /// Whether `skill:tool` is a delegation this skill declared.
    pub fn may_delegate(&self, skill: &str, tool: &str) -> bool {
        self.delegate.iter().any(|d| match d.split_once(':') {
            Some((s, t)) => s == skill && t == tool,
            None => d == skill,
        })
    }
}

impl Permissions {
    /// Whether a call of the skill reaches the network: it declares hosts, or binds a
    /// secret (whose hosts it reaches through the egress proxy).
    pub fn is_network(&self) -> bool {
        !self.network.is_empty() || !self.secrets.is_empty()
    }

    /// The host patterns its programs and its fetch capability may reach: `network`, and
    /// the hosts its secrets are bound to (a binding implies reaching the host).
    pub fn reachable(&self) -> Vec<String> {
        let mut hosts = self.network.clone();
        for h in self.secrets.iter().flat_map(|s| &s.hosts) {
            if !hosts.contains(h) {
                hosts.push(h.clone());
            }
        }
        hosts
    }

    /// The names of its bound secrets.
    pub fn secret_names(&self) -> impl Iterator<Item = &str> {
        self.secrets.iter().map(|s| s.name.as_str())
    }
}

/// `permissions.secrets[]`: a secret whose value only the listed hosts receive.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretBinding {
    /// The env name: the tool's environment holds a placeholder under it.
    pub name: String,
    /// Network patterns (as `permissions.network`) whose requests get the value.
    pub hosts: Vec<String>,
}

/// A skill's dependencies (`dependencies.rs`).
pub use super::dependencies::Dependencies;

/// Per-call limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Execution {
    /// Wall-clock limit.
    pub timeout_ms: u64,
    /// Memory limit of the call's processes (together, under a memory cgroup).
    pub memory_mb: u64,
    /// Cap on stdout + stderr.
    pub max_output_bytes: u64,
    /// Where the calls run: the executor's process sandbox, or a one-off container.
    #[serde(default)]
    pub sandbox: SandboxKind,
    /// Warm starts: processes of each tool the executor keeps started, each in its own
    /// fresh sandbox and blocked reading its request, so a call skips the start-up.
    /// 0 (the default) starts every call's process when the call arrives.
    #[serde(default)]
    pub prestart: u64,
    /// Largest file one of the call's programs may write, in MiB (`RLIMIT_FSIZE`); the
    /// operator's `[grants.<skill>] max_file_mb` replaces it.
    #[serde(default = "default_max_file_mb")]
    pub max_file_mb: u64,
    /// A loopback of the call's own (its own network namespace, nothing else in it) where
    /// its programs may listen and connect, for a skill without network; a skill with
    /// network has one always.
    #[serde(default)]
    pub loopback: bool,
    /// UNIX sockets for the call's programs (LibreOffice's single-instance pipe, local
    /// daemons a skill starts), in a call that gets its own `/tmp` and a loopback of its
    /// own (docs/sandbox.md, "UNIX sockets"); the operator's `[grants.<skill>]
    /// unix_sockets` gives it to a skill that does not declare it.
    #[serde(default)]
    pub unix_sockets: bool,
}

fn default_max_file_mb() -> u64 {
    DEFAULT_MAX_FILE_MB
}

/// `execution.sandbox`: where a skill's calls run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxKind {
    /// A fresh process in the executor's kernel sandbox (the default).
    #[default]
    Process,
    /// The same kernel sandbox inside a one-off container of the executor image that the
    /// core creates per call (no network, read-only, only this skill mounted): a separate
    /// set of kernel namespaces, at the cost of a container start.
    Container,
}

impl Default for Execution {
    fn default() -> Self {
        Self {
            timeout_ms: DEFAULT_TIMEOUT_MS,
            memory_mb: DEFAULT_MEMORY_MB,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            sandbox: SandboxKind::Process,
            prestart: 0,
            max_file_mb: DEFAULT_MAX_FILE_MB,
            loopback: false,
            unix_sockets: false,
        }
    }
}

/// Where the Markdown body of `SKILL.md` starts; the body itself stays on disk until
/// asked for (progressive disclosure).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BodyRef {
    /// The `SKILL.md` file.
    pub path: PathBuf,
    /// Byte offset of the body.
    pub offset: u64,
}

/// A loaded skill: everything but the body and files, which are read on demand.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skill {
    /// Skill name.
    pub name: String,
    /// Semantic version, when a manifest gives one.
    pub version: Option<String>,
    /// What the skill does and when to use it.
    pub description: String,
    /// The skill folder.
    pub dir: PathBuf,
    /// The manifests found, lowest precedence first.
    pub formats: Vec<ManifestFormat>,
    /// SPDX licence or licence file.
    pub license: Option<String>,
    /// Environment requirements in words (Agent Skills `compatibility`).
    pub compatibility: Option<String>,
    /// Agent Skills `allowed-tools`.
    pub allowed_tools: Vec<String>,
    /// Routing metadata.
    pub routing: Routing,
    /// Host requirements.
    pub prerequisites: Prerequisites,
    /// Declared permissions.
    pub permissions: Permissions,
    /// Per-call limits.
    pub execution: Execution,
    /// Tools, in manifest order.
    pub tools: Vec<Tool>,
    /// The `SKILL.md` body, when there is one.
    pub body: Option<BodyRef>,
    /// Its Python dependencies (`requirements.txt`, `pyproject.toml`, PEP 723).
    #[serde(default)]
    pub dependencies: Dependencies,
    /// Warnings from lenient loading.
    pub warnings: Vec<Diagnostic>,
}

impl Skill {
    /// Reads the Markdown body of `SKILL.md` from disk (empty when the skill has none).
    pub fn read_body(&self) -> std::io::Result<String> {
        let Some(body) = &self.body else {
            return Ok(String::new());
        };
        let text = std::fs::read_to_string(&body.path)?;
        let offset = usize::try_from(body.offset).unwrap_or(usize::MAX);
        Ok(text.get(offset..).unwrap_or_default().to_string())
    }

    /// The tool with this name.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The programs a tool process of this skill may need from the sandbox `PATH`: the
    /// prerequisites' `bins` and `any_bins`, each tool command's program when it is a bare
    /// name, and `node` for JavaScript tools. Sorted, without duplicates.
    pub fn programs(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .prerequisites
            .bins
            .iter()
            .chain(&self.prerequisites.any_bins)
            .cloned()
            .chain(self.tools.iter().filter_map(|t| match &t.entry {
                ToolEntry::Command { argv } => argv.first().filter(|p| !p.contains('/')).cloned(),
                ToolEntry::JsExport { .. } => Some("node".to_string()),
            }))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The effective timeout of a tool.
    pub fn timeout_ms(&self, tool: &Tool) -> u64 {
        tool.timeout_ms.unwrap_or(self.execution.timeout_ms)
    }

    /// Files of the skill, relative to its folder, sorted (symlinks listed, not followed).
    pub fn list_files(&self) -> std::io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        walk(&self.dir, Path::new(""), &mut out, 0)?;
        out.sort();
        Ok(out)
    }
}

const MAX_LIST_DEPTH: usize = 16;
const MAX_LIST_FILES: usize = 10_000;

fn walk(base: &Path, rel: &Path, out: &mut Vec<PathBuf>, depth: usize) -> std::io::Result<()> {
    if depth > MAX_LIST_DEPTH {
        return Ok(());
    }
    for entry in std::fs::read_dir(base.join(rel))? {
        let entry = entry?;
        if out.len() >= MAX_LIST_FILES {
            return Ok(());
        }
        let rel_path = rel.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            walk(base, &rel_path, out, depth + 1)?;
        } else {
            out.push(rel_path);
        }
    }
    Ok(())
}
