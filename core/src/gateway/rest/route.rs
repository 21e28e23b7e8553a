//! `POST /v1/route` (an activation plan for a query) and `POST /v1/route/execute` (the plan
//! run with its fallback chain): [`crate::router`].

use skillbox_protocol::result::ErrorKind;

use super::api::{ExecuteRequest, RouteRequest};
use crate::gateway::web::error::ApiError;
use crate::gateway::web::request::{ok_of, Reply, Req};
use crate::gateway::Gateway;

/// `POST /v1/route`.
pub async fn plan(gw: &Gateway, req: Req) -> Reply {
    let caller = req.caller.clone();
    let body: RouteRequest = req.json().await?;
    let plan = super::route_plan::route_request(gw.calls.clone(), caller, body)
        .await
        .ok_or_else(|| ApiError::new(ErrorKind::Unavailable, "routing failed; retry"))?
        .map_err(|e| ApiError::new(e.error_kind(), e.to_string()))?;
    Ok(ok_of(&plan))
}

/// `POST /v1/route/execute`.
pub async fn execute(gw: &Gateway, req: Req) -> Reply {
    let caller = req.caller.clone();
    let trace = req.traceparent();
    let body: ExecuteRequest = req.json().await?;
    let run = super::route_execute::execute_request(gw.calls.clone(), caller, body, trace).await?;
    Ok(ok_of(&run))
}
