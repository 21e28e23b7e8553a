//! `POST /v1/route/execute`: route the query, turn the plan into the chain of stages the
//! state machine walks (which tool of each skill to call), run it through the dispatcher
//! (inside the context's active tools when a context is given), and store the transitions.
//!
//! The tool of a skill: the one named in the request when the skill has it, else the
//! skill's only tool, else, for a skill without tools, its instructions (progressive
//! disclosure); a skill with several tools and none named is a fatal failure that says so.
//! Only the primary and its fallback chain run; other selected skills are in the plan for
//! the caller.

use skillbox_protocol::ToolRef;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::skill::{Catalog, Skill};

use super::route_plan::route_for_gateway;
use crate::auth::{CallOrigin, Caller};
use crate::calls::ToolCall;
use crate::contexts;
use crate::gateway::CallParts;
use crate::observe::TraceParent;
use crate::router::execute::{self, Run, Stage, Target};
use crate::router::{ActivationPlan, FallbackStep};
use crate::state::store::{unix_ms_now, RouteEvent};

/// The body of `POST /v1/route/execute`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecuteParams {
    /// The user's query.
    pub query: String,
    /// Arguments for the tool.
    #[serde(default)]
    pub args: Option<Value>,
    /// The tool to call in a skill with several.
    #[serde(default)]
    pub tool: Option<String>,
    /// The context: its active tools bound the calls.
    #[serde(default)]
    pub context_id: Option<String>,
}

/// The answer of `POST /v1/route/execute`: the plan and the run.
#[derive(Debug, Clone, Serialize)]
pub struct Execution {
    /// The run: outcome, steps and transitions.
    #[serde(flatten)]
    pub run: Run,
    /// The activation plan it ran.
    pub plan: ActivationPlan,
}

/// What to run for `skill` in this request.
pub fn target(core: &CallParts, skill: &Skill, requested: Option<&str>) -> Target {
    if let crate::executors::readiness::Availability::Unavailable(reason) =
        core.availability.of(skill)
    {
        return Target::Refused {
            kind: ErrorKind::Unavailable,
            reason: format!("skill {:?} cannot run here: {reason}", skill.name),
        };
    }
    if let Some(t) = requested.and_then(|name| skill.tool(name)) {
        return Target::Tool(t.name.clone());
    }
    match skill.tools.as_slice() {
        [only] => Target::Tool(only.name.clone()),
        [] => match skill.read_body() {
            Ok(body) => Target::Instructions(body),
            Err(e) => Target::Refused {
                kind: ErrorKind::NotFound,
                reason: format!("cannot read the instructions of {:?}: {e}", skill.name),
            },
        },
        many => Target::Refused {
            kind: ErrorKind::InvalidArgs,
            reason: format!(
                "skill {:?} has tools {}; name one with \"tool\"",
                skill.name,
                many.iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
    }
}

/// The stages of a plan: the primary, then its fallback chain.
pub fn stages(
    core: &CallParts,
    catalog: &Catalog,
    plan: &ActivationPlan,
    tool: Option<&str>,
) -> Vec<Stage> {
    let stage = |name: &str| match catalog.get(name) {
        Some(s) => Stage::Skill {
            skill: name.to_string(),
            target: target(core, s, tool),
        },
        None => Stage::Skill {
            skill: name.to_string(),
            target: Target::Refused {
                kind: ErrorKind::NotFound,
                reason: format!("skill {name:?} is gone (reloaded away)"),
            },
        },
    };
    let mut out: Vec<Stage> = plan.primary.iter().map(|p| stage(p)).collect();
    for step in &plan.fallback_chain {
        out.push(match step {
            FallbackStep::Skill { skill } => stage(skill),
            FallbackStep::NoSkill => Stage::NoSkill,
            FallbackStep::AskUser => Stage::AskUser,
        });
    }
    out
}

/// Why `POST /v1/route/execute` could not run its chain.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    /// The request's context id is invalid or its context could not be read.
    #[error(transparent)]
    Context(#[from] contexts::ContextError),
    /// Routing could not draw a route id.
    #[error(transparent)]
    Route(#[from] crate::random::RandomError),
    /// The routing task panicked or was cancelled.
    #[error("routing failed ({0}); retry")]
    Task(#[from] tokio::task::JoinError),
}

impl From<ExecuteError> for crate::gateway::ApiError {
    fn from(e: ExecuteError) -> Self {
        crate::gateway::ApiError::new(e.error_kind(), e.to_string())
    }
}

impl ExecuteError {
    /// The docs/http-api.md kind of the refusal.
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            ExecuteError::Context(e) => e.error_kind(),
            ExecuteError::Route(_) | ExecuteError::Task(_) => ErrorKind::Unavailable,
        }
    }
}

/// `POST /v1/route/execute`: route, run the chain, store the transitions. Fails only when
/// the context id is invalid or routing could not run.
pub async fn execute_request(
    core: CallParts,
    caller: Caller,
    params: ExecuteParams,
    trace: Option<TraceParent>,
) -> Result<Execution, ExecuteError> {
    let d = core.clone();
    let p = params.clone();
    let c = caller.clone();
    let (plan, chain) = tokio::task::spawn_blocking(move || {
        let catalog = d.load.catalog();
        // A context the caller may not enter fails the request before anything runs; each
        // stage's call is then gated by the pipeline like any other.
        if let Some(id) = p.context_id.as_deref() {
            contexts::enter(&d.store, &c, id)?;
        }
        let plan = route_for_gateway(&d, &c, &p.query, p.context_id.as_deref())?;
        let chain = stages(&d, &catalog, &plan, p.tool.as_deref());
        Ok::<_, ExecuteError>((plan, chain))
    })
    .await??;
    let args = params.args.unwrap_or_else(|| json!({}));
    let origin = CallOrigin::new(caller, params.context_id.clone());
    let run = execute::run(&plan.route_id, chain, &args, |skill, tool, args| {
        let pipeline = Arc::clone(&core.pipeline);
        let call =
            ToolCall::new(ToolRef::new(skill, tool), args, origin.clone()).traced(trace.clone());
        async move { pipeline.call(call).await }
    })
    .await;
    record(&core, &run).await;
    Ok(Execution { run, plan })
}

/// Stores the transitions in `route_events` (a failure is logged, the answer stands).
async fn record(core: &CallParts, run: &Run) {
    let at = unix_ms_now();
    let events: Vec<RouteEvent> = run
        .transitions
        .iter()
        .map(|t| RouteEvent {
            route_id: run.route_id.clone(),
            seq: t.seq,
            from_state: t.from.as_str().to_string(),
            to_state: t.to.as_str().to_string(),
            skill: t.skill.clone(),
            tool: t.tool.clone(),
            reason: t.reason.clone(),
            at,
        })
        .collect();
    let store = core.store.clone();
    let _ = tokio::task::spawn_blocking(move || {
        if let Err(e) = store.record_route_events(&events) {
            tracing::error!(error = %e, "cannot record the route events");
        }
    })
    .await;
}
