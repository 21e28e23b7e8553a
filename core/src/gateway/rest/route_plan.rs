//! `POST /v1/route`: the router of the current load (built once per load, swapped with the
//! catalogue and configuration, [`crate::calls::Loaded::router`]) over the caller's
//! skills; readiness from the executors' sandbox facts and the core's secrets, success
//! rates from the stats store; the decision recorded for `GET /v1/routes`.

use std::sync::Arc;

use crate::router::{ActivationPlan, CallCounts, RouteInputs, Router, StatsMap};

use crate::auth::Caller;
use crate::calls::Loaded;
use crate::gateway::CallParts;
use crate::random::RandomError;
use crate::state::store::{unix_ms_now, RouteRecord};

/// The router `caller` routes with: the load's, or for a bot limited to some skills, one
/// over those skills only (kept with the load per set of skills: the plan never names a
/// skill the bot may not use).
fn router_for_caller(loaded: &Loaded, caller: &Caller) -> Arc<Router> {
    let limited = matches!(caller, Caller::Bot(bot) if bot.skills.is_some());
    if !limited {
        return loaded.router();
    }
    loaded.router_limited_to(|name| caller.may_use_skill(name))
}

/// Routes `query` over the dispatcher's catalogue (blocking: PATH and SQLite reads), and
/// records the decision: its latency and outcome in the metrics, the plan in the store
/// (kept to `[observe] routes_kept`) for `GET /v1/routes`.
pub fn route_for_gateway(
    core: &CallParts,
    caller: &Caller,
    query: &str,
    context_id: Option<&str>,
) -> Result<ActivationPlan, RandomError> {
    let started = std::time::Instant::now();
    let plan = route_unrecorded(core, caller, query, context_id);
    let outcome = match &plan {
        Ok(p) if p.primary.is_some() => "selected",
        Ok(_) => "no_skill",
        Err(_) => "error",
    };
    core.metrics.observe_route(outcome, started.elapsed());
    if let Ok(plan) = &plan {
        let record = RouteRecord {
            route_id: plan.route_id.clone(),
            at: unix_ms_now(),
            query: plan.query.clone(),
            context_id: plan.context_id.clone(),
            primary: plan.primary.clone(),
            plan: serde_json::to_value(plan).unwrap_or_default(),
            caller: caller.name().to_owned(),
        };
        let keep = core.load.config().observe.routes_kept;
        if let Err(e) = core.store.record_route(&record, keep) {
            tracing::error!(route_id = %plan.route_id, error = %e, "cannot record the routing decision");
        }
    }
    plan
}

fn route_unrecorded(
    core: &CallParts,
    caller: &Caller,
    query: &str,
    context_id: Option<&str>,
) -> Result<ActivationPlan, RandomError> {
    let router = router_for_caller(&core.load.current(), caller);
    let stats: StatsMap = match core.store.all_skill_stats() {
        Ok(all) => all
            .into_iter()
            .map(|s| {
                (
                    s.skill,
                    CallCounts {
                        successes: s.successes,
                        failures: s.failures,
                    },
                )
            })
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "routing without success rates");
            StatsMap::new()
        }
    };
    let readiness = core.availability.readiness();
    router.route(
        query,
        &RouteInputs {
            context_id,
            readiness: &readiness,
            stats: &stats,
        },
    )
}

/// The body of `POST /v1/route`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteParams {
    /// The user's query.
    pub query: String,
    /// The context it belongs to.
    pub context_id: Option<String>,
}

/// `POST /v1/route`: [`route_for_gateway`] off the async threads, in a context `caller`
/// may enter.
pub async fn route_request(
    core: CallParts,
    caller: Caller,
    params: RouteParams,
) -> Option<Result<ActivationPlan, RouteError>> {
    tokio::task::spawn_blocking(move || {
        if let Some(id) = params.context_id.as_deref() {
            crate::contexts::enter(&core.store, &caller, id)?;
        }
        let plan = route_for_gateway(&core, &caller, &params.query, params.context_id.as_deref())?;
        Ok(plan)
    })
    .await
    .ok()
}

/// Why `POST /v1/route` gave no plan.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// The caller may not enter the context, or its id is not valid.
    #[error(transparent)]
    Context(#[from] crate::contexts::ContextError),
    /// No route id could be drawn.
    #[error(transparent)]
    Random(#[from] RandomError),
}

impl RouteError {
    /// The docs/http-api.md kind of the refusal.
    pub fn error_kind(&self) -> skillbox_protocol::result::ErrorKind {
        match self {
            RouteError::Context(e) => e.error_kind(),
            RouteError::Random(_) => skillbox_protocol::result::ErrorKind::Unavailable,
        }
    }
}
