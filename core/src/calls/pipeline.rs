//! The steps of one call: admit → approve → dispatch → record (see the module docs of
//! [`super`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use skillbox_protocol::methods::{SecretValue, ToolExecuteParams};
use skillbox_protocol::result::{ExecutorStages, ToolResult};
use skillbox_protocol::skill::{SandboxKind, Security, Skill, Tool};
use skillbox_protocol::ToolRef;
use tracing::Instrument;

use super::inflight::{ActiveCall, ApprovalTrail};
use super::{CallError, Dispatcher};
use crate::approvals::ApprovalRequest;
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

impl Dispatcher {
    /// Runs `skill:tool` with `args` through the pipeline and records the outcome.
    pub async fn call(&self, full_name: &str, args: Value) -> ToolResult {
        self.call_traced(full_name, args, None).await
    }

    /// [`Dispatcher::call`] with the bot's W3C trace context: on the core's log lines of
    /// the call and, as a field of `tool.execute`, on the executor's.
    pub async fn call_traced(
        &self,
        full_name: &str,
        args: Value,
        trace: Option<TraceParent>,
    ) -> ToolResult {
        // At error level: the span and its fields exist under any filter that lets the
        // call's warnings through.
        let span = tracing::error_span!(
            "call",
            tool = %full_name,
            traceparent = %trace.as_ref().map(TraceParent::as_str).unwrap_or_default()
        );
        self.call_in_span(full_name, args, trace)
            .instrument(span)
            .await
    }

    async fn call_in_span(
        &self,
        full_name: &str,
        args: Value,
        trace: Option<TraceParent>,
    ) -> ToolResult {
        let started = Instant::now();
        let started_at = unix_ms_now();
        let call_id = match self.new_call_id() {
            Ok(id) => id,
            Err(e) => {
                tracing::error!(tool = %full_name, error = %e, "call refused");
                let e = CallError::Random(e);
                return ToolResult::failed(String::new(), e.kind(), e.to_string(), 0);
            }
        };
        let trail = ApprovalTrail::default();
        let waits = Waits::default();
        let outcome = self
            .run(&call_id, full_name, args, &trail, trace, &waits)
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
        self.record(full_name, call_id, started_at, duration_ms, &result)
            .await;
        let own = started.elapsed().saturating_sub(waits.total());
        self.metrics.observe_stage("pipeline", own);
        result
    }

    async fn run(
        &self,
        call_id: &str,
        full_name: &str,
        args: Value,
        trail: &ApprovalTrail,
        trace: Option<TraceParent>,
        waits: &Waits,
    ) -> Result<ToolResult, CallError> {
        let admitted = self.admit(full_name)?;
        let asked = Instant::now();
        let approved = self.approve(&admitted, &args, trail).await;
        Waits::add(&waits.approval_us, asked);
        approved?;
        self.dispatch(call_id, admitted, args, trail, trace, waits)
            .await
    }

    /// The tool exists, its skill is not disabled, and it can run where tools run.
    fn admit(&self, full_name: &str) -> Result<Admitted, CallError> {
        let ToolRef {
            skill: skill_name,
            tool: tool_name,
        } = ToolRef::parse(full_name)?;
        let (skill_name, tool_name) = (skill_name.as_str(), tool_name.as_str());
        let loaded = self.loaded();
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
        if let Some(reason) = self.unavailable_reason(&skill) {
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
    /// and hands it to the transport of the skill's sandbox.
    async fn dispatch(
        &self,
        call_id: &str,
        admitted: Admitted,
        args: Value,
        trail: &ApprovalTrail,
        trace: Option<TraceParent>,
        waits: &Waits,
    ) -> Result<ToolResult, CallError> {
        let Admitted { skill, tool } = admitted;
        let token = SecretValue(random::token(self.rng.as_ref(), "capability token")?);
        let params = ToolExecuteParams {
            call_id: call_id.to_string(),
            capability_token: token.clone(),
            skill: skill.name.clone(),
            tool: tool.name.clone(),
            args,
            env: self.secrets.for_names(&skill.permissions.env),
            traceparent: trace.map(|t| t.to_string()),
        };
        let active = Arc::new(ActiveCall {
            skill: Arc::clone(&skill),
            tool: tool.name.clone(),
            security: tool.security,
            token,
            approvals: trail.clone(),
        });
        let _registered = self.in_flight.register(call_id, active);
        if skill.execution.sandbox == SandboxKind::Container {
            let containers = self
                .transports
                .containers
                .as_ref()
                .ok_or_else(|| CallError::NoContainerEngine(skill.name.clone()))?;
            let timeout = Duration::from_millis(skill.timeout_ms(&tool));
            let sent = Instant::now();
            let answer = containers.execute(skill, params, timeout).await;
            Waits::add(&waits.transport_us, sent);
            return answer;
        }
        let sent = Instant::now();
        let mut answer = self
            .transports
            .process
            .execute(skill, params, self.call_timeout)
            .await;
        let round_trip = sent.elapsed();
        Waits::add(&waits.transport_us, sent);
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
        full_name: &str,
        call_id: String,
        started_at: i64,
        duration_ms: u64,
        result: &ToolResult,
    ) {
        let Ok(ToolRef { skill, tool }) = ToolRef::parse(full_name) else {
            return;
        };
        // Label values come from the catalogue, never from the caller: a bot naming made-up
        // tools must not grow the metrics without bound.
        let catalog = self.catalog();
        let known = catalog.get(&skill);
        let skill_label = known.map_or(UNKNOWN_LABEL, |s| s.name.as_str());
        let tool_label = known
            .and_then(|s| s.tool(&tool))
            .map_or(UNKNOWN_LABEL, |t| t.name.as_str());
        self.metrics.observe_call(
            skill_label,
            tool_label,
            result,
            Duration::from_millis(duration_ms),
        );
        let record = CallRecord {
            call_id,
            skill,
            tool,
            started_at,
            duration_ms,
            success: result.success,
            error_kind: result.error_kind,
        };
        self.store.queue_call(record);
    }
}
