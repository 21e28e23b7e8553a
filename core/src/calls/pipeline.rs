//! The steps of one call: gate → admit → approve → dispatch → record (see the module
//! docs of [`super`]), behind the one entry [`Dispatcher::call`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use skillbox_protocol::methods::{ScriptRun, SecretValue, ToolExecuteParams};
use skillbox_protocol::result::{ExecutorStages, ToolResult};
use skillbox_protocol::skill::{SandboxKind, Security, Skill};
use skillbox_protocol::workdir::WorkDir;
use skillbox_protocol::{Target, ToolRef};
use tracing::Instrument;

use super::call::ToolCall;
use super::inflight::{ActiveCall, ApprovalTrail};
use super::transport::Dispatched;
use super::workfiles::CallFiles;
use super::{CallError, Dispatcher, Loaded};
use crate::auth::CallOrigin;
use crate::contexts::{self, builtins, disclosure};
use crate::observe::TraceParent;
use crate::proxy::egress::EgressLog;
use crate::random;
use crate::state::store::{unix_ms_now, CallEgress, CallRecord};

/// Longest wait for the records of a finished call's connections still closing.
const EGRESS_SETTLE: Duration = Duration::from_millis(500);

/// The metrics label of a skill or tool the catalogue does not have.
pub const UNKNOWN_LABEL: &str = "(unknown)";

/// What a call waited on outside the pipeline's own work, for the stage metrics: an
/// approval, and the transport (the channel and the executor).
#[derive(Debug, Default)]
pub(super) struct Waits {
    approval_us: AtomicU64,
    pub(super) transport_us: AtomicU64,
}

impl Waits {
    pub(super) fn add(counter: &AtomicU64, since: Instant) {
        let us = u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX);
        counter.fetch_add(us, Ordering::Relaxed);
    }

    fn total(&self) -> Duration {
        Duration::from_micros(
            self.approval_us.load(Ordering::Relaxed) + self.transport_us.load(Ordering::Relaxed),
        )
    }
}

/// A call that passed admission: the skill, and the tool it runs (a declared tool, or a
/// built-in run under the skill's envelope).
pub(super) struct Admitted {
    pub(super) skill: Arc<Skill>,
    pub(super) tool: String,
    pub(super) security: Security,
    pub(super) timeout_ms: u64,
}

/// What the dispatch of one admitted call carries: its id, who asked, the approvals it
/// waited on, the caller's trace context and the waits of the stage metrics.
pub(super) struct Run<'a> {
    pub(super) call_id: &'a str,
    pub(super) origin: &'a CallOrigin,
    pub(super) trail: &'a ApprovalTrail,
    pub(super) trace: Option<TraceParent>,
    pub(super) waits: &'a Waits,
    /// The call's egress record, which its programs' connections fill.
    pub(super) egress: &'a EgressLog,
    /// What it inherits when another skill's program delegated it (`runSkill`).
    pub(super) delegation: Option<super::Delegation>,
}

/// What a call gathers beside its result while it runs: the approvals it waited on, its
/// waits (for the stage metrics) and its programs' connections through the egress proxy.
#[derive(Default)]
struct Gathered {
    trail: ApprovalTrail,
    waits: Waits,
    egress: EgressLog,
}

/// When a call started, how long it took, and the connections its programs made.
struct Took {
    started_at: i64,
    duration_ms: u64,
    egress: CallEgress,
}

impl Dispatcher {
    /// Runs one call through the pipeline and records its outcome: the one entry of every
    /// call, from REST, MCP and `route/execute` alike. The call id, the catalogue snapshot,
    /// the gate (the caller's skills, its context's active tools) and the admitted tool
    /// are decided here, once, and carried down.
    pub async fn call(&self, call: ToolCall) -> ToolResult {
        // At error level: the span and its fields exist under any filter that lets the
        // call's warnings through.
        // The trace context only when the caller sent one: the fields are formatted when
        // the span is made, on every call.
        let span = tracing::error_span!(
            "call",
            tool = %call.target,
            caller = %call.origin.caller.name(),
            traceparent = tracing::field::Empty
        );
        if let Some(trace) = &call.trace {
            span.record("traceparent", tracing::field::display(trace.as_str()));
        }
        self.call_in_span(call).instrument(span).await
    }

    async fn call_in_span(&self, call: ToolCall) -> ToolResult {
        let started = Instant::now();
        let started_at = unix_ms_now();
        let call_id = match self.new_call_id() {
            Ok(id) => id,
            Err(e) => {
                tracing::error!(tool = %call.target, error = %e, "call refused");
                let e = CallError::Random(e);
                return ToolResult::failed(String::new(), e.kind(), e.to_string(), 0);
            }
        };
        let loaded = self.load.current();
        let origin = call.origin.clone();
        let gathered = Gathered::default();
        let (trail, waits) = (&gathered.trail, &gathered.waits);
        let mut recorded = call.target.tool().cloned();
        // A built-in's answer has no executor's figure: its duration is the pipeline's,
        // the one its record keeps.
        let builtin = !matches!(call.target, Target::Tool(_));
        let outcome = self
            .run(&loaded, &call_id, call, &mut recorded, &gathered)
            .await;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut result = match outcome {
            Ok(r) => r,
            Err(e) => ToolResult::failed(call_id.clone(), e.kind(), e.to_string(), duration_ms),
        };
        result.call_id = call_id.clone();
        if builtin {
            result.duration_ms = duration_ms;
        }
        result.approval_id = trail.last();
        trail.account_refused_signature(&mut result);
        // The executor's spawn time is for the metrics only, never in an answer.
        if let Some(us) = result.spawn_us.take() {
            self.metrics.observe_spawn(Duration::from_micros(us));
        }
        // A call whose programs all ended may still be closing their last connections:
        // their records come in within moments, and the call is stored with them. (A
        // session that still runs keeps its connections; it is not waited for.)
        let running = (result.data.as_ref()).is_some_and(|d| d.get("session_id").is_some());
        if !running {
            gathered.egress.settle(EGRESS_SETTLE).await;
        }
        // A built-in that reads (load_skill) is no call of a tool: it is not recorded.
        if let Some(tool) = &recorded {
            let took = Took {
                started_at,
                duration_ms,
                egress: gathered.egress.snapshot(),
            };
            self.record(&loaded, &origin, tool, call_id, took, &result)
                .await;
        }
        let own = started.elapsed().saturating_sub(waits.total());
        self.metrics.observe_stage("pipeline", own);
        result
    }

    /// The gate, then admit → approve → dispatch. `recorded` is set to the skill's tool
    /// the call reaches (a script's tool for `run_skill_script`).
    async fn run(
        &self,
        loaded: &Loaded,
        call_id: &str,
        call: ToolCall,
        recorded: &mut Option<ToolRef>,
        gathered: &Gathered,
    ) -> Result<ToolResult, CallError> {
        let (trail, waits, egress) = (&gathered.trail, &gathered.waits, &gathered.egress);
        let ToolCall {
            target,
            args,
            origin,
            trace,
            delegation,
        } = call;
        let (context, listed) = self.gate(loaded, &origin, &target, &args).await?;
        if target.is_session_tool() {
            *recorded = None;
            let run = Run {
                call_id,
                origin: &origin,
                trail,
                trace,
                waits,
                egress,
                delegation: None,
            };
            return self
                .session_call(loaded, run, &target, args, (context, listed), recorded)
                .await;
        }
        let (admitted, args, script) = match target {
            Target::Tool(tool) => (self.admit(loaded, &origin.caller, &tool)?, args, None),
            Target::LoadSkill => {
                let named = builtins::of(&target).and_then(|b| b.reach.named(&args));
                super::envelope::in_context(context.as_ref(), &Target::LoadSkill, named)?;
                let data = disclosure::load_skill(&loaded.catalog, &args)?;
                return Ok(ToolResult::ok(call_id, data, 0));
            }
            Target::RunSkill => {
                let named = builtins::of(&target).and_then(|b| b.reach.named(&args));
                super::envelope::in_context(context.as_ref(), &Target::RunSkill, named)?;
                let data = self.run_skill(loaded, &origin, args).await?;
                return Ok(ToolResult::ok(call_id, data, 0));
            }
            Target::RunSkillScript => {
                let named = builtins::of(&target).and_then(|b| b.reach.named(&args));
                super::envelope::in_context(context.as_ref(), &Target::RunSkillScript, named)?;
                let script = disclosure::resolve_script(&loaded.catalog, &args)?;
                *recorded = Some(ToolRef::new(&script.skill, disclosure::RUN_SKILL_SCRIPT));
                let admitted = self.admit_envelope(
                    loaded,
                    &origin.caller,
                    &script.skill,
                    disclosure::RUN_SKILL_SCRIPT,
                )?;
                (admitted, args, Some(script.run))
            }
            _ => return Err(CallError::Task(format!("{target} is not dispatched here"))),
        };
        let asked = Instant::now();
        let approved = self.approve(&origin, &admitted, &args, trail).await;
        Waits::add(&waits.approval_us, asked);
        approved?;
        let run = Run {
            call_id,
            origin: &origin,
            trail,
            trace,
            waits,
            egress,
            delegation,
        };
        let work = match &context {
            Some(c) if admitted.skill.execution.sandbox == SandboxKind::Process => Some(
                self.work_dir(&c.context_id, call_id, listed, &admitted)
                    .await?,
            ),
            _ => None,
        };
        self.dispatch(run, admitted, args, script, work).await
    }

    /// `run_skill` ([`contexts::delegation`]): the child context, or why not, as the
    /// caller sees it (a loop, the depth, no task: not permitted; an unknown skill).
    /// A delegation made is recorded beside the routing decisions.
    async fn run_skill(
        &self,
        loaded: &Loaded,
        origin: &CallOrigin,
        args: Value,
    ) -> Result<Value, CallError> {
        let (store, catalog) = (self.store.clone(), Arc::clone(&loaded.catalog));
        let (routing, keep) = (&loaded.config.routing, loaded.config.observe.routes_kept);
        let limits = (routing.max_delegate_depth, keep);
        let (context_id, caller) = (origin.context_id.clone(), origin.caller.name().to_owned());
        tokio::task::spawn_blocking(move || {
            let id = context_id.as_deref();
            contexts::delegation::run_and_record(&store, &catalog, id, &caller, &args, limits)
        })
        .await
        .map_err(|e| CallError::Task(e.to_string()))?
        .map_err(CallError::from)
    }

    /// Issues the capability token, registers the call for its callbacks while it runs,
    /// and hands it to the transport of the skill's sandbox, with the admitted tool.
    async fn dispatch(
        &self,
        run: Run<'_>,
        admitted: Admitted,
        args: Value,
        script: Option<ScriptRun>,
        work: Option<(WorkDir, Arc<CallFiles>)>,
    ) -> Result<ToolResult, CallError> {
        let Admitted {
            skill,
            tool,
            security,
            timeout_ms,
        } = admitted;
        let token = SecretValue(random::token(self.rng.as_ref(), "capability token")?);
        let envelope = self.envelope_of(&skill)?;
        let (workdir, files) = match work {
            Some((w, f)) => (Some(w), Some(f)),
            None => (None, None),
        };
        let params = ToolExecuteParams {
            call_id: run.call_id.to_string(),
            capability_token: token.clone(),
            skill: skill.name.clone(),
            tool: tool.clone(),
            args,
            envelope: envelope.wire,
            traceparent: run.trace.as_ref().map(|t| t.to_string()),
            workdir,
            script,
        };
        let timeout = Duration::from_millis(timeout_ms);
        let delegation = match &run.delegation {
            Some(inherited) => super::Delegation {
                deadline: Some(inherited.deadline_for(timeout)),
                ..inherited.clone()
            },
            None => super::Delegation::top(
                timeout,
                self.load.current().config.routing.max_delegated_calls,
            ),
        };
        let active = Arc::new(
            ActiveCall::new(
                Arc::clone(&skill),
                tool,
                security,
                run.origin.clone(),
                token,
            )
            .in_run(run.trail.clone(), run.egress.clone())
            .with_files(files.clone())
            .with_secrets(envelope.secrets)
            .with_delegation(delegation),
        );
        let _registered = self.in_flight.register(run.call_id, Arc::clone(&active));
        let mut answer = self.send(run, skill, security, timeout_ms, params).await;
        if let (Ok(result), Some(files)) = (answer.as_mut(), files) {
            result.files = Some(files.take_written());
        }
        if let (Ok(result), Ok(mut notes)) = (answer.as_mut(), active.delegated.lock()) {
            result.delegated = std::mem::take(&mut *notes);
        }
        answer
    }

    /// Hands a registered call to the transport of its skill's sandbox.
    async fn send(
        &self,
        run: Run<'_>,
        skill: Arc<Skill>,
        security: Security,
        timeout_ms: u64,
        params: ToolExecuteParams,
    ) -> Result<ToolResult, CallError> {
        let sandbox = skill.execution.sandbox;
        let timeout = match sandbox {
            SandboxKind::Container => Duration::from_millis(timeout_ms),
            _ => self.call_timeout,
        };
        let dispatched = Dispatched {
            skill,
            security,
            params,
        };
        if sandbox == SandboxKind::Container {
            let containers = self
                .transports
                .containers
                .as_ref()
                .ok_or_else(|| CallError::NoContainerEngine(dispatched.skill.name.clone()))?;
            let sent = Instant::now();
            let answer = containers.execute(dispatched, timeout).await;
            Waits::add(&run.waits.transport_us, sent);
            return answer;
        }
        let sent = Instant::now();
        let mut answer = self.transports.process.execute(dispatched, timeout).await;
        let round_trip = sent.elapsed();
        Waits::add(&run.waits.transport_us, sent);
        if let Some(stages) = answer.as_mut().ok().and_then(|r| r.stages.take()) {
            self.observe_executor_stages(round_trip, stages);
        }
        answer
    }

    /// The executor's stages of a call, and the channel's: the round trip less them.
    pub(super) fn observe_executor_stages(&self, round_trip: Duration, stages: ExecutorStages) {
        let us = Duration::from_micros;
        let m = &self.metrics;
        m.observe_stage("executor_queue", us(stages.queue_us));
        m.observe_stage("executor_start", us(stages.start_us));
        m.observe_stage("tool", us(stages.tool_us));
        m.observe_stage("executor_end", us(stages.end_us));
        m.observe_stage("channel", round_trip.saturating_sub(us(stages.total_us())));
    }

    /// Records the outcome in the metrics, and off the call's path in the store: its
    /// writer thread inserts it (state/store/call_log.rs); readers of the calls see it, a
    /// clean stop flushes it.
    async fn record(
        &self,
        loaded: &Loaded,
        origin: &CallOrigin,
        tool: &ToolRef,
        call_id: String,
        took: Took,
        result: &ToolResult,
    ) {
        // Label values come from the catalogue, never from the caller: a bot naming made-up
        // tools must not grow the metrics without bound.
        let known = loaded.catalog.get(&tool.skill);
        let skill_label = known.map_or(UNKNOWN_LABEL, |s| s.name.as_str());
        let builtin = Target::parse(&tool.tool).ok().filter(Target::is_builtin);
        let builtin_label = builtin.as_ref().map(Target::to_string);
        let tool_label = match &builtin_label {
            Some(name) => name.as_str(),
            None => known
                .and_then(|s| s.tool(&tool.tool))
                .map_or(UNKNOWN_LABEL, |t| t.name.as_str()),
        };
        self.metrics.observe_call(
            skill_label,
            tool_label,
            origin.caller.name(),
            result,
            Duration::from_millis(took.duration_ms),
        );
        let record = CallRecord {
            call_id,
            skill: tool.skill.clone(),
            tool: tool.tool.clone(),
            started_at: took.started_at,
            duration_ms: took.duration_ms,
            success: result.success,
            error_kind: result.error_kind,
            caller: origin.caller.name().to_owned(),
            egress: took.egress.connections,
            egress_unlisted: took.egress.unlisted,
        };
        self.store.queue_call(record);
    }
}
