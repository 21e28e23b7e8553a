//! One tool call, from `tool.execute` params to a [`ToolResult`]: look up the tool,
//! validate the arguments before anything is spawned, prepare the sandbox (for a network
//! call, its namespace and the relay of its connections, [`crate::egress`]), run the stdio
//! protocol under the timeout and output budget, end every process, and say which limit
//! or rule ended the call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use skillbox_protocol::methods::ToolExecuteParams;
use skillbox_protocol::result::ToolResult;
use skillbox_protocol::skill::{Skill, Tool};
use skillbox_protocol::workdir::WorkDir;
use tracing::Instrument;

use crate::broker::{CallInfo, CapabilityBroker};
use crate::call_clock::CallClock;
pub use crate::call_error::CallError;
use crate::exit_cause::CallLimits;
use crate::launch::{self, Launched, Network, Plan};
use crate::registry::{LockRefusal, RegisteredSkill, Registry};
use crate::sandbox::{self, Sandbox};
use crate::script;
use crate::stdio::output::Budget;
use crate::warm::WarmProcess;
use crate::workdir;

mod converse;

use converse::{Request, Stderr, Talk};

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
    // The trace context only when the bot sent one: the fields are formatted when the
    // span is made, on every call.
    let span = tracing::error_span!(
        "call",
        call_id = %call_id,
        traceparent = tracing::field::Empty
    );
    if let Some(trace) = params.traceparent.as_deref() {
        span.record("traceparent", tracing::field::display(trace));
    }
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

/// The call's steps: the skill found and the tool's arguments checked, the tool started
/// warm or cold, the conversation under the timeout, the end ([`finish`]).
async fn run<B: CapabilityBroker>(
    sandbox: &Sandbox,
    registry: &Registry,
    broker: &B,
    params: ToolExecuteParams,
    clock: &mut CallClock,
) -> Result<Value, CallError> {
    let registered = find_skill(registry, &params.skill)?;
    let skill = &registered.skill;
    let script_tool;
    let tool = match &params.script {
        Some(run) => {
            script_tool = script::script_tool(skill, run)?;
            &script_tool
        }
        None => checked_tool(&registered, &params)?,
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
    let warm = if skill.execution.prestart > 0 && !starts_cold(&params, skill, &plan) {
        registry.warm().take(sandbox, &registered, tool)
    } else {
        None
    };
    let mut started = start(sandbox, broker, warm, plan, plain_args.as_deref()).await?;
    clock.spawned = Some(Instant::now());
    let budget = Budget::new(skill.execution.max_output_bytes);
    let mut stderr = Stderr::drain(&mut started.child, &budget);
    let (stdin, stdout) = (started.child.stdin.take(), started.child.stdout.take());
    let talk = Talk {
        child: &mut started.child,
        stderr: &mut stderr,
        budget: &budget,
        limits,
    };
    let request = Request {
        protocol: tool.protocol,
        call: &call,
        args: &params.args,
        plain_args,
        is_script,
    };
    let conversation = talk.converse(stdin, stdout, request, broker);
    // The proxy port's connections are carried while the call runs and dropped with it.
    let guarded = launch::relay_while(started.listener.take(), broker, &call, conversation);
    let outcome = match tokio::time::timeout(Duration::from_millis(timeout_ms), guarded).await {
        Ok(outcome) => outcome,
        Err(_) => Err(CallError::Timeout(timeout_ms)),
    };
    clock.answered = Some(Instant::now());
    let sync = (params.workdir.as_ref()).map(|limits| (broker, &call, limits));
    let shelf = workdir::WorkShelf::of(sandbox.blobs());
    finish(started, stderr, outcome, limits.memory_mb, sync, shelf).await
}

/// The registered skill `name`, or why there is none: the install lock kept it out, or no
/// root holds it.
fn find_skill(registry: &Registry, name: &str) -> Result<Arc<RegisteredSkill>, CallError> {
    registry
        .skill(name)
        .ok_or_else(|| match registry.refusal(name) {
            Some(LockRefusal::Changed(reason)) => CallError::Changed(reason.clone()),
            Some(LockRefusal::LockUnreadable(reason)) => CallError::LockUnreadable(reason.clone()),
            None => CallError::NotFound(format!(
                "no skill named {:?} in {}",
                name,
                registry.describe_roots()
            )),
        })
}

/// The declared tool the call names, once its arguments passed the tool's schema (the
/// first five problems said when they did not), before anything is spawned.
fn checked_tool<'a>(
    registered: &'a RegisteredSkill,
    params: &ToolExecuteParams,
) -> Result<&'a Tool, CallError> {
    let (tool, validator) = registered.tool(&params.tool).ok_or_else(|| {
        CallError::NotFound(format!(
            "skill {:?} has no tool {:?}",
            registered.skill.name, params.tool
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
    Ok(tool)
}

/// Whether the call must start a process of its own rather than take a prestarted one. A
/// prestarted process has no per-call env values and runs in the skill folder: a call that
/// carries some, runs in a context or needs a namespace of its own starts cold.
fn starts_cold(params: &ToolExecuteParams, skill: &Skill, plan: &Plan) -> bool {
    let has_values = (params.envelope.env.keys())
        .any(|n| launch::may_receive(skill, &params.envelope.granted_env, n));
    has_values
        || plan.max_file_mb != skill.execution.max_file_mb
        || plan.work.is_some()
        || params.script.is_some()
        || plan.network != Network::None
        || plan.deps.is_some()
}

/// Starts the tool: the prestarted process `warm` (no namespace, no context), given its
/// arguments file when the tool takes `plain_args`, or else `plan` launched cold.
async fn start<B: CapabilityBroker>(
    sandbox: &Sandbox,
    broker: &B,
    warm: Option<WarmProcess>,
    plan: Plan,
    plain_args: Option<&str>,
) -> Result<Launched, CallError> {
    let Some(warm) = warm else {
        return Ok(launch::launch(sandbox, broker, plan).await?);
    };
    if let Some(args) = plain_args {
        let written =
            sandbox::write_args_file(warm.guard.scratch(), args.as_bytes(), warm.guard.uid());
        if let Err(e) = written {
            warm.end();
            // A full scratch tmpfs: an ended call's folder is on its way out. A cold start
            // makes its own scratch dir and waits for that room ([`sandbox::room`]).
            if e.raw_os_error() == Some(libc::ENOSPC) {
                return Ok(launch::launch(sandbox, broker, plan).await?);
            }
            return Err(CallError::Sandbox(format!(
                "cannot write the arguments file of a prestarted tool: {e}"
            )));
        }
    }
    Ok(Launched {
        child: warm.child,
        guard: warm.guard,
        listener: None,
        baseline: None,
        work: None,
    })
}

/// Ends the call whose conversation came to `outcome`: the tool and everything it left
/// killed and reaped, a kill by the OOM killer said as the memory limit ([`oom_as_memory_limit`]),
/// the work folder of a call in a context synced back (`sync`: the broker, the call, the
/// context's limits), then the user id and the scratch folder released; a work folder
/// synced whole goes on the `shelf` for the context's next call, once every process of
/// the call's user is gone.
async fn finish<B: CapabilityBroker>(
    started: Launched,
    stderr: Stderr,
    outcome: Result<Value, CallError>,
    memory_mb: u64,
    sync: Option<(&B, &CallInfo, &WorkDir)>,
    shelf: Option<Arc<workdir::WorkShelf>>,
) -> Result<Value, CallError> {
    let Launched {
        mut child,
        guard,
        mut baseline,
        ..
    } = started;
    let _ = child.start_kill();
    // The tool is not reaped yet (waiting above only observed its exit), so its pid and
    // process group id are still its own.
    guard.kill_now(child.id());
    let _ = child.wait().await;
    // Reaped before the release, so that a call that left nothing behind needs no kill
    // helper there (the tool itself would still count as a process of the call's user).
    child.reap();
    let outcome = oom_as_memory_limit(outcome, &guard, memory_mb);
    let mut keep = None;
    let outcome = match (sync, &mut baseline) {
        (Some((broker, call, limits)), Some(baseline)) => {
            let work = guard.scratch().join(sandbox::WORK_DIR);
            let report = workdir::sync_back(broker, call, &work, limits, baseline).await;
            if report.failure().is_none() && report.quiet && guard.uid().is_some() {
                keep = limits.context_id.clone();
            }
            match (outcome, report.failure()) {
                (Ok(_), Some((kind, message))) => Err(CallError::Files(kind, message)),
                (outcome, _) => outcome,
            }
        }
        _ => outcome,
    };
    match (keep, baseline, shelf) {
        (Some(context), Some(baseline), Some(shelf)) => {
            let uid = guard.uid();
            guard.release_then(move |scratch| {
                shelf.put(&context, &scratch.join(sandbox::WORK_DIR), baseline, uid);
            });
        }
        _ => guard.release(),
    }
    if let Some(task) = stderr.task {
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
    use serde_json::json;

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
