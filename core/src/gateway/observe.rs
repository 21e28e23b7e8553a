//! The observability routes (docs/observability.md): `GET /metrics` (Prometheus text),
//! `GET /v1/calls` (recent calls), `GET /v1/routes` and `GET /v1/routes/{route_id}` (every
//! routing decision, with the state machine's events when it was executed), and
//! `GET /v1/skills/{name}/repairs` (a skill's repair records).

use std::sync::Arc;

use skillbox_protocol::result::ErrorKind;

use super::api::{CallList, RepairList, RouteDetail, RouteList};
use super::error::ApiError;
use super::request::{ok_of, ok_text, Reply, Req};
use super::Gateway;
use crate::approvals::ApprovalStatus;
use crate::calls::Dispatcher;
use crate::observe::metrics::CONTENT_TYPE;
use crate::observe::Scrape;
use crate::state::store::{CallFilter, StoreError};

/// The `limit` of a list when the request names none.
pub const DEFAULT_LIMIT: usize = 50;

/// `GET /metrics`.
pub async fn metrics(gw: &Gateway, _req: Req) -> Reply {
    let d = Arc::clone(&gw.dispatcher);
    let text = tokio::task::spawn_blocking(move || d.metrics().encode(&scrape(&d))).await?;
    Ok(ok_text(CONTENT_TYPE, text))
}

/// What the gauges show now: pending approvals, executor health, disabled skills.
pub fn scrape(d: &Dispatcher) -> Scrape {
    let approvals_pending = match d.approvals().list(Some(ApprovalStatus::Pending)) {
        Ok(list) => i64::try_from(list.len()).unwrap_or(i64::MAX),
        Err(e) => {
            tracing::warn!(error = %e, "metrics: cannot count pending approvals");
            0
        }
    };
    let executors = d
        .executor()
        .status()
        .into_iter()
        .map(|s| (s.address, s.healthy))
        .collect();
    let disabled = crate::skills::install::disabled::list(&d.catalog()).len();
    Scrape {
        approvals_pending,
        executors,
        disabled_skills: i64::try_from(disabled).unwrap_or(i64::MAX),
    }
}

/// The `limit` query parameter: 1 to `[observe] max_list_limit`, default [`DEFAULT_LIMIT`].
fn limit(gw: &Gateway, req: &Req) -> Result<usize, ApiError> {
    let max = gw.dispatcher.config().observe.max_list_limit;
    let Some(raw) = req.query_param("limit") else {
        return Ok(DEFAULT_LIMIT.min(max));
    };
    match raw.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(ApiError::new(
            ErrorKind::InvalidArgs,
            format!(
                "limit must be a number from 1 to {max} ([observe] max_list_limit), not {raw:?}"
            ),
        )),
    }
}

fn store_error(e: StoreError) -> ApiError {
    ApiError::new(ErrorKind::Unavailable, e.to_string())
}

/// `GET /v1/calls?limit=K[&skill=S][&outcome=success|<error_kind>]`: newest first.
pub async fn calls(gw: &Gateway, req: Req) -> Reply {
    let limit = limit(gw, &req)?;
    let filter = CallFilter {
        // A bot reads its own calls only.
        caller: (!req.caller.is_operator()).then(|| req.caller.name().to_owned()),
        skill: req.query_param("skill").filter(|s| !s.is_empty()),
        outcome: match req.query_param("outcome").as_deref() {
            None | Some("") => None,
            Some(o) => Some(parse_outcome(o)?),
        },
    };
    let store = gw.dispatcher.store().clone();
    let calls = tokio::task::spawn_blocking(move || store.recent_calls(&filter, limit))
        .await?
        .map_err(store_error)?;
    Ok(ok_of(&CallList { calls }))
}

/// `success`, or an error kind (docs/http-api.md).
pub fn parse_outcome(outcome: &str) -> Result<Option<ErrorKind>, ApiError> {
    if outcome == "success" {
        return Ok(None);
    }
    serde_json::from_value::<ErrorKind>(outcome.into())
        .map(Some)
        .map_err(|_| {
            ApiError::new(
                ErrorKind::InvalidArgs,
                format!("outcome must be \"success\" or an error kind (docs/http-api.md), not {outcome:?}"),
            )
        })
}

/// `GET /v1/routes?limit=K`: newest first.
pub async fn routes(gw: &Gateway, req: Req) -> Reply {
    let limit = limit(gw, &req)?;
    let store = gw.dispatcher.store().clone();
    let caller = (!req.caller.is_operator()).then(|| req.caller.name().to_owned());
    let routes = tokio::task::spawn_blocking(move || store.recent_routes(caller.as_deref(), limit))
        .await?
        .map_err(store_error)?;
    Ok(ok_of(&RouteList { routes }))
}

/// `GET /v1/routes/{route_id}`: the decision with candidates and breakdown, and the
/// events of its run when it was executed.
pub async fn route(gw: &Gateway, req: Req) -> Reply {
    let id = req.param("route_id")?.to_string();
    let store = gw.dispatcher.store().clone();
    let found = tokio::task::spawn_blocking(move || {
        let route = store.get_route(&id)?;
        let events = store.route_events(&id)?;
        Ok::<_, StoreError>(route.map(|r| (r, events)))
    })
    .await?
    .map_err(store_error)?;
    let found = found.filter(|(r, _)| req.caller.sees(&r.caller));
    let Some((route, events)) = found else {
        let id = req.param("route_id")?;
        return Err(ApiError::new(
            ErrorKind::NotFound,
            format!("no routing decision {id}; it may be older than the [observe] routes_kept newest. List them with GET /v1/routes"),
        ));
    };
    Ok(ok_of(&RouteDetail {
        route,
        executed: !events.is_empty(),
        events,
    }))
}

/// `GET /v1/skills/{name}/repairs`: the skill's repair records, oldest first.
pub async fn repairs(gw: &Gateway, req: Req) -> Reply {
    let name = req.param("name")?.to_string();
    let store = gw.dispatcher.store().clone();
    let records = tokio::task::spawn_blocking(move || store.repairs_of(&name))
        .await?
        .map_err(store_error)?;
    Ok(ok_of(&RepairList { repairs: records }))
}
