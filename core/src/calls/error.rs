//! Why a call did not reach its tool, or did not come back: one enum whose variants name
//! the step that failed, and whose [`CallError::kind`] is the only place a failure of the
//! pipeline becomes an `error_kind` (and, through it, an HTTP status or JSON-RPC code).

use skillbox_channel::client::ClientError;
use skillbox_protocol::jsonrpc::code;
use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::ToolRefError;

use crate::approvals::ApprovalError;
use crate::executors::docker::oneoff::OneOffError;
use crate::executors::pool::Resend;
use crate::random::RandomError;

/// A failure of the call pipeline.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The tool name is not `skill:tool`.
    #[error(transparent)]
    NotAToolName(#[from] ToolRefError),
    /// The caller may not use the skill (a bot token limited to other skills).
    #[error("{0}")]
    NotPermitted(String),
    /// The call's context does not let the tool run (not among its active tools).
    #[error("{0}")]
    NotInContext(String),
    /// The caller may not enter the call's context, or the context could not be read.
    #[error(transparent)]
    Context(#[from] crate::contexts::ContextError),
    /// A built-in tool (`load_skill`, `run_skill_script`) refused its arguments.
    #[error(transparent)]
    Disclosure(#[from] crate::contexts::disclosure::DisclosureError),
    /// A command-session built-in refused or failed, with its kind.
    #[error("{message}")]
    Builtin {
        /// The kind the caller sees.
        kind: ErrorKind,
        /// What happened and what to do.
        message: String,
    },
    /// A blocking step of the call's gate panicked or was cancelled.
    #[error("the call's context could not be read ({0}); retry")]
    Task(String),
    /// No skill of that name.
    #[error("no skill named {0:?}")]
    NoSuchSkill(String),
    /// The trust policy disabled the skill.
    #[error("skill {skill:?} is disabled by the trust policy: {why}")]
    Disabled {
        /// The skill.
        skill: String,
        /// The policy's reason.
        why: String,
    },
    /// The skill has no tool of that name.
    #[error("skill {skill:?} has no tool {tool:?}")]
    NoSuchTool {
        /// The skill.
        skill: String,
        /// The tool asked for.
        tool: String,
    },
    /// The skill cannot run now (a program, the OS, an env value).
    #[error("skill {skill:?} is unavailable: {reason}")]
    Unavailable {
        /// The skill.
        skill: String,
        /// Why ([`crate::executors::readiness::context_readiness`]).
        reason: String,
    },
    /// The approval was denied, timed out, or could not be asked for.
    #[error(transparent)]
    Approval(#[from] ApprovalError),
    /// No capability token could be drawn.
    #[error(transparent)]
    Random(#[from] RandomError),
    /// A container-sandbox skill and no Docker engine.
    #[error(
        "skill {0:?} asks for execution.sandbox: container and the core has no Docker engine; \
         give the core the Docker socket ([docker] socket) or change the skill's sandbox"
    )]
    NoContainerEngine(String),
    /// The per-call container failed.
    #[error(transparent)]
    Container(#[from] OneOffError),
    /// The executor refused the request itself.
    #[error("the executor refused the call: {0}")]
    ExecutorRefused(String),
    /// The executor's answer is not a tool result.
    #[error("the executor's answer is not a tool result: {0}")]
    BadAnswer(String),
    /// The executor did not answer in time.
    #[error("{0}")]
    ExecutorTimeout(ClientError),
    /// No executor could be reached, or the connection broke.
    #[error("the executor is unavailable ({0}); the call did not complete, retry once it is back")]
    ExecutorUnavailable(ClientError),
    /// Every executor tried refused the call as draining (stopping); nothing of it ran.
    #[error("every executor asked is draining (stopping) and none ran the call ({0}); retry once a new executor answers")]
    ExecutorDraining(String),
    /// The connection broke after the request of a tool that must not run twice was sent:
    /// it may have run, so it was not sent to another executor.
    #[error(
        "the connection to the executor broke after the call was sent ({0}); the tool may have \
         run, so it was not sent again (only `read` tools are): check its effect before retrying"
    )]
    MayHaveRun(ClientError),
}

impl From<crate::contexts::delegation::DelegationError> for CallError {
    fn from(e: crate::contexts::delegation::DelegationError) -> Self {
        use crate::contexts::delegation::DelegationError;
        match e {
            DelegationError::Skill(e) => CallError::Disclosure(e),
            DelegationError::Context(e) => CallError::Context(e),
            other => CallError::NotPermitted(other.to_string()),
        }
    }
}

impl CallError {
    /// The `error_kind` a caller sees.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CallError::NotAToolName(_)
            | CallError::NoSuchSkill(_)
            | CallError::NoSuchTool { .. } => ErrorKind::NotFound,
            CallError::Disabled { .. }
            | CallError::NotPermitted(_)
            | CallError::NotInContext(_) => ErrorKind::PermissionDenied,
            CallError::Context(e) => e.error_kind(),
            CallError::Disclosure(e) => e.error_kind(),
            CallError::Task(_) => ErrorKind::Unavailable,
            CallError::Builtin { kind, .. } => *kind,
            CallError::Unavailable { .. }
            | CallError::Random(_)
            | CallError::NoContainerEngine(_)
            | CallError::ExecutorUnavailable(_)
            | CallError::ExecutorDraining(_)
            | CallError::MayHaveRun(_) => ErrorKind::Unavailable,
            CallError::Approval(e) => e.error_kind(),
            CallError::Container(e) => e.error_kind(),
            CallError::ExecutorRefused(_) | CallError::BadAnswer(_) => ErrorKind::Protocol,
            CallError::ExecutorTimeout(_) => ErrorKind::Timeout,
        }
    }

    /// The error of an executor request that failed.
    pub fn from_client(e: ClientError) -> Self {
        match e {
            e @ ClientError::Typed { .. } => CallError::BadAnswer(e.to_string()),
            ClientError::Rpc(e) if e.code == code::EXECUTOR_DRAINING => {
                CallError::ExecutorDraining(e.message)
            }
            ClientError::Rpc(e) => CallError::ExecutorRefused(e.message),
            e @ ClientError::Timeout { .. } => CallError::ExecutorTimeout(e),
            e => CallError::ExecutorUnavailable(e),
        }
    }

    /// The error of a session request the executor answered with a JSON-RPC error: its
    /// message, and the kind its `data.kind` names, else its code's (`tool_error` when
    /// neither says).
    pub fn from_session(e: ClientError) -> Self {
        match e {
            ClientError::Rpc(o) if o.code != code::EXECUTOR_DRAINING => {
                let by_code = match o.code {
                    code::SESSION_NOT_FOUND => ErrorKind::NotFound,
                    code::RESOURCE_LIMIT => ErrorKind::ResourceLimit,
                    code::INVALID_PARAMS => ErrorKind::InvalidArgs,
                    code::CAPABILITY_UNAVAILABLE => ErrorKind::Unavailable,
                    _ => ErrorKind::ToolError,
                };
                let kind = o
                    .data
                    .as_ref()
                    .and_then(|d| d.get("kind"))
                    .and_then(|k| serde_json::from_value::<ErrorKind>(k.clone()).ok())
                    .unwrap_or(by_code);
                CallError::Builtin {
                    kind,
                    message: o.message,
                }
            }
            e => CallError::from_pool(e, Resend::OnlyUndelivered),
        }
    }

    /// The error of a `tool.execute` the pool gave up on, sent under `resend`: a broken
    /// connection after sending is [`CallError::MayHaveRun`] when the call was not resent
    /// (the pool answers `Connect`, never `Unreachable`, when it sent nothing).
    pub fn from_pool(e: ClientError, resend: Resend) -> Self {
        match e {
            e @ (ClientError::Unreachable { .. } | ClientError::BadAnswer { .. })
                if resend == Resend::OnlyUndelivered =>
            {
                CallError::MayHaveRun(e)
            }
            e => CallError::from_client(e),
        }
    }
}
