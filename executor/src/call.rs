//! One tool call, from `tool.execute` params to a [`ToolResult`]: look up the tool,
//! validate the arguments before anything is spawned, prepare the sandbox (for a network
//! call, its namespace and the relay of its connections, [`crate::egress`]), run the stdio
//! protocol under the timeout and output budget, end every process, and say which limit
//! or rule ended the call.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use skillbox_protocol::methods::ToolExecuteParams;
use skillbox_protocol::result::ToolResult;
use skillbox_protocol::skill::ToolProtocol;
use tracing::Instrument;

use crate::broker::CapabilityBroker;
use crate::call_clock::CallClock;
pub use crate::call_error::CallError;
use crate::exit_cause::{
    exit_failure, last_line, memory_exhausted, memory_line, CallLimits, FILE_TOO_LARGE,
};
use crate::launch::{self, Network, Plan};
use crate::registry::{LockRefusal, Registry};
use crate::sandbox;
use crate::sandbox::Sandbox;
use crate::script;
use crate::stdio::output::{self, Budget, StderrLog};
use crate::stdio::{jsonrpc, StdioFailure};
use crate::workdir;

/// Runs one call that arrived at the executor's handler at `arrived`, and reports it with
/// its stages; never panics on tool behaviour.
pub async fn execute<B: CapabilityBroker>(
    sandbox: &Sandbox,
    registry: &Registry,
    broker: &B,
    params: ToolExecuteParams,
    arrived: Instant,
) -> ToolResult {
    let started = Instant::now();
    let call_id = params.call_id.clone();
    // Every log line of the call carries its id and the bot's trace context, if it sent one.
    // At error level so that the span (and its fields) exists under any log filter that
    // lets the call's warnings through.
    let span = tracing::error_span!(
        "call",
        call_id = %call_id,
        traceparent = %params.traceparent.as_deref().unwrap_or_default()
    );
    let mut clock = CallClock::default();
    let outcome = run(sandbox, registry, broker, params, &mut clock)
        .instrument(span.clone())
        .await;
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut result = match outcome {
        Ok(data) => ToolResult::ok(call_id, data, ms),
        Err(e) => {
            span.in_scope(|| tracing::warn!(error_kind = %e.kind(), reason = %e, "tool call refused or failed"));
            ToolResult::failed(call_id, e.kind(), e.to_string(), ms)
        }
    };
    result.spawn_us = clock.spawned.map(|at| {
        u64::try_from(at.saturating_duration_since(started).as_micros()).unwrap_or(u64::MAX)
    });
    result.stages = Some(clock.stages(arrived, started));
    result
}

async fn run<B: CapabilityBroker>(
    sandbox: &Sandbox,
    registry: &Registry,
    broker: &B,
    params: ToolExecuteParams,
    clock: &mut CallClock,
) -> Result<Value, CallError> {
    let registered =
        registry
            .skill(&params.skill)
            .ok_or_else(|| match registry.refusal(&params.skill) {
                Some(LockRefusal::Changed(reason)) => CallError::Changed(reason.clone()),
                Some(LockRefusal::LockUnreadable(reason)) => {
                    CallError::LockUnreadable(reason.clone())
                }
                None => CallError::NotFound(format!(
                    "no skill named {:?} in {}",
                    params.skill,
                    registry.describe_roots()
                )),
            })?;
    let skill = &registered.skill;
    let script_tool;
    let tool = match &params.script {
        Some(run) => {
            script_tool = script::script_tool(skill, run)?;
            &script_tool
        }
        None => {
            let (tool, validator) = registered.tool(&params.tool).ok_or_else(|| {
                CallError::NotFound(format!(
                    "skill {:?} has no tool {:?}",
                    skill.name, params.tool
                ))
            })?;
            let problems: Vec<String> = validator
                .iter_errors(&params.args)
                .take(5)
                .map(|e| schema_problem(&e))
                .collect();
            if !problems.is_empty() {
                return Err(CallError::InvalidArgs(problems.join("; ")));
            }
            tool
        }
    };
    let is_script = params.script.is_some();
    // The skill's built dependencies, which must be on this executor.
    let deps = match &params.envelope.deps {
        Some(digest) => Some(
            crate::deps::DepsDir::for_call(sandbox, &skill.name, digest)
                .map_err(|e| CallError::Unavailable(e.to_string()))?,
        ),
        None => None,
    };
    let plan = Plan::tool(
        &params,
        skill,
        tool,
        sandbox.node_runner(),
        deps.map(|d| d.path),
    );
    let timeout_ms = plan.timeout_ms;
    let limits = CallLimits {
        memory_mb: plan.memory_mb,
        max_file_mb: plan.max_file_mb,
    };
    let plain_args = plan.args.clone();
    let call = plan.call.clone();
    // A prestarted process has no per-call env values and runs in the skill folder: a
    // call that carries some, runs in a context or needs a namespace of its own starts
    // cold.
    let has_values = (params.envelope.env.keys())
        .any(|n| launch::may_receive(skill, &params.envelope.granted_env, n));
    let cold_only = has_values
        || plan.max_file_mb != skill.execution.max_file_mb
        || plan.work.is_some()
        || is_script
        || plan.network != Network::None
        || plan.deps.is_some();
    let warm = if skill.execution.prestart > 0 && !cold_only {
        registry.warm().take(sandbox, &registered, tool)
    } else {
        None
    };
    let mut baseline = None;
    let mut listener = None;
    let (mut child, guard) = match warm {
        Some(warm) => {
            if let Some(args) = &plain_args {
                let written = sandbox::write_args_file(
                    warm.guard.scratch(),
                    args.as_bytes(),
                    warm.guard.uid(),
                );
                if let Err(e) = written {
                    warm.end();
                    return Err(CallError::Sandbox(format!(
                        "cannot write the arguments file of a prestarted tool: {e}"
                    )));
                }
            }
            (warm.child, warm.guard)
        }
        None => {
            let launched = launch::launch(sandbox, broker, plan).await?;
            listener = launched.listener;
            baseline = launched.baseline;
            (launched.child, launched.guard)
        }
    };
    clock.spawned = Some(Instant::now());
    let budget = Budget::new(skill.execution.max_output_bytes);
    let log = Arc::new(Mutex::new(StderrLog::default()));
    let mut stderr_task = child.stderr.take().map(|s| {
        tokio::spawn(output::drain_stderr(
            s,
            Arc::clone(&budget),
            Arc::clone(&log),
        ))
    });
    let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
    let conversation = async {
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            return Err(CallError::Sandbox("tool stdio was not piped".into()));
        };
        match tool.protocol {
            ToolProtocol::Jsonrpc => {
                let answer =
                    jsonrpc::converse(stdin, stdout, &call, &params.args, broker, &budget).await;
                match answer {
                    Ok(Ok(v)) => Ok(Ok(v)),
                    // A tool that caught its allocation failure and reported it was
                    // stopped by the memory limit all the same.
                    Ok(Err(e)) if memory_exhausted(&e.message) => Ok(Err(CallError::Memory(
                        limits.memory_mb,
                        format!(
                            "; the tool reported error {}: {}",
                            e.code,
                            last_line(&e.message)
                        ),
                    ))),
                    Ok(Err(e)) => Ok(Err(CallError::Tool(format!(
                        "the tool reported error {}: {}",
                        e.code, e.message
                    )))),
                    Err(StdioFailure::OutputLimit) => Err(CallError::Output(budget.max())),
                    Err(StdioFailure::Protocol(m)) => Ok(Err(CallError::Protocol(m))),
                    Err(StdioFailure::Eof) => {
                        let status = child.wait().await.ok();
                        wait_for_stderr(stderr_task.as_mut(), &budget).await;
                        Err(exit_failure(status, &log, limits, true))
                    }
                }
            }
            ToolProtocol::Plain => {
                // Written while stdout is read: a tool may answer before it has read all of
                // a large argument (or never read it), and neither side may block the other.
                // Arguments that fit the pipe's buffer (most) go in at once with one
                // non-blocking write, straight to the fd (the runtime does not know the new
                // pipe is writable yet), and stdin closes with the unused closure below;
                // only the rest of a larger one needs a task of its own.
                let input = plain_args.clone().unwrap_or_default();
                let written = nix::unistd::write(&stdin, input.as_bytes()).unwrap_or(0);
                let writer = (written < input.len()).then(|| {
                    let mut stdin = stdin;
                    tokio::spawn(async move {
                        let rest = &input.as_bytes()[written..];
                        let _ = tokio::io::AsyncWriteExt::write_all(&mut stdin, rest).await;
                    })
                });
                let out = output::read_all(stdout, &budget)
                    .await
                    .ok_or(CallError::Output(budget.max()))?;
                if let Some(writer) = writer {
                    writer.abort();
                }
                let status = child.wait().await.ok();
                wait_for_stderr(stderr_task.as_mut(), &budget).await;
                if budget.is_exceeded() {
                    return Err(CallError::Output(budget.max()));
                }
                let code = status.and_then(|s| s.code());
                if code.is_none() {
                    return Err(exit_failure(status, &log, limits, false));
                }
                let stderr = log.lock().map(|l| l.tail()).unwrap_or_default();
                let result = json!({
                    "stdout": String::from_utf8_lossy(&out),
                    "stderr": stderr,
                    "exit_code": code,
                });
                Ok(if code == Some(0) {
                    Ok(result)
                } else if stderr.contains(FILE_TOO_LARGE) {
                    // Python, for one, ignores SIGXFSZ and exits 1 on the EFBIG.
                    Err(CallError::FileSize(limits.max_file_mb))
                } else if memory_exhausted(&stderr) {
                    // Python, for one, exits 1 on an uncaught MemoryError.
                    Err(CallError::Memory(
                        limits.memory_mb,
                        format!("; stderr: {}", memory_line(&stderr)),
                    ))
                } else if is_script {
                    Err(CallError::Tool(script::failure_message(
                        code.unwrap_or(-1),
                        &out,
                        &stderr,
                    )))
                } else {
                    Err(CallError::Tool(format!(
                        "exited with code {}: {}",
                        code.unwrap_or(-1),
                        last_line(&stderr)
                    )))
                })
            }
        }
    };
    let guarded = async {
        tokio::select! {
            r = conversation => r,
            _ = budget.exceeded.notified() => Err(CallError::Output(budget.max())),
        }
    };
    // The proxy port's connections are carried while the call runs and dropped with it.
    let guarded = launch::relay_while(listener, broker, &call, guarded);
    let outcome = match tokio::time::timeout(Duration::from_millis(timeout_ms), guarded).await {
        Ok(Ok(inner)) => inner,
        Ok(Err(e)) => Err(e),
        Err(_) => Err(CallError::Timeout(timeout_ms)),
    };
    clock.answered = Some(Instant::now());
    let _ = child.start_kill();
    // The tool is not reaped yet (waiting above only observed its exit), so its pid and
    // process group id are still its own.
    guard.kill_now(child.id());
    let _ = child.wait().await;
    // Reaped before the release, so that a call that left nothing behind needs no kill
    // helper there (the tool itself would still count as a process of the call's user).
    child.reap();
    let outcome = oom_as_memory_limit(outcome, &guard, limits.memory_mb);
    let outcome = match (&params.workdir, &mut baseline) {
        (Some(limits), Some(baseline)) => {
            let work = guard.scratch().join(sandbox::WORK_DIR);
            let report = workdir::sync_back(broker, &call, &work, limits, baseline).await;
            match (outcome, report.failure()) {
                (Ok(_), Some((kind, message))) => Err(CallError::Files(kind, message)),
                (outcome, _) => outcome,
            }
        }
        _ => outcome,
    };
    guard.release();
    if let Some(task) = stderr_task {
        task.abort();
    }
    outcome
}

/// A call that failed while the kernel's OOM killer killed one of its processes (its
/// memory cgroup counted the kill) was stopped by the memory limit, whatever the tool
/// made of it: killed by SIGKILL, or a script whose child was killed exiting non-zero.
fn oom_as_memory_limit(
    outcome: Result<Value, CallError>,
    guard: &sandbox::CallGuard,
    memory_mb: u64,
) -> Result<Value, CallError> {
    match outcome {
        Err(CallError::Tool(why) | CallError::Protocol(why)) if guard.oom_killed() => {
            Err(CallError::Memory(
                memory_mb,
                format!("; the kernel killed a process of the call for it ({why})"),
            ))
        }
        other => other,
    }
}

/// Longest wait for the stderr reader after the tool exited (a grandchild may keep the
/// pipe open; it dies with the call anyway).
const STDERR_DRAIN_WAIT: Duration = Duration::from_millis(200);

/// Waits, bounded, until the stderr reader has seen the end of the stream (or stopped at
/// the output budget). Awaits the reader itself: no polling, so a tool that exits with its
/// stderr closed is reported as soon as the reader sees the end.
async fn wait_for_stderr(task: Option<&mut tokio::task::JoinHandle<()>>, budget: &Budget) {
    let Some(task) = task else { return };
    if budget.is_exceeded() || task.is_finished() {
        return;
    }
    let _ = tokio::time::timeout(STDERR_DRAIN_WAIT, task).await;
}

/// The longest rendering of a refused argument value that an error message echoes.
const MAX_ECHOED_VALUE_CHARS: usize = 200;

/// One schema violation for the caller: the rule it broke, the offending value shortened to
/// [`MAX_ECHOED_VALUE_CHARS`] (a 20 KB string is not repeated back), and where it sits.
fn schema_problem(e: &jsonschema::ValidationError<'_>) -> String {
    let value = e.instance().to_string();
    let chars = value.chars().count();
    let shown = if chars > MAX_ECHOED_VALUE_CHARS {
        let head: String = value.chars().take(MAX_ECHOED_VALUE_CHARS).collect();
        format!("{head}… ({chars} characters)")
    } else {
        value
    };
    let path = e.instance_path().to_string();
    let at = if path.is_empty() {
        "at the top level".to_string()
    } else {
        format!("at {path}")
    };
    format!("{} {at}", e.masked_with(shown))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(schema: Value, args: Value) -> Vec<String> {
        let validator = jsonschema::validator_for(&schema).unwrap();
        validator
            .iter_errors(&args)
            .map(|e| schema_problem(&e))
            .collect()
    }

    #[test]
    fn schema_error_caps_a_huge_value_and_names_its_path() {
        let schema = json!({"type": "object", "properties": {"text": {"maxLength": 10}}});
        let huge = "a".repeat(20_000);
        let p = problems(schema, json!({"text": huge}));
        assert_eq!(p.len(), 1, "{p:?}");
        let msg = &p[0];
        assert!(msg.len() < 400, "{} bytes: {msg}", msg.len());
        assert!(msg.contains("(20002 characters)"), "{msg}");
        assert!(msg.contains("longer than 10 characters"), "{msg}");
        assert!(msg.ends_with("at /text"), "{msg}");
    }

    #[test]
    fn schema_error_at_the_root_says_top_level() {
        let p = problems(json!({"type": "object"}), json!([1, 2]));
        assert_eq!(p, ["[1,2] is not of type \"object\" at the top level"]);
    }
}
