//! The gateway routes (docs/http-api.md describes each); a known path asked with another
//! method is answered 405 by [`super::allow`].

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use skillbox_protocol::methods::HealthResult;
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::skill::{InstallLock, Skill};
use skillbox_protocol::ToolRef;

use super::{json_response, ApiError, Gateway};
use crate::approvals::ApprovalError;
use crate::contexts::{self, disclosure};
use crate::install::{self, disabled, remove, verify, Limits};
use crate::reload::Cause;
use crate::repair::{RepairProposal, RepairTarget};
use crate::store::{ApprovalStatus, Decision};

type Reply = Result<Response<Full<Bytes>>, ApiError>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CallRequest {
    tool: String,
    #[serde(default)]
    args: Value,
    context_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InstallRequest {
    /// A skill folder or `.tar.gz` on the core's machine; relative to the workspace.
    source: std::path::PathBuf,
    /// Let the package replace an installed signed skill of another publisher.
    #[serde(default)]
    allow_publisher_change: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionRequest {
    decision: String,
    reason: Option<String>,
}

/// Dispatches one request to its route.
pub async fn route(gw: &Gateway, req: Request<Incoming>) -> Reply {
    let path = req.uri().path().to_string();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (req.method().clone(), segments.as_slice()) {
        (Method::GET, ["healthz"]) => healthz(gw).await,
        (Method::GET, ["v1", "skills"]) => Ok(ok(&json!({"skills": skills(gw, false)}))),
        (Method::GET, ["v1", "skills", name]) => skill(gw, name),
        (Method::GET, ["v1", "tools"]) => Ok(ok(&json!({"tools": tools(gw)}))),
        (Method::POST, ["v1", "tools", "call"]) => {
            let body: CallRequest = read_json(gw, req).await?;
            let args = if body.args.is_null() {
                json!({})
            } else {
                body.args
            };
            let result = call_tool(gw, body.tool, args, body.context_id).await;
            Ok(ok(&serde_json::to_value(&result).unwrap_or_default()))
        }
        (Method::POST, ["v1", "route", "execute"]) => {
            let body: crate::router::ExecuteParams = read_json(gw, req).await?;
            let ws = gw.skills_root.parent().map(std::path::Path::to_path_buf);
            let run =
                crate::router::execute_request(std::sync::Arc::clone(&gw.dispatcher), ws, body)
                    .await
                    .map_err(|(kind, msg)| ApiError::new(kind, msg))?;
            Ok(ok(&serde_json::to_value(run).unwrap_or_default()))
        }
        (Method::GET, ["v1", "skills", name, "files", rest @ ..]) if !rest.is_empty() => {
            skill_file(gw, name, &rest.join("/"))
        }
        (Method::GET, ["v1", "contexts", id]) => context(gw, id, None).await,
        (Method::PUT, ["v1", "contexts", id, "skills", name]) => {
            context(gw, id, Some((true, name))).await
        }
        (Method::DELETE, ["v1", "contexts", id, "skills", name]) => {
            context(gw, id, Some((false, name))).await
        }
        (Method::POST, ["v1", "route"]) => {
            let body: crate::router::RouteParams = read_json(gw, req).await?;
            let ws = gw.skills_root.parent().map(std::path::Path::to_path_buf);
            let plan =
                crate::router::route_request(std::sync::Arc::clone(&gw.dispatcher), ws, body)
                    .await
                    .ok_or_else(|| ApiError::new(ErrorKind::Unavailable, "routing failed; retry"))?
                    .map_err(|e| ApiError::new(ErrorKind::Unavailable, e.to_string()))?;
            Ok(ok(&serde_json::to_value(plan).unwrap_or_default()))
        }
        (Method::POST, ["v1", "skills", "reload"]) => reload(gw, Cause::Request).await,
        (Method::POST, ["v1", "skills", "install"]) => {
            let body: InstallRequest = read_json(gw, req).await?;
            let change = install::PublisherChange::allowed(body.allow_publisher_change);
            install_skill(gw, body.source, change).await
        }
        (Method::POST, ["v1", "skills", name, "repairs"]) => {
            let name = name.to_string();
            repair_skill(gw, name, read_json(gw, req).await?).await
        }
        (Method::DELETE, ["v1", "skills", name]) => remove_skill(gw, name).await,
        (Method::POST, ["v1", "trust", "reload"]) => reload(gw, Cause::Request).await,
        (Method::GET, ["v1", "approvals"]) => {
            let status = query_param(req.uri().query(), "status")
                .and_then(|s| ApprovalStatus::from_name(&s));
            let list = gw
                .dispatcher
                .approvals()
                .list(status)
                .map_err(approval_error)?;
            let list: Vec<Value> = list.iter().map(crate::approvals::payload::view).collect();
            Ok(ok(&json!({"approvals": list})))
        }
        (Method::POST, ["v1", "approvals", id]) => {
            let id = id.to_string();
            let body: DecisionRequest = read_json(gw, req).await?;
            let decision = match body.decision.as_str() {
                "approve" => Decision::Approve,
                "deny" => Decision::Deny,
                other => {
                    return Err(ApiError::new(
                        ErrorKind::InvalidArgs,
                        format!("decision {other:?}: use \"approve\" or \"deny\""),
                    ))
                }
            };
            let record = gw
                .dispatcher
                .approvals()
                .decide(&id, decision, body.reason)
                .map_err(approval_error)?;
            Ok(ok(&serde_json::to_value(record).unwrap_or_default()))
        }
        _ => Ok(super::allow::no_route(req.method(), &path, &segments)),
    }
}

fn ok(body: &Value) -> Response<Full<Bytes>> {
    json_response(StatusCode::OK, body)
}

fn approval_error(e: ApprovalError) -> ApiError {
    let kind = match &e {
        ApprovalError::NotFound { .. } => ErrorKind::NotFound,
        _ => e.error_kind(),
    };
    let mut err = ApiError::new(kind, e.to_string());
    if matches!(e, ApprovalError::Store(_)) {
        err.status = StatusCode::CONFLICT;
    }
    err
}

async fn read_json<T: DeserializeOwned>(
    gw: &Gateway,
    req: Request<Incoming>,
) -> Result<T, ApiError> {
    let bytes = Limited::new(req.into_body(), gw.max_request_bytes)
        .collect()
        .await
        .map_err(|_| {
            let mut e = ApiError::new(
                ErrorKind::InvalidArgs,
                format!(
                    "request body over the {}-byte limit (gateway.max_request_bytes)",
                    gw.max_request_bytes
                ),
            );
            e.status = StatusCode::PAYLOAD_TOO_LARGE;
            e
        })?
        .to_bytes();
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::new(ErrorKind::InvalidArgs, format!("request body: {e}")))
}

fn query_param(query: Option<&str>, key: &str) -> Option<String> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_string())
}

/// The executors as of the pool's last health round (`[executor] health_interval_ms`):
/// asking one here would shift the round robin and count as a call.
async fn healthz(gw: &Gateway) -> Reply {
    let pool = gw.dispatcher.executor();
    let health = pool
        .health()
        .and_then(|v| serde_json::from_value::<HealthResult>(v).ok());
    let executor = if health.is_some() { "ok" } else { "down" };
    Ok(ok(&json!({
        "status": "ok",
        "executor": executor,
        "sandbox": health,
        "executors": pool.status(),
        "supervisor": gw.supervisor.as_ref().map(|s| s.status()),
        "container_sandbox": gw.dispatcher.has_container_sandbox(),
    })))
}

fn summary(gw: &Gateway, s: &Skill, lock: Option<&InstallLock>) -> Value {
    let reason = gw.dispatcher.unavailable_reason(s);
    json!({
        "name": s.name,
        "version": s.version,
        "description": s.description,
        "available": reason.is_none(),
        "reason": reason,
        "tools": s.tools.iter().map(|t| ToolRef::new(&s.name, &t.name).to_string()).collect::<Vec<_>>(),
        "trust": verify::trust_label(lock, &s.name),
        "warnings": s.warnings.len(),
    })
}

/// The skills offered, then those the trust policy disabled (unavailable, with the reason).
fn skills(gw: &Gateway, _full: bool) -> Vec<Value> {
    let lock = InstallLock::read(&gw.skills_root).ok().flatten();
    let catalog = gw.dispatcher.catalog();
    let mut out: Vec<Value> = catalog
        .skills
        .iter()
        .map(|s| summary(gw, s, lock.as_ref()))
        .collect();
    for d in disabled::list(&catalog) {
        if catalog.get(&d.name).is_none() {
            out.push(disabled_summary(&d, lock.as_ref()));
        }
    }
    out
}

/// A skill the trust policy disabled: unavailable, with the reason, and no tools.
fn disabled_summary(d: &disabled::Disabled, lock: Option<&InstallLock>) -> Value {
    json!({
        "name": d.name,
        "version": lock.and_then(|l| l.get(&d.name)).and_then(|e| e.version.clone()),
        "description": null,
        "available": false,
        "reason": d.reason,
        "disabled": true,
        "tools": [],
        "trust": verify::trust_label(lock, &d.name),
        "warnings": 0,
    })
}

fn skill(gw: &Gateway, name: &str) -> Reply {
    let catalog = gw.dispatcher.catalog();
    let lock = InstallLock::read(&gw.skills_root).ok().flatten();
    let Some(s) = catalog.get(name) else {
        return match disabled::list(&catalog).iter().find(|d| d.name == name) {
            Some(d) => Ok(ok(&disabled_summary(d, lock.as_ref()))),
            None => Err(ApiError::new(
                ErrorKind::NotFound,
                format!("no skill named {name:?}"),
            )),
        };
    };
    let mut v = summary(gw, s, lock.as_ref());
    v["body"] = s.read_body().unwrap_or_default().into();
    v["files"] = serde_json::to_value(s.list_files().unwrap_or_default()).unwrap_or_default();
    v["permissions"] = serde_json::to_value(&s.permissions).unwrap_or_default();
    v["triggers"] = serde_json::to_value(&s.routing.triggers).unwrap_or_default();
    Ok(ok(&v))
}

fn tools(gw: &Gateway) -> Vec<Value> {
    let catalog = gw.dispatcher.catalog();
    let mut out: Vec<Value> = catalog
        .skills
        .iter()
        .flat_map(|s| {
            s.tools.iter().map(move |t| {
                json!({
                    "name": ToolRef::new(&s.name, &t.name).to_string(),
                    "description": t.description,
                    "parameters": t.parameters,
                    "security": t.security,
                })
            })
        })
        .collect();
    out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let available: Vec<String> = catalog
        .skills
        .iter()
        .filter(|s| gw.dispatcher.unavailable_reason(s).is_none())
        .map(|s| s.name.clone())
        .collect();
    out.extend(disclosure::builtin_tools(&available));
    out
}

/// `POST /v1/tools/call`: a built-in tool or a skill's tool, refused when a context is
/// given and the tool is not among its active tools.
async fn call_tool(
    gw: &Gateway,
    tool: String,
    args: Value,
    context_id: Option<String>,
) -> ToolResult {
    // Results answered here (built-ins, refusals) get an id of their own, as dispatched
    // calls do; dispatched calls draw theirs in the dispatcher.
    let call_id = match gw.dispatcher.new_call_id() {
        Ok(id) => id,
        Err(e) => return ToolResult::failed("", ErrorKind::Unavailable, e.to_string(), 0),
    };
    let refused = |e: &dyn std::fmt::Display, kind: ErrorKind| {
        ToolResult::failed(call_id.clone(), kind, e.to_string(), 0)
    };
    let catalog = gw.dispatcher.catalog();
    let view = match context_id {
        Some(id) => {
            let d = std::sync::Arc::clone(&gw.dispatcher);
            let c = std::sync::Arc::clone(&catalog);
            match tokio::task::spawn_blocking(move || crate::router::context_view(&d, &c, &id))
                .await
            {
                Ok(Ok(v)) => Some(v),
                Ok(Err(e)) => return refused(&e, e.error_kind()),
                Err(e) => return refused(&e, ErrorKind::Unavailable),
            }
        }
        None => None,
    };
    if let Some(v) = view.as_ref().filter(|v| !v.allows(&tool)) {
        return refused(&v.refusal(&tool), ErrorKind::PermissionDenied);
    }
    match tool.as_str() {
        disclosure::LOAD_SKILL => match disclosure::load_skill(&catalog, &args) {
            Ok(data) => ToolResult::ok(call_id.clone(), data, 0),
            Err(e) => refused(&e, e.error_kind()),
        },
        disclosure::RUN_SKILL_SCRIPT => match disclosure::resolve_script(&catalog, &args) {
            Ok((full, call_args)) => {
                // In a context, the script's tool must be active or its skill pinned.
                let skill = ToolRef::parse(&full).map(|r| r.skill).unwrap_or_default();
                if let Some(v) = view
                    .as_ref()
                    .filter(|v| !v.allows(&full) && !v.pinned.iter().any(|p| p.name == skill))
                {
                    return refused(&v.refusal(&full), ErrorKind::PermissionDenied);
                }
                gw.dispatcher.call(&full, call_args).await
            }
            Err(e) => refused(&e, e.error_kind()),
        },
        _ => gw.dispatcher.call(&tool, args).await,
    }
}

/// `GET /v1/skills/{name}/files/{path}`: one file inside the skill folder.
fn skill_file(gw: &Gateway, name: &str, path: &str) -> Reply {
    let catalog = gw.dispatcher.catalog();
    let skill = catalog
        .get(name)
        .ok_or_else(|| ApiError::new(ErrorKind::NotFound, format!("no skill named {name:?}")))?;
    disclosure::file_response(skill, path)
        .map(|v| ok(&v))
        .map_err(|e| ApiError::new(e.error_kind(), e.to_string()))
}

/// `GET /v1/contexts/{id}`, and with `change` a pin (`true`) or unpin of a skill first;
/// answers the context as it is after the change.
async fn context(gw: &Gateway, id: &str, change: Option<(bool, &str)>) -> Reply {
    let d = std::sync::Arc::clone(&gw.dispatcher);
    let id = id.to_string();
    let change = change.map(|(pin, name)| (pin, name.to_string()));
    let result = tokio::task::spawn_blocking(move || {
        let catalog = d.catalog();
        let changed = match &change {
            Some((true, name)) => Some(contexts::pin(d.store(), &catalog, &id, name)?),
            Some((false, name)) => Some(contexts::unpin(d.store(), &id, name)?),
            None => None,
        };
        let view = crate::router::context_view(&d, &catalog, &id)?;
        Ok::<_, contexts::ContextError>((changed, view))
    })
    .await
    .map_err(|e| ApiError::new(ErrorKind::Unavailable, e.to_string()))?;
    let (changed, view) = result.map_err(|e| ApiError::new(e.error_kind(), e.to_string()))?;
    let mut body = serde_json::to_value(view).unwrap_or_default();
    if let Some(changed) = changed {
        body["changed"] = changed.into();
    }
    Ok(ok(&body))
}

/// Rediscovers the skills, re-verifies them with the trust store as it is now (a skill
/// that no longer verifies is disabled with the reason), swaps the catalog (calls in flight
/// keep the one they started with) and has the executor reload: [`crate::reload`].
async fn reload(gw: &Gateway, cause: Cause) -> Reply {
    let report = gw
        .reloader
        .reload(cause)
        .await
        .map_err(|e| ApiError::new(e.error_kind(), e.to_string()))?;
    Ok(ok(&serde_json::to_value(report).unwrap_or_default()))
}

/// `POST /v1/skills/install`: a verified install (docs/signing-runbook.md), then a reload. A refusal
/// answers `{"error", "error_kind", "check"}` with the status of its kind.
async fn install_skill(
    gw: &Gateway,
    source: std::path::PathBuf,
    publisher_change: install::PublisherChange,
) -> Reply {
    let source = match gw.skills_root.parent() {
        Some(ws) if source.is_relative() => ws.join(source),
        _ => source,
    };
    let policy = gw.trust.clone();
    let result = tokio::task::spawn_blocking(move || {
        install::install(
            &source,
            &policy,
            Limits::default(),
            std::time::SystemTime::now(),
            publisher_change,
        )
    })
    .await
    .map_err(|e| ApiError::new(ErrorKind::Unavailable, e.to_string()))?;
    let installed = match result {
        Ok(i) => i,
        Err(e) => return Ok(refusal(&e.to_string(), e.error_kind(), e.check())),
    };
    let reloaded = reload(gw, Cause::Install).await;
    let reload_body = match reloaded {
        Ok(_) => json!("ok"),
        Err(e) => json!({"error": e.message}),
    };
    let mut body = json!({"installed": installed, "reload": reload_body});
    if installed.entry.publisher.is_none() {
        body["warning"] = json!("the package is not signed: installed with trust \"local\" because [trust] require_signed = false");
    }
    Ok(ok(&body))
}

/// `DELETE /v1/skills/{name}`: removes an installed skill and its lock entry
/// (docs/http-api.md), then reloads. A refusal answers `{"error", "error_kind", "check"}`.
async fn remove_skill(gw: &Gateway, name: &str) -> Reply {
    let policy = gw.trust.clone();
    let name = name.to_string();
    let result = tokio::task::spawn_blocking(move || remove::remove(&policy, &name))
        .await
        .map_err(|e| ApiError::new(ErrorKind::Unavailable, e.to_string()))?;
    let removed = match result {
        Ok(r) => r,
        Err(e) => return Ok(refusal(&e.to_string(), e.error_kind(), e.check())),
    };
    let reload_body = match reload(gw, Cause::Remove).await {
        Ok(_) => json!("ok"),
        Err(e) => json!({"error": e.message}),
    };
    Ok(ok(&json!({"removed": removed, "reload": reload_body})))
}

/// `POST /v1/skills/{name}/repairs`: judges a repair proposal and applies it
/// ([`crate::repair`]), then reloads. A refusal answers `{"error", "error_kind", "check"}`.
async fn repair_skill(gw: &Gateway, name: String, proposal: RepairProposal) -> Reply {
    let d = std::sync::Arc::clone(&gw.dispatcher);
    let root = gw.skills_root.clone();
    let config = gw
        .skills_root
        .parent()
        .and_then(|ws| crate::config::Config::load(ws).ok())
        .map(|c| c.repair)
        .unwrap_or_default();
    let result = tokio::task::spawn_blocking(move || {
        let catalog = d.catalog();
        let target = RepairTarget {
            skills_root: &root,
            catalog: &catalog,
            store: d.store(),
            config: &config,
        };
        crate::repair::propose(&target, &name, &proposal)
    })
    .await
    .map_err(|e| ApiError::new(ErrorKind::Unavailable, e.to_string()))?;
    let record = match result {
        Ok(r) => r,
        Err(e) => return Ok(refusal(&e.to_string(), e.error_kind(), e.check())),
    };
    let reload_body = match reload(gw, Cause::Repair).await {
        Ok(_) => json!("ok"),
        Err(e) => json!({"error": e.message}),
    };
    Ok(ok(&json!({"repair": record, "reload": reload_body})))
}

/// A refused install or removal: the status of its kind, and the check that refused it.
fn refusal(message: &str, kind: ErrorKind, check: &str) -> Response<Full<Bytes>> {
    let status = ApiError::new(kind, "").status;
    json_response(
        status,
        &json!({"error": message, "error_kind": kind, "check": check}),
    )
}
