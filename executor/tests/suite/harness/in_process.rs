//! One tool call run in this process, through `call::execute` on a test's own `Sandbox` and
//! `Registry` (the way the daemon runs calls), for tests that drive several calls on one
//! executor.

use serde_json::Value;
use skillbox_executor::broker::OneShotBroker;
use skillbox_executor::call;
use skillbox_executor::registry::Registry;
use skillbox_executor::sandbox::Sandbox;
use skillbox_protocol::methods::{Envelope, SecretValue, ToolExecuteParams};

/// Runs `skill:tool` with `args` as call `call_id`; the result as JSON.
pub async fn execute(
    sandbox: &Sandbox,
    registry: &Registry,
    (skill, tool): (&str, &str),
    call_id: &str,
    args: Value,
) -> Value {
    let params = ToolExecuteParams {
        call_id: call_id.to_string(),
        capability_token: SecretValue(String::new()),
        skill: skill.to_string(),
        tool: tool.to_string(),
        args,
        envelope: Envelope::default(),
        traceparent: None,
        workdir: None,
        script: None,
    };
    let started = std::time::Instant::now();
    let result = call::execute(sandbox, registry, &OneShotBroker, params, started).await;
    serde_json::to_value(&result).unwrap()
}
