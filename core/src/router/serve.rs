//! The router as the gateway uses it: one router per load, rebuilt when the dispatcher's
//! catalogue and configuration are swapped (a reload), with the `[routing]` of that load; readiness from the executors' sandbox facts and the
//! dispatcher's secrets, success rates from the stats store.

use std::sync::{Arc, Mutex, PoisonError};

use super::{ActivationPlan, CallCounts, RouteInputs, Router, StatsMap};
use crate::calls::Dispatcher;
use crate::calls::Loaded;
use crate::random::RandomError;

/// The router of the latest load; holding the `Arc` keeps pointer identity sound.
static CACHE: Mutex<Option<(Arc<Loaded>, Arc<Router>)>> = Mutex::new(None);

fn router_for(loaded: Arc<Loaded>) -> Arc<Router> {
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((l, r)) = cache.as_ref() {
        if Arc::ptr_eq(l, &loaded) {
            return Arc::clone(r);
        }
    }
    let router = Arc::new(Router::new(
        Arc::clone(&loaded.catalog),
        loaded.config.routing.clone(),
    ));
    *cache = Some((loaded, Arc::clone(&router)));
    router
}

/// Routes `query` over the dispatcher's catalogue (blocking: PATH and SQLite reads).
pub fn route_for_gateway(
    dispatcher: &Dispatcher,
    query: &str,
    context_id: Option<&str>,
) -> Result<ActivationPlan, RandomError> {
    let router = router_for(dispatcher.loaded());
    let stats: StatsMap = match dispatcher.store().all_skill_stats() {
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
    let readiness = dispatcher.readiness();
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

/// `POST /v1/route`: [`route_for_gateway`] off the async threads.
pub async fn route_request(
    dispatcher: Arc<Dispatcher>,
    params: RouteParams,
) -> Option<Result<ActivationPlan, RandomError>> {
    tokio::task::spawn_blocking(move || {
        route_for_gateway(&dispatcher, &params.query, params.context_id.as_deref())
    })
    .await
    .ok()
}
