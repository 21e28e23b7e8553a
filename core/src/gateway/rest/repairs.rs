//! `POST /v1/skills/{name}/repairs`: judges a repair proposal and applies it
//! ([`crate::repair`]), then reloads. A refusal answers `{"error", "error_kind", "check"}`.

use super::api::{RepairProposal, RepairResponse};
use super::reload;
use crate::gateway::web::error::ApiError;
use crate::gateway::web::request::{ok_of, Reply, Req};
use crate::gateway::Gateway;
use crate::reload::Cause;
use crate::repair::RepairTarget;

/// `POST /v1/skills/{name}/repairs`.
pub async fn propose(gw: &Gateway, req: Req) -> Reply {
    let name = req.param("name")?.to_string();
    let proposal: RepairProposal = req.json().await?;
    let d = gw.skills.clone();
    let root = gw.skills_root.clone();
    // The [repair] settings of the latest load (read once with the catalogue).
    let config = gw.skills.load.config().repair.clone();
    let record = tokio::task::spawn_blocking(move || {
        let catalog = d.load.catalog();
        let target = RepairTarget {
            skills_root: &root,
            catalog: &catalog,
            store: &d.store,
            config: &config,
        };
        crate::repair::propose(&target, &name, &proposal)
    })
    .await?
    .map_err(|e| ApiError::refused(e.error_kind(), e.to_string(), e.check()))?;
    let reload = reload::after_change(gw, Cause::Repair).await;
    Ok(ok_of(&RepairResponse {
        repair: record,
        reload,
    }))
}
