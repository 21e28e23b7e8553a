//! Where a dispatched call runs: [`ExecutorTransport`], implemented by the executor pool
//! (the process sandbox of the executors) and by the per-call container runner
//! (`execution.sandbox: container`); tests put a fake in their place.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use skillbox_protocol::methods::ToolExecuteParams;
use skillbox_protocol::result::ToolResult;
use skillbox_protocol::rpc::ToolExecute;
use skillbox_protocol::skill::{Security, Skill};

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

/// Runs one `tool.execute` and returns the tool's result.
pub trait ExecutorTransport: std::fmt::Debug + Send + Sync {
    /// Runs `call`; gives up after `timeout`.
    fn execute(&self, call: Dispatched, timeout: Duration) -> TransportFuture<'_>;
}

impl ExecutorTransport for ExecutorPool {
    /// A call of a `read` tool may be sent to another executor even when the first may
    /// have run it; any other tool's only when the first surely did not (draining, no
    /// connection): a `write` tool never runs twice.
    fn execute(&self, call: Dispatched, timeout: Duration) -> TransportFuture<'_> {
        Box::pin(async move {
            let resend = resend_for(call.security);
            self.call_method::<ToolExecute>(&call.params, timeout, resend)
                .await
                .map_err(|e| CallError::from_pool(e, resend))
        })
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
