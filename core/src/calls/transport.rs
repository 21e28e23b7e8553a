//! Where executor work runs: [`ExecutorTransport`], the one door of every piece of work
//! the core sends an executor — a dispatched tool call, a session's start, input and
//! close, a dependency build. The executor pool (the process sandbox of the executors)
//! implements all of it; the per-call container runner (`execution.sandbox: container`)
//! runs tool calls and sessions (a container per session, for its life) and refuses
//! dependency builds with the reason; tests put a fake in their place. A job that must
//! reach the holder of its state (a session's input, a build on each executor) names its
//! [`Placement`]; the others go where the transport picks.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use std::net::SocketAddr;

use skillbox_channel::client::{decode_result, encode_params, ClientError};
use skillbox_protocol::methods::{DepsBuildParams, DepsBuildResult, ToolExecuteParams};
use skillbox_protocol::result::ToolResult;
use skillbox_protocol::rpc::{
    DepsBuild, RpcMethod, SessionClose, SessionExec, SessionWrite, ToolExecute,
};
use skillbox_protocol::session::{
    SessionAnswer, SessionCloseParams, SessionCloseResult, SessionExecParams, SessionWriteParams,
};
use skillbox_protocol::skill::{Security, Skill};
use skillbox_protocol::workdir::WorkDir;

use super::CallError;
use crate::executors::docker::oneoff::ContainerRunner;
use crate::executors::pool::Resend;
use crate::executors::ExecutorPool;

/// A boxed future of a transport's answer.
pub type TransportFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ToolResult, CallError>> + Send + 'a>>;

/// An admitted call as a transport takes it: the skill, the admitted tool's security
/// (which decides whether it may be resent) and the `tool.execute` parameters.
#[derive(Debug)]
pub struct Dispatched {
    /// The skill the call runs under.
    pub skill: Arc<Skill>,
    /// The admitted tool's security level.
    pub security: Security,
    /// What the executor gets.
    pub params: ToolExecuteParams,
}

/// A boxed future of a job's answer.
pub type JobFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ClientError>> + Send + 'a>>;

/// Where a job goes that must reach the holder of its state: an executor of the pool (the
/// one holding a session, or one building in turn), or the container of one session.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Placement {
    /// An executor of the pool, by its address.
    Executor(SocketAddr),
    /// The per-call container that holds the session of this id.
    Container(String),
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Placement::Executor(addr) => write!(f, "{addr}"),
            Placement::Container(session) => write!(f, "the container of session {session}"),
        }
    }
}

impl Placement {
    /// The session a container holds; an executor's placement is not one (a job sent to
    /// the wrong transport).
    fn container(&self) -> Result<&str, ClientError> {
        match self {
            Placement::Container(session) => Ok(session),
            Placement::Executor(_) => Err(ClientError::Unreachable {
                url: self.to_string(),
                reason: "an executor of the pool, not a per-call container".into(),
            }),
        }
    }

    /// The executor's address; a container's placement is not one (a job sent to the wrong
    /// transport).
    fn executor(&self) -> Result<SocketAddr, ClientError> {
        match self {
            Placement::Executor(addr) => Ok(*addr),
            Placement::Container(_) => Err(ClientError::Unreachable {
                url: self.to_string(),
                reason: "held by a per-call container, not by an executor of the pool".into(),
            }),
        }
    }
}

/// Sends the core's work to executors (see the module docs).
pub trait ExecutorTransport: std::fmt::Debug + Send + Sync {
    /// Runs `call`; gives up after `timeout`.
    fn execute(&self, call: Dispatched, timeout: Duration) -> TransportFuture<'_>;

    /// Starts a command session under `skill`'s envelope (a skill with no folder for a
    /// session under none) where the transport picks; answers with where it runs.
    fn session_exec(
        &self,
        skill: Arc<Skill>,
        params: SessionExecParams,
        timeout: Duration,
    ) -> JobFuture<'_, (SessionAnswer, Placement)> {
        let _ = (skill, params, timeout);
        Box::pin(async { Err(no_sessions()) })
    }

    /// Input to (or a poll of) the session held `at`.
    fn session_write(
        &self,
        at: Placement,
        params: SessionWriteParams,
        timeout: Duration,
    ) -> JobFuture<'_, SessionAnswer> {
        let _ = (at, params, timeout);
        Box::pin(async { Err(no_sessions()) })
    }

    /// Ends sessions held `at`.
    fn session_close(
        &self,
        at: Placement,
        params: SessionCloseParams,
        timeout: Duration,
    ) -> JobFuture<'_, SessionCloseResult> {
        let _ = (at, params, timeout);
        Box::pin(async { Err(no_sessions()) })
    }

    /// Builds a skill's dependencies on the executor `at`.
    fn deps_build(
        &self,
        at: Placement,
        params: DepsBuildParams,
        timeout: Duration,
    ) -> JobFuture<'_, DepsBuildResult> {
        let _ = (at, params, timeout);
        Box::pin(async { Err(no_sessions()) })
    }

    /// The executors a job may be placed on now (a build runs on each of them).
    fn placements(&self) -> Vec<Placement> {
        Vec::new()
    }
}

/// The refusal of a transport that does not serve a kind of job (a fake; per-call
/// containers build no dependencies).
fn no_sessions() -> ClientError {
    ClientError::Unreachable {
        url: "transport".into(),
        reason: "this transport does not serve this job; dependency builds run on the \
                 executors' process sandbox"
            .into(),
    }
}

impl ExecutorTransport for ExecutorPool {
    /// A call of a `read` tool may be sent to another executor even when the first may
    /// have run it; any other tool's only when the first surely did not (draining, no
    /// connection): a `write` tool never runs twice.
    ///
    /// A context's list of files an executor may hold goes as its digest alone; an
    /// executor that does not hold it refuses before running anything, and the call goes
    /// again with the whole list.
    fn execute(&self, call: Dispatched, timeout: Duration) -> TransportFuture<'_> {
        Box::pin(async move {
            let resend = resend_for(call.security);
            let mut params = call.params;
            let withheld = (params.workdir.as_mut()).is_some_and(WorkDir::withhold_list_if_sent);
            let whole = || {
                let mut params = params.clone();
                params.workdir.as_mut().map(WorkDir::send_list_whole);
                encode_params::<ToolExecute>(&params)
            };
            let answer = (self.call_with_whole(
                ToolExecute::NAME,
                &params,
                withheld.then_some(&whole as _),
                timeout,
                resend,
            ))
            .await
            .and_then(decode_result::<ToolExecute>);
            answer.map_err(|e| CallError::from_pool(e, resend))
        })
    }

    fn session_exec(
        &self,
        _skill: Arc<Skill>,
        mut params: SessionExecParams,
        timeout: Duration,
    ) -> JobFuture<'_, (SessionAnswer, Placement)> {
        Box::pin(async move {
            let withheld = params.files.withhold_list_if_sent();
            let whole = || {
                let mut params = params.clone();
                params.files.send_list_whole();
                encode_params::<SessionExec>(&params)
            };
            let answer = self.call_method_placed::<SessionExec>(
                &params,
                withheld.then_some(&whole as _),
                timeout,
            );
            let (answer, addr) = answer.await?;
            Ok((answer, Placement::Executor(addr)))
        })
    }

    fn session_write(
        &self,
        at: Placement,
        params: SessionWriteParams,
        timeout: Duration,
    ) -> JobFuture<'_, SessionAnswer> {
        Box::pin(async move {
            self.call_method_at::<SessionWrite>(at.executor()?, &params, timeout)
                .await
        })
    }

    fn session_close(
        &self,
        at: Placement,
        params: SessionCloseParams,
        timeout: Duration,
    ) -> JobFuture<'_, SessionCloseResult> {
        Box::pin(async move {
            self.call_method_at::<SessionClose>(at.executor()?, &params, timeout)
                .await
        })
    }

    fn deps_build(
        &self,
        at: Placement,
        params: DepsBuildParams,
        timeout: Duration,
    ) -> JobFuture<'_, DepsBuildResult> {
        Box::pin(async move {
            self.call_method_at::<DepsBuild>(at.executor()?, &params, timeout)
                .await
        })
    }

    fn placements(&self) -> Vec<Placement> {
        self.healthy_addrs()
            .into_iter()
            .map(Placement::Executor)
            .collect()
    }
}

/// How a call of a tool of `security` may be resent: [`Resend::AlsoDelivered`] only for a
/// `read` tool.
pub fn resend_for(security: Security) -> Resend {
    match security {
        Security::Read => Resend::AlsoDelivered,
        Security::Write | Security::Sign => Resend::OnlyUndelivered,
    }
}

/// The per-call container runner as a transport.
#[derive(Debug, Clone)]
pub struct Containers(pub Arc<ContainerRunner>);

impl ExecutorTransport for Containers {
    fn execute(&self, call: Dispatched, timeout: Duration) -> TransportFuture<'_> {
        Box::pin(async move { Ok(self.0.run(call.skill, call.params, timeout).await?) })
    }

    /// A container for the session, kept while it runs; it ends with the session.
    fn session_exec(
        &self,
        skill: Arc<Skill>,
        params: SessionExecParams,
        timeout: Duration,
    ) -> JobFuture<'_, (SessionAnswer, Placement)> {
        Box::pin(async move {
            let session = params.session_id.clone();
            let answer = self.0.start_session(skill, params, timeout).await?;
            Ok((answer, Placement::Container(session)))
        })
    }

    fn session_write(
        &self,
        at: Placement,
        params: SessionWriteParams,
        timeout: Duration,
    ) -> JobFuture<'_, SessionAnswer> {
        Box::pin(async move {
            let session = at.container()?;
            let value = self
                .0
                .session_request(session, SessionWrite::NAME, &params, timeout);
            decode_result::<SessionWrite>(value.await?)
        })
    }

    /// Closes the session and removes its container.
    fn session_close(
        &self,
        at: Placement,
        params: SessionCloseParams,
        timeout: Duration,
    ) -> JobFuture<'_, SessionCloseResult> {
        Box::pin(async move {
            let session = at.container()?;
            let value = self
                .0
                .session_request(session, SessionClose::NAME, &params, timeout);
            let closed = decode_result::<SessionClose>(value.await?);
            self.0.end_session(session).await;
            closed
        })
    }
}

/// A transport for tests: answers every call with `answer(params)`.
#[cfg(test)]
pub struct Fake<F>(pub F);

#[cfg(test)]
impl<F> std::fmt::Debug for Fake<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fake")
    }
}

#[cfg(test)]
impl<F> ExecutorTransport for Fake<F>
where
    F: Fn(&ToolExecuteParams) -> Result<ToolResult, CallError> + Send + Sync,
{
    fn execute(&self, call: Dispatched, _timeout: Duration) -> TransportFuture<'_> {
        let answer = (self.0)(&call.params);
        Box::pin(async move { answer })
    }
}
