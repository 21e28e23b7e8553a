//! The steps of one call: gate → admit → approve → dispatch → record (see the module
//! docs of [`super`]), behind the one entry [`Dispatcher::call`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use skillbox_protocol::methods::{SecretValue, ToolExecuteParams};
use skillbox_protocol::result::{ExecutorStages, ToolResult};
use skillbox_protocol::skill::{SandboxKind, Security, Skill, Tool};
use skillbox_protocol::{Target, ToolRef};
use tracing::Instrument;

use super::call::ToolCall;
use super::inflight::{ActiveCall, ApprovalTrail};
use super::transport::Dispatched;
use super::{CallError, Dispatcher, Loaded};
use crate::approvals::ApprovalRequest;
use crate::auth::{CallOrigin, Caller};
use crate::contexts::{self, disclosure, ContextTools};
use crate::executors::readiness::Availability;
use crate::observe::TraceParent;
use crate::random;
use crate::state::store::{unix_ms_now, CallRecord};

/// The metrics label of a skill or tool the catalogue does not have.
pub const UNKNOWN_LABEL: &str = "(unknown)";

/// What a call waited on outside the pipeline's own work, for the stage metrics: an
/// approval, and the transport (the channel and the executor).
#[derive(Debug, Default)]
struct Waits {
    approval_us: AtomicU64,
    transport_us: AtomicU64,
}

impl Waits {
    fn add(counter: &AtomicU64, since: Instant) {
        let us = u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX);
        counter.fetch_add(us, Ordering::Relaxed);
    }

    fn total(&self) -> Duration {
        Duration::from_micros(
            self.approval_us.load(Ordering::Relaxed) + self.transport_us.load(Ordering::Relaxed),
        )
    }
}

/// A call that passed admission: the skill and the tool it names.
struct Admitted {
    skill: Arc<Skill>,
    tool: Tool,
}

/// What the dispatch of one admitted call carries: its id, who asked, the approvals it
/// waited on, the caller's trace context and the waits of the stage metrics.
struct Run<'a> {
    call_id: &'a str,
    origin: &'a CallOrigin,
    trail: &'a ApprovalTrail,
    trace: Option<TraceParent>,
    waits: &'a Waits,
}

/// When a call started and how long it took.
struct Took {
    started_at: i64,
    duration_ms: u64,
}

impl Dispatcher {
    /// Runs one call through the pipeline and records its outcome: the one entry of every
    /// call, from REST, MCP and `route/execute` alike. The call id, the catalogue snapshot,
    /// the gate (the caller's skills, its context's active tools) and the admitted tool
    /// are decided here, once, and carried down.
    pub async fn call(&self, call: ToolCall) -> ToolResult {
        // At error level: the span and its fields exist under any filter that lets the
        // call's warnings through.
        let span = tracing::error_span!(
            "call",
            tool = %call.target,
            caller = %call.origin.caller.name(),
            traceparent = %call.trace.as_ref().map(TraceParent::as_str).unwrap_or_default()
        );
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
        let trail = ApprovalTrail::default();
        let waits = Waits::default();
        let mut recorded = call.target.tool().cloned();
        let outcome = self
            .run(&loaded, &call_id, call, &mut recorded, &trail, &waits)
            .await;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut result = match outcome {
            Ok(r) => r,
            Err(e) => ToolResult::failed(call_id.clone(), e.kind(), e.to_string(), duration_ms),
        };
        result.call_id = call_id.clone();
        result.approval_id = trail.last();
        trail.account_refused_signature(&mut result);
        // The executor's spawn time is for the metrics only, never in an answer.
        if let Some(us) = result.spawn_us.take() {
            self.metrics.observe_spawn(Duration::from_micros(us));
        }
        // A built-in that reads (load_skill) is no call of a tool: it is not recorded.
        if let Some(tool) = &recorded {
            let took = Took {
                started_at,
                duration_ms,
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
        trail: &ApprovalTrail,
        waits: &Waits,
    ) -> Result<ToolResult, CallError> {
        let ToolCall {
            target,
            args,
            origin,
            trace,
        } = call;
        let context = self.gate(loaded, &origin, &target, &args).await?;
        let (tool, args) = match target {
            Target::Tool(tool) => (tool, args),
            Target::LoadSkill => {
                let data = disclosure::load_skill(&loaded.catalog, &args)?;
                return Ok(ToolResult::ok(call_id, data, 0));
            }
            Target::RunSkillScript => {
                let (tool, args) = disclosure::resolve_script(&loaded.catalog, &args)?;
                *recorded = Some(tool.clone());
                // In a context, the script's tool must be active or its skill pinned.
                if let Some(c) = &context {
                    let reached = Target::Tool(tool.clone());
                    if !c.allows(&reached) && !c.pins(&tool.skill) {
                        return Err(CallError::NotInContext(c.refusal(&reached)));
                    }
                }
                (tool, args)
            }
        };
        let admitted = self.admit(loaded, &origin.caller, &tool)?;
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
        };
        self.dispatch(run, admitted, args).await
    }

    /// The gate: the caller may use the skill the call names (before anything about it is
    /// looked up), may enter the call's context, and the context's active tools hold the
    /// target. Returns the context's tools when the call names a context.
    async fn gate(
        &self,
        loaded: &Loaded,
        origin: &CallOrigin,
        target: &Target,
        args: &Value,
    ) -> Result<Option<ContextTools>, CallError> {
        let named = match target {
            Target::Tool(t) => Some(t.skill.as_str()),
            Target::LoadSkill | Target::RunSkillScript => disclosure::named_skill(args),
        };
        if let Some(why) = named.and_then(|s| origin.caller.skill_refusal(s)) {
            return Err(CallError::NotPermitted(why));
        }
        let Some(id) = origin.context_id.clone() else {
            return Ok(None);
        };
        let (store, catalog, caller) = (
            self.store.clone(),
            Arc::clone(&loaded.catalog),
            origin.caller.clone(),
        );
        let context =
            tokio::task::spawn_blocking(move || contexts::gate(&store, &catalog, &caller, &id))
                .await
                .map_err(|e| CallError::Task(e.to_string()))??;
        if !context.allows(target) {
            return Err(CallError::NotInContext(context.refusal(target)));
        }
        Ok(Some(context))
    }

    /// The caller may use the skill, the tool exists, its skill is not disabled, and it
    /// can run where tools run. A bot's skills are judged first, so a bot learns nothing
    /// of skills it may not use.
    fn admit(
        &self,
        loaded: &Loaded,
        caller: &Caller,
        tool: &ToolRef,
    ) -> Result<Admitted, CallError> {
        let (skill_name, tool_name) = (tool.skill.as_str(), tool.tool.as_str());
        if let Some(why) = caller.skill_refusal(skill_name) {
            return Err(CallError::NotPermitted(why));
        }
        let catalog = &loaded.catalog;
        let skill = match loaded.skill(skill_name) {
            Some(skill) => skill,
            None => {
                return Err(
                    match crate::skills::install::disabled::reason(catalog, skill_name) {
                        Some(why) => CallError::Disabled {
                            skill: skill_name.to_string(),
                            why,
                        },
                        None => CallError::NoSuchSkill(skill_name.to_string()),
                    },
                )
            }
        };
        let tool = skill
            .tool(tool_name)
            .cloned()
            .ok_or_else(|| CallError::NoSuchTool {
                skill: skill_name.to_string(),
                tool: tool_name.to_string(),
            })?;
        // An installed skill whose files changed since they were verified is refused now,
        // not at the next reload (skills/stamp.rs).
        loaded
            .stamps
            .check(&skill)
            .map_err(|why| CallError::Disabled {
                skill: skill_name.to_string(),
                why,
            })?;
        if let Availability::Unavailable(reason) = self.availability.of(&skill) {
            return Err(CallError::Unavailable {
                skill: skill_name.to_string(),
                reason,
            });
        }
        Ok(Admitted { skill, tool })
    }

    /// A `write` tool waits for an approval of the call. A `sign` tool waits at each
    /// signature instead, where the operator sees what is being signed (callbacks.rs):
    /// asking twice for one signature would only train operators to click through.
    async fn approve(
        &self,
        origin: &CallOrigin,
        admitted: &Admitted,
        args: &Value,
        trail: &ApprovalTrail,
    ) -> Result<(), CallError> {
        if admitted.tool.security != Security::Write {
            return Ok(());
        }
        let asked = self
            .approvals
            .request(ApprovalRequest {
                skill: admitted.skill.name.clone(),
                tool: admitted.tool.name.clone(),
                args: args.clone(),
                security: admitted.tool.security,
                requested_by: origin.caller.name().to_owned(),
                context_id: origin.context_id.clone(),
            })
            .await;
        if let Some(id) = match &asked {
            Ok(grant) => grant.approval_id(),
            Err(e) => e.approval_id(),
        } {
            trail.note(id);
        }
        asked?;
        Ok(())
    }

    /// Issues the capability token, registers the call for its callbacks while it runs,
    /// and hands it to the transport of the skill's sandbox, with the admitted tool.
    async fn dispatch(
        &self,
        run: Run<'_>,
        admitted: Admitted,
        args: Value,
    ) -> Result<ToolResult, CallError> {
        let Admitted { skill, tool } = admitted;
        let token = SecretValue(random::token(self.rng.as_ref(), "capability token")?);
        let params = ToolExecuteParams {
            call_id: run.call_id.to_string(),
            capability_token: token.clone(),
            skill: skill.name.clone(),
            tool: tool.name.clone(),
            args,
            env: self
                .availability
                .secrets()
                .for_names(&skill.permissions.env),
            traceparent: run.trace.map(|t| t.to_string()),
        };
        let active = Arc::new(ActiveCall {
            skill: Arc::clone(&skill),
            tool: tool.name.clone(),
            security: tool.security,
            origin: run.origin.clone(),
            token,
            approvals: run.trail.clone(),
        });
        let _registered = self.in_flight.register(run.call_id, active);
        let sandbox = skill.execution.sandbox;
        let timeout = match sandbox {
            SandboxKind::Container => Duration::from_millis(skill.timeout_ms(&tool)),
            _ => self.call_timeout,
        };
        let dispatched = Dispatched {
            skill,
            security: tool.security,
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
    fn observe_executor_stages(&self, round_trip: Duration, stages: ExecutorStages) {
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
        let tool_label = known
            .and_then(|s| s.tool(&tool.tool))
            .map_or(UNKNOWN_LABEL, |t| t.name.as_str());
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
        };
        self.store.queue_call(record);
    }
}
