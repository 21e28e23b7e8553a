//! The name of every JSON-RPC method skillbox speaks, and the params and results of each
//! under one path.
//!
//! Tool stdio (docs/skill-format.md): `tool.invoke` from the executor to the tool, and the
//! capability requests `fetch`, `sign`, `readFile`, `runSkill` from the tool
//! ([`crate::capability`]). Core ↔ executor (docs/architecture.md): `tool.execute`
//! ([`crate::execute`], carrying an [`Envelope`]), `tool.list`, `skill.reload`, `health`
//! ([`crate::status`]), `session.*` ([`crate::session`]), `deps.build`
//! ([`crate::deps_build`]) one way and `core.fetch`, `core.sign`, `core.readFile`,
//! `core.runSkill`, `core.contextFile*` the other. Every struct rejects unknown fields.

pub use crate::capability::{
    CoreCallbackParams, CoreContextFileDeleteParams, CoreContextFileReadParams,
    CoreContextFileWriteParams, CoreFetchParams, CoreReadFileParams, CoreRunSkillParams,
    CoreSignParams, FetchParams, FetchResult, ParamsBoundError, ReadFileParams, ReadFileResult,
    RunSkillParams, SignParams, SignResult, SignType, ToolInvokeParams, MAX_HEADERS, MAX_URL_LEN,
};
pub use crate::deps_build::{
    DepsBuildParams, DepsBuildResult, Ecosystem, LockedPackage, NodeBuild,
};
pub use crate::envelope::{Envelope, SecretValue};
pub use crate::execute::{ScriptRun, ToolExecuteParams, ToolExecuteResult};
pub use crate::status::{
    HealthParams, HealthResult, SandboxFacts, SkillReloadParams, SkillReloadResult, ToolInfo,
    ToolListParams, ToolListResult, HEALTH_DRAINING,
};

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
