//! The router as the gateway uses it: one router per catalogue, rebuilt when the
//! dispatcher's catalogue changes (a reload swaps the `Arc`), with `[routing]` read from
//! the workspace's `skillbox.toml` at that moment; readiness from the executors' sandbox facts and the
//! dispatcher's secrets, success rates from the stats store.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use skillbox_protocol::skill::Catalog;

use super::{ActivationPlan, CallCounts, RouteInputs, Router, StatsMap};
use crate::calls::Dispatcher;
use crate::config::Config;
use crate::random::RandomError;

/// The router of the latest catalogue; holding the `Arc` keeps pointer identity sound.
static CACHE: Mutex<Option<(Arc<Catalog>, Arc<Router>)>> = Mutex::new(None);

fn router_for(catalog: Arc<Catalog>, workspace: Option<&Path>) -> Arc<Router> {
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((c, r)) = cache.as_ref() {
        if Arc::ptr_eq(c, &catalog) {
            return Arc::clone(r);
        }
    }
    let config = workspace
        .and_then(|ws| match Config::load(ws) {
            Ok(c) => Some(c.routing),
            Err(e) => {
                tracing::warn!(error = %e, "routing with default settings");
                None
            }
        })
        .unwrap_or_default();
    let router = Arc::new(Router::new(Arc::clone(&catalog), config));
    *cache = Some((catalog, Arc::clone(&router)));
    router
}

/// Routes `query` over the dispatcher's catalogue (blocking: PATH and SQLite reads).
pub fn route_for_gateway(
    dispatcher: &Dispatcher,
    workspace: Option<&Path>,
    query: &str,
    context_id: Option<&str>,
) -> Result<ActivationPlan, RandomError> {
    let router = router_for(dispatcher.catalog(), workspace);
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
    workspace: Option<std::path::PathBuf>,
    params: RouteParams,
) -> Option<Result<ActivationPlan, RandomError>> {
    tokio::task::spawn_blocking(move || {
        route_for_gateway(
            &dispatcher,
            workspace.as_deref(),
            &params.query,
            params.context_id.as_deref(),
        )
    })
    .await
    .ok()
}
