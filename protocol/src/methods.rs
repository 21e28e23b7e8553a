//! Params and results of every JSON-RPC method skillbox speaks.
//!
//! Tool stdio (docs/skill-format.md): `tool.invoke` from the executor to the tool, and the
//! capability requests `fetch`, `sign`, `readFile` from the tool. Core ↔ executor
//! (docs/architecture.md): `tool.execute`, `tool.list`, `skill.reload`, `health` one way and
//! `core.fetch`, `core.sign`, `core.readFile` the other. Every struct rejects unknown fields.

pub use crate::deps_build::{DepsBuildParams, DepsBuildResult, LockedPackage};
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::result::ToolResult;
use crate::skill::Security;

/// Method names.
pub mod method {
    /// Executor → tool: run the tool once.
    pub const TOOL_INVOKE: &str = "tool.invoke";
    /// Tool → executor: HTTP request through the core's proxy.
    pub const FETCH: &str = "fetch";
    /// Tool → executor: signature by a key held in the core.
    pub const SIGN: &str = "sign";
    /// Tool → executor: read a workspace file through the core.
    pub const READ_FILE: &str = "readFile";
    /// Tool → executor: call a tool of another skill (delegation) through the core.
    pub const RUN_SKILL: &str = "runSkill";
    /// Core → executor: run one tool call.
    pub const TOOL_EXECUTE: &str = "tool.execute";
    /// Core → executor: list the tools the executor can run.
    pub const TOOL_LIST: &str = "tool.list";
    /// Core → executor: reload the skills root.
    pub const SKILL_RELOAD: &str = "skill.reload";
    /// Core → executor: liveness and sandbox status.
    pub const HEALTH: &str = "health";
    /// Executor → core: forwarded `fetch`.
    pub const CORE_FETCH: &str = "core.fetch";
    /// Executor → core: forwarded `sign`.
    pub const CORE_SIGN: &str = "core.sign";
    /// Executor → core: forwarded `readFile`.
    pub const CORE_READ_FILE: &str = "core.readFile";
    /// Executor → core: forwarded `runSkill`.
    pub const CORE_RUN_SKILL: &str = "core.runSkill";
    /// Core → executor: start a command session.
    pub const SESSION_EXEC: &str = "session.exec";
    /// Core → executor: write to a session, or poll it.
    pub const SESSION_WRITE: &str = "session.write";
    /// Core → executor: end sessions.
    pub const SESSION_CLOSE: &str = "session.close";
    /// Core → executor: build a skill's Python dependencies.
    pub const DEPS_BUILD: &str = "deps.build";
    /// Executor → core: a chunk of a file of the call's context.
    pub const CORE_CONTEXT_FILE_READ: &str = "core.contextFileRead";
    /// Executor → core: a chunk of a file the call wrote in its context.
    pub const CORE_CONTEXT_FILE_WRITE: &str = "core.contextFileWrite";
    /// Executor → core: a file the call removed from its context.
    pub const CORE_CONTEXT_FILE_DELETE: &str = "core.contextFileDelete";
}

/// Declares an enum of method names with its string form, parsing and `Display`.
macro_rules! methods {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $value:path,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)+
        }

        impl $name {
            /// Every method, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The method's name on the wire.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $value,)+
                }
            }

            /// The method named `name`, if it is one of these.
            pub fn parse(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|m| m.as_str() == name)
            }

            /// The names, comma-separated (for "unknown method" answers).
            pub fn names() -> String {
                Self::ALL.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ")
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

methods! {
    /// What the executor serves to the core.
    ExecutorMethod {
        /// `tool.execute`.
        ToolExecute = method::TOOL_EXECUTE,
        /// `tool.list`.
        ToolList = method::TOOL_LIST,
        /// `skill.reload`.
        SkillReload = method::SKILL_RELOAD,
        /// `health`.
        Health = method::HEALTH,
        /// `session.exec`.
        SessionExec = method::SESSION_EXEC,
        /// `session.write`.
        SessionWrite = method::SESSION_WRITE,
        /// `session.close`.
        SessionClose = method::SESSION_CLOSE,
        /// `deps.build`.
        DepsBuild = method::DEPS_BUILD,
    }
}

methods! {
    /// What the core serves to the executor: a tool's capability requests, forwarded.
    CoreMethod {
        /// `core.fetch`.
        Fetch = method::CORE_FETCH,
        /// `core.sign`.
        Sign = method::CORE_SIGN,
        /// `core.readFile`.
        ReadFile = method::CORE_READ_FILE,
        /// `core.runSkill`.
        RunSkill = method::CORE_RUN_SKILL,
        /// `core.contextFileRead`.
        ContextFileRead = method::CORE_CONTEXT_FILE_READ,
        /// `core.contextFileWrite`.
        ContextFileWrite = method::CORE_CONTEXT_FILE_WRITE,
        /// `core.contextFileDelete`.
        ContextFileDelete = method::CORE_CONTEXT_FILE_DELETE,
    }
}

methods! {
    /// What a tool may ask for over its stdio.
    Capability {
        /// `fetch`.
        Fetch = method::FETCH,
        /// `sign`.
        Sign = method::SIGN,
        /// `readFile`.
        ReadFile = method::READ_FILE,
        /// `runSkill`.
        RunSkill = method::RUN_SKILL,
    }
}

impl Capability {
    /// The core method a capability request is forwarded as.
    pub fn core_method(self) -> CoreMethod {
        match self {
            Capability::Fetch => CoreMethod::Fetch,
            Capability::Sign => CoreMethod::Sign,
            Capability::ReadFile => CoreMethod::ReadFile,
            Capability::RunSkill => CoreMethod::RunSkill,
        }
    }
}

/// Longest URL a `fetch` may carry.
pub const MAX_URL_LEN: usize = 8 * 1024;
/// Most headers a `fetch` may carry.
pub const MAX_HEADERS: usize = 64;

/// A value that must never be printed: `Debug` shows `***`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretValue(pub String);

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// `tool.invoke` params, the one request the executor writes to a `jsonrpc` tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolInvokeParams {
    /// Tool name within the skill.
    pub tool: String,
    /// Arguments, already validated against the tool's schema.
    pub args: Value,
    /// The call id.
    pub call_id: String,
}

/// `fetch` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchParams {
    /// Absolute `http`/`https` URL.
    pub url: String,
    /// HTTP method, `GET` when absent.
    #[serde(default = "default_method")]
    pub method: String,
    /// Request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Request body (text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

fn default_method() -> String {
    "GET".into()
}

/// Why capability params are out of bounds.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParamsBoundError {
    /// The URL is longer than [`MAX_URL_LEN`].
    #[error("url of {len} bytes exceeds {max}")]
    UrlTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// More than [`MAX_HEADERS`] headers.
    #[error("{count} headers exceed the limit of {max}")]
    TooManyHeaders {
        /// How many.
        count: usize,
        /// The limit.
        max: usize,
    },
}

impl FetchParams {
    /// Checks the size bounds of a fetch request.
    pub fn check_bounds(&self) -> Result<(), ParamsBoundError> {
        if self.url.len() > MAX_URL_LEN {
            return Err(ParamsBoundError::UrlTooLong {
                len: self.url.len(),
                max: MAX_URL_LEN,
            });
        }
        if self.headers.len() > MAX_HEADERS {
            return Err(ParamsBoundError::TooManyHeaders {
                count: self.headers.len(),
                max: MAX_HEADERS,
            });
        }
        Ok(())
    }
}

/// `fetch` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchResult {
    /// HTTP status code.
    pub status: u16,
    /// Response headers.
    pub headers: BTreeMap<String, String>,
    /// Response body (text; binary bodies are base64 by the proxy's choice).
    pub body: String,
}

/// What a `sign` request signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignType {
    /// An arbitrary message.
    Message,
    /// A transaction.
    Transaction,
}

/// `sign` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignParams {
    /// Message or transaction.
    #[serde(rename = "type")]
    pub kind: SignType,
    /// Base64 of the bytes to sign.
    pub data: String,
}

/// `sign` result, all base64.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignResult {
    /// The signature.
    pub signature: String,
    /// The public key that verifies it.
    pub public_key: String,
    /// The algorithm, e.g. `ed25519`.
    pub algorithm: String,
}

/// `readFile` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFileParams {
    /// Workspace-relative path.
    pub path: String,
}

/// `readFile` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFileResult {
    /// The file's text.
    pub content: String,
}

/// `tool.execute` params (core → executor).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolExecuteParams {
    /// The id the core gave this call.
    pub call_id: String,
    /// Per-call token the executor must present on capability callbacks.
    pub capability_token: SecretValue,
    /// Skill name.
    pub skill: String,
    /// Tool name within the skill.
    pub tool: String,
    /// Arguments.
    pub args: Value,
    /// Values of the skill's declared env names that the core holds.
    #[serde(default)]
    pub env: BTreeMap<String, SecretValue>,
    /// Env names the operator granted the skill (`[grants.<skill>] env`) beyond those it
    /// declares: the executor passes their values too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub granted_env: Vec<String>,
    /// Hosts the operator granted the skill (`[grants.<skill>] network`) beyond those it
    /// declares. A call whose skill declares or is granted any host is a network call: it
    /// runs in a network namespace of its own whose only way out is the core's egress
    /// proxy (docs/sandbox.md). The executor only tests it for emptiness; the core's proxy
    /// enforces the hosts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub granted_network: Vec<String>,
    /// The largest file the operator lets the skill's programs write, in MiB
    /// (`[grants.<skill>] max_file_mb`): replaces the skill's `execution.max_file_mb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted_max_file_mb: Option<u64>,
    /// The W3C `traceparent` a bot sent with the call, validated by the core; the
    /// executor puts it on the call's log lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The context's files, when the call is made in a context: the call runs in them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<crate::workdir::WorkDir>,
    /// A script of the skill to run instead of a declared tool (`run_skill_script`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<ScriptRun>,
    /// Certificates (PEM) a network call's programs trust beyond the system roots: the
    /// workspace's egress CA when the skill binds secrets, and `[egress] extra_roots`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_pem: Option<String>,
    /// The digest of the skill's built dependencies ([`crate::deps_build::DepsBuildParams::digest`]), when
    /// it has some: its programs find them (`bin/` first on `PATH`, packages importable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deps: Option<String>,
}

/// A script under a skill's `scripts/`, run by its shebang or extension with arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptRun {
    /// Its path in the skill folder (`scripts/...`).
    pub path: String,
    /// Its command-line arguments.
    #[serde(default)]
    pub args: Vec<String>,
}

/// `tool.execute` result: the call's [`ToolResult`].
pub type ToolExecuteResult = ToolResult;

/// One tool as `tool.list` and `GET /v1/tools` describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolInfo {
    /// `skill:tool`.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    /// Security level.
    pub security: Security,
}

/// `tool.list` params (none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolListParams {}

/// `tool.list` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolListResult {
    /// Every runnable tool.
    pub tools: Vec<ToolInfo>,
}

/// `skill.reload` params (none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillReloadParams {}

/// `skill.reload` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillReloadResult {
    /// Skills loaded.
    pub loaded: usize,
    /// Skills skipped, with reasons.
    pub skipped: Vec<String>,
}

/// `health` params (none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthParams {}

/// The `health` status of an executor that was told to stop: it refuses new
/// `tool.execute` requests with [`crate::jsonrpc::code::EXECUTOR_DRAINING`] and finishes the
/// calls it holds.
pub const HEALTH_DRAINING: &str = "draining";

/// `health` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthResult {
    /// `ok`, `degraded` (no kernel sandbox) or [`HEALTH_DRAINING`] (stopping: finishes the
    /// calls it holds, takes no new ones).
    pub status: String,
    /// Landlock ABI in force, 0 when none.
    pub landlock_abi: u32,
    /// Whether seccomp filters are applied.
    pub seccomp: bool,
    /// Calls in flight.
    pub in_flight: usize,
    /// What this executor's sandbox can start (absent from executors that predate it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxFacts>,
}

/// What a tool started by an executor would find: the OS and, for every program its skills
/// name (prerequisites and tool commands), whether the program is on the sandbox `PATH`.
/// Skill availability is judged from this, where the tools run, not from the core's host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxFacts {
    /// The OS in the prerequisites' words (`linux`, `darwin`, `win32`).
    pub os: String,
    /// The `PATH` tools run with.
    pub path: String,
    /// Program name → found as an executable file on `path`.
    pub programs: std::collections::BTreeMap<String, bool>,
    /// Whether the executor can give a call a network namespace of its own, which the
    /// programs of a skill that declares (or is granted) `permissions.network` reach the
    /// network through; without it they would get no network at all, so the core holds
    /// such skills unavailable, saying why. Absent (false) from executors that predate it.
    #[serde(default)]
    pub network_namespaces: bool,
    /// How the executor limits a call's memory: `cgroup_v2` or `cgroup_v1` (a memory
    /// cgroup per call: what its processes use), or `rlimit` (per process, with room for
    /// the address space runtimes reserve). Empty from executors that predate it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub memory_limit: String,
}

/// A capability callback from the executor to the core: the call it belongs to, the
/// token the core issued for it, and the tool's request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreCallbackParams<T> {
    /// The call id the core issued.
    pub call_id: String,
    /// The capability token the core issued with `tool.execute`.
    pub capability_token: SecretValue,
    /// The tool's request.
    pub request: T,
}

/// `runSkill` params: a tool of another skill, called for this call's skill (delegation,
/// docs/permissions.md). The child runs under its own permissions, within what is left of
/// this call's time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSkillParams {
    /// `skill:tool`.
    pub tool: String,
    /// Its arguments (absent: `{}`).
    #[serde(default)]
    pub args: Value,
}

/// `core.fetch` params.
pub type CoreFetchParams = CoreCallbackParams<FetchParams>;
/// `core.sign` params.
pub type CoreSignParams = CoreCallbackParams<SignParams>;
/// `core.readFile` params.
pub type CoreReadFileParams = CoreCallbackParams<ReadFileParams>;
/// `core.runSkill` params.
pub type CoreRunSkillParams = CoreCallbackParams<RunSkillParams>;
/// `core.contextFileRead` params.
pub type CoreContextFileReadParams = CoreCallbackParams<crate::workdir::ContextFileReadParams>;
/// `core.contextFileWrite` params.
pub type CoreContextFileWriteParams = CoreCallbackParams<crate::workdir::ContextFileWriteParams>;
/// `core.contextFileDelete` params.
pub type CoreContextFileDeleteParams = CoreCallbackParams<crate::workdir::ContextFileDeleteParams>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fetch_params_default_method_and_reject_unknown() {
        let p: FetchParams = serde_json::from_value(json!({"url": "https://a"})).unwrap();
        assert_eq!(p.method, "GET");
        assert!(serde_json::from_value::<FetchParams>(json!({"url": "x", "proxy": "y"})).is_err());
    }

    #[test]
    fn fetch_params_bounds_are_checked() {
        let mut p: FetchParams = serde_json::from_value(json!({"url": "https://a"})).unwrap();
        assert_eq!(p.check_bounds(), Ok(()));
        p.url = "x".repeat(MAX_URL_LEN + 1);
        assert!(matches!(
            p.check_bounds(),
            Err(ParamsBoundError::UrlTooLong { .. })
        ));
        p.url = "https://a".into();
        p.headers = (0..=MAX_HEADERS)
            .map(|i| (format!("h{i}"), "v".into()))
            .collect();
        assert!(matches!(
            p.check_bounds(),
            Err(ParamsBoundError::TooManyHeaders { .. })
        ));
    }

    #[test]
    fn sign_params_use_type_key() {
        let p: SignParams =
            serde_json::from_value(json!({"type": "transaction", "data": "AA=="})).unwrap();
        assert_eq!(p.kind, SignType::Transaction);
        assert!(
            serde_json::from_value::<SignParams>(json!({"type": "other", "data": ""})).is_err()
        );
    }

    #[test]
    fn secret_value_debug_is_masked() {
        let p = ToolExecuteParams {
            deps: None,
            trust_pem: None,
            call_id: "c".into(),
            capability_token: SecretValue("tok-123".into()),
            skill: "s".into(),
            tool: "t".into(),
            args: json!({}),
            env: [("API_KEY".to_string(), SecretValue("sk-live".into()))].into(),
            granted_env: Vec::new(),
            granted_network: Vec::new(),
            granted_max_file_mb: None,
            traceparent: None,
            workdir: None,
            script: None,
        };
        let dbg = format!("{p:?}");
        assert!(
            !dbg.contains("tok-123") && !dbg.contains("sk-live"),
            "{dbg}"
        );
    }

    #[test]
    fn core_callback_rejects_unknown_fields() {
        let v = json!({"call_id": "c", "capability_token": "t", "request": {"path": "a"}, "skill": "x"});
        assert!(serde_json::from_value::<CoreReadFileParams>(v).is_err());
    }
}

#[cfg(test)]
mod method_tests {
    use super::*;

    #[test]
    fn method_enums_parse_their_wire_names_and_nothing_else() {
        for m in ExecutorMethod::ALL {
            assert_eq!(ExecutorMethod::parse(m.as_str()), Some(*m));
        }
        assert_eq!(ExecutorMethod::parse("core.fetch"), None);
        assert_eq!(CoreMethod::parse("core.sign"), Some(CoreMethod::Sign));
        assert_eq!(CoreMethod::parse("sign"), None);
        assert_eq!(
            Capability::parse("readFile").map(Capability::core_method),
            Some(CoreMethod::ReadFile)
        );
        assert_eq!(
            ExecutorMethod::names(),
            "tool.execute, tool.list, skill.reload, health, session.exec, session.write, session.close, deps.build"
        );
    }
}
