//! `POST /v1/skills/install` and `DELETE /v1/skills/{name}`: a verified install or a
//! removal (docs/signing-runbook.md), then a reload. A refusal answers
//! `{"error", "error_kind", "check"}` with the status of its kind.

use super::api::{InstallRequest, InstallResponse, RemoveResponse};
use super::reload;
use crate::gateway::web::error::ApiError;
use crate::gateway::web::request::{ok_of, Reply, Req};
use crate::gateway::Gateway;
use crate::reload::Cause;
use crate::skills::install::{self, remove, Limits};

/// `POST /v1/skills/install`.
pub async fn install(gw: &Gateway, req: Req) -> Reply {
    let body: InstallRequest = req.json().await?;
    let publisher_change = install::PublisherChange::allowed(body.allow_publisher_change);
    let source = match gw.skills_root.parent() {
        Some(ws) if body.source.is_relative() => ws.join(body.source),
        _ => body.source,
    };
    let policy = gw.trust.clone();
    let installed = tokio::task::spawn_blocking(move || {
        install::install(
            &source,
            &policy,
            Limits::default(),
            std::time::SystemTime::now(),
            publisher_change,
        )
    })
    .await?
    .map_err(|e| ApiError::refused(e.error_kind(), e.to_string(), e.check()))?;
    let reload = reload::after_change(gw, Cause::Install).await;
    let warning = installed.entry.publisher.is_none().then_some(
        "the package is not signed: installed with trust \"local\" because [trust] require_signed = false",
    );
    Ok(ok_of(&InstallResponse {
        installed,
        reload,
        warning,
    }))
}

/// `DELETE /v1/skills/{name}`: removes an installed skill and its lock entry
/// (docs/http-api.md).
pub async fn remove(gw: &Gateway, req: Req) -> Reply {
    let policy = gw.trust.clone();
    let name = req.param("name")?.to_string();
    let removed = tokio::task::spawn_blocking(move || remove::remove(&policy, &name))
        .await?
        .map_err(|e| ApiError::refused(e.error_kind(), e.to_string(), e.check()))?;
    let reload = reload::after_change(gw, Cause::Remove).await;
    Ok(ok_of(&RemoveResponse { removed, reload }))
}
