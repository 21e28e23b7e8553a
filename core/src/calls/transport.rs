//! Where a dispatched call runs: [`ExecutorTransport`], implemented by the executor pool
//! (the process sandbox of the executors) and by the per-call container runner
//! (`execution.sandbox: container`); tests put a fake in their place.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use skillbox_protocol::methods::{method, ToolExecuteParams};
use skillbox_protocol::result::ToolResult;
use skillbox_protocol::skill::Skill;

use super::CallError;
use crate::executors::docker::oneoff::ContainerRunner;
use crate::executors::ExecutorPool;

/// A boxed future of a transport's answer.
pub type TransportFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ToolResult, CallError>> + Send + 'a>>;

/// Runs one `tool.execute` and returns the tool's result.
pub trait ExecutorTransport: std::fmt::Debug + Send + Sync {
    /// Runs `params` (a call of a tool of `skill`); gives up after `timeout`.
    fn execute(
        &self,
        skill: Arc<Skill>,
        params: ToolExecuteParams,
        timeout: Duration,
    ) -> TransportFuture<'_>;
}

impl ExecutorTransport for ExecutorPool {
    fn execute(
        &self,
        _skill: Arc<Skill>,
        params: ToolExecuteParams,
        timeout: Duration,
    ) -> TransportFuture<'_> {
        Box::pin(async move {
            let params =
                serde_json::to_value(params).map_err(|e| CallError::BadAnswer(e.to_string()))?;
            let answer = self
                .call(method::TOOL_EXECUTE, params, timeout)
                .await
                .map_err(CallError::from_client)?;
            serde_json::from_value::<ToolResult>(answer)
                .map_err(|e| CallError::BadAnswer(e.to_string()))
        })
    }
}

/// The per-call container runner as a transport.
#[derive(Debug, Clone)]
pub struct Containers(pub Arc<ContainerRunner>);

impl ExecutorTransport for Containers {
    fn execute(
        &self,
        skill: Arc<Skill>,
        params: ToolExecuteParams,
        timeout: Duration,
    ) -> TransportFuture<'_> {
        Box::pin(async move { Ok(self.0.run(skill, params, timeout).await?) })
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
    fn execute(
        &self,
        _skill: Arc<Skill>,
        params: ToolExecuteParams,
        _timeout: Duration,
    ) -> TransportFuture<'_> {
        let answer = (self.0)(&params);
        Box::pin(async move { answer })
    }
}
