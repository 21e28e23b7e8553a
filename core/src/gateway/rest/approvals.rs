//! `GET /v1/approvals` and `POST /v1/approvals/{id}`: the approvals of write and sign calls
//! (a bot sees those of its own calls), and a decision on one: the operator's, or a bot's
//! relay of its user's confirmation where the policy allows it ([`crate::approvals`]).

use serde_json::Value;

use super::api::{ApprovalList, DecisionRequest};
use crate::gateway::web::request::{ok_of, Reply, Req};
use crate::gateway::Gateway;
use crate::state::store::ApprovalStatus;

/// `GET /v1/approvals[?status=pending|approved|...]`.
pub async fn list(gw: &Gateway, req: Req) -> Reply {
    let status = req
        .query_param("status")
        .and_then(|s| ApprovalStatus::from_name(&s));
    let list = gw.approvals.approvals.list(status)?;
    let approvals: Vec<Value> = (list.iter())
        .filter(|a| req.caller.sees(&a.requested_by))
        .map(crate::approvals::payload::view)
        .collect();
    Ok(ok_of(&ApprovalList { approvals }))
}

/// `POST /v1/approvals/{id}`: approves or denies a pending approval; answers the record.
pub async fn decide(gw: &Gateway, req: Req) -> Reply {
    let id = req.param("id")?.to_string();
    let caller = req.caller.clone();
    let body: DecisionRequest = req.json().await?;
    let record = gw
        .approvals
        .approvals
        .decide_as(&caller, &id, body.decision, body.reason)?;
    Ok(ok_of(&record))
}
