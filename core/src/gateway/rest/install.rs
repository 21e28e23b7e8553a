//! `POST /v1/skills/install`, `POST /v1/skills/{name}/update` and `DELETE /v1/skills/{name}`:
//! a verified install (of a folder, an archive or a git source), an update from a skill's
//! git source, or a removal (docs/http-api.md), then a reload. A refusal answers
//! `{"error", "error_kind", "check"}` with the status of its kind.
//!
//! An update is applied at once only under `[skills] auto_update` and when it widens no
//! permission; otherwise it waits for an operator's approval in the console (or
//! `skillbox approvals approve`), which shows the difference. No auto-approve policy or
//! allowance stands in for that approval.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::json;
use skillbox_protocol::skill::Security;

use super::api::{AddResponse, InstallRequest, InstallResponse, RemoveResponse, UpdateResponse};
use super::reload;
use crate::approvals::ApprovalRequest;
use crate::gateway::web::error::ApiError;
use crate::gateway::web::request::{ok_of, Reply, Req};
use crate::gateway::Gateway;
use crate::reload::Cause;
use crate::skills::install::{self, remove, Limits, PublisherChange};
use crate::skills::sources::{AddRequest, SourceError, Sources, UpdateCheck};
use crate::state::config::Config;
use crate::state::Workspace;

/// The tool name an update's approval carries (no tool can have it: tool names have no
/// dots).
pub const UPDATE_APPROVAL_TOOL: &str = "skillbox.update";

fn source_refused(e: SourceError) -> ApiError {
    ApiError::refused(e.error_kind(), e.to_string(), e.check())
}

/// The workspace's git sources, with the configuration read now.
fn sources(gw: &Gateway) -> Result<Sources, ApiError> {
    let ws = Workspace::new(gw.workspace());
    let config = Config::load(ws.root()).map_err(|e| {
        ApiError::new(
            skillbox_protocol::result::ErrorKind::Unavailable,
            format!("reading skillbox.toml: {e}"),
        )
    })?;
    Ok(Sources::for_workspace(&ws, &config, gw.trust.clone()))
}

/// Whether `source` names a folder or archive on this machine (the plain install).
fn is_local_path(ws: &Path, source: &str) -> bool {
    source.starts_with('/')
        || source.starts_with('.')
        || source.ends_with(".tar.gz")
        || (ws.join(source).exists() && !ws.join(source).join(".git").exists())
}

/// `POST /v1/skills/install`.
pub async fn install(gw: &Gateway, req: Req) -> Reply {
    let body: InstallRequest = req.json().await?;
    let publisher_change = PublisherChange::allowed(body.allow_publisher_change);
    let ws = gw.workspace();
    if !is_local_path(&ws, &body.source) || !body.skills.is_empty() || body.reference.is_some() {
        return add(gw, body, publisher_change).await;
    }
    let source: PathBuf = ws.join(&body.source);
    let policy = gw.trust.clone();
    let installed = tokio::task::spawn_blocking(move || {
        install::install(
            &source,
            &policy,
            Limits::default(),
            SystemTime::now(),
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

/// `POST /v1/skills/install` of a git source (`skillbox skill add`).
async fn add(gw: &Gateway, body: InstallRequest, publisher_change: PublisherChange) -> Reply {
    let sources = sources(gw)?;
    let req = AddRequest {
        source: body.source,
        skills: body.skills,
        reference: body.reference,
        all: body.all,
        publisher_change,
    };
    let added = tokio::task::spawn_blocking(move || sources.add(&req, SystemTime::now()))
        .await?
        .map_err(source_refused)?;
    let reload = reload::after_change(gw, Cause::Install).await;
    Ok(ok_of(&AddResponse { added, reload }))
}

/// `POST /v1/skills/{name}/update`: fetches the skill's source again; applies the update
/// at once only when `auto_update` allows and it widens nothing, else after an operator
/// approves it.
pub async fn update(gw: &Gateway, req: Req) -> Reply {
    let name = req.param("name")?.to_string();
    let sources = sources(gw)?;
    let (s, n) = (sources.clone(), name.clone());
    let prepared = tokio::task::spawn_blocking(move || s.prepare_update(&n, SystemTime::now()))
        .await?
        .map_err(source_refused)?;
    let quiet = |status, from, to| {
        ok_of(&UpdateResponse {
            status,
            from,
            to,
            widens: false,
            diff: None,
            approval_id: None,
            reload: None,
        })
    };
    let update = match prepared {
        UpdateCheck::UpToDate => return Ok(quiet("up_to_date", None, None)),
        UpdateCheck::FolderUnchanged {
            from_commit,
            to_commit,
        } => {
            return Ok(quiet(
                "folder_unchanged",
                Some(from_commit),
                Some(to_commit),
            ))
        }
        UpdateCheck::Changed(update) => *update,
    };
    let widens = update.diff.widens();
    let (from, to, diff) = (
        update.from_commit.clone(),
        update.to_commit.clone(),
        update.diff.clone(),
    );
    let mut approval_id = None;
    if update.needs_confirmation(sources.auto_update) {
        let grant = gw
            .skills
            .approvals
            .request_confirmation(ApprovalRequest {
                skill: name.clone(),
                tool: UPDATE_APPROVAL_TOOL.into(),
                args: json!({
                    "update": {"from": from, "to": to, "widens": widens},
                    "changes": diff,
                }),
                security: Security::Write,
                requested_by: "operator".into(),
                context_id: None,
            })
            .await
            .map_err(|e| ApiError::refused(e.error_kind(), e.to_string(), "approval"))?;
        approval_id = grant.approval_id().map(String::from);
    }
    tokio::task::spawn_blocking(move || sources.apply_update(update, SystemTime::now()))
        .await?
        .map_err(source_refused)?;
    let reload = reload::after_change(gw, Cause::Install).await;
    Ok(ok_of(&UpdateResponse {
        status: "updated",
        from: Some(from),
        to: Some(to),
        widens,
        diff: Some(diff),
        approval_id,
        reload: Some(reload),
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
