//! `GET /v1/skills`, `GET /v1/skills/{name}` and `GET /v1/skills/{name}/files/{path}`: the
//! skills offered (and those the trust policy disabled, with the reason).

use serde_json::{json, Value};
use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::skill::{InstallLock, Skill};
use skillbox_protocol::ToolRef;

use super::error::ApiError;
use super::request::{ok, Reply, Req};
use super::Gateway;
use crate::contexts::disclosure;
use crate::skills::install::{disabled, verify};

/// `GET /v1/skills`.
pub async fn list(gw: &Gateway, _req: Req) -> Reply {
    Ok(ok(&json!({"skills": skills(gw)})))
}

/// `GET /v1/skills/{name}`: the summary, body, files, permissions and triggers.
pub async fn get(gw: &Gateway, req: Req) -> Reply {
    let name = req.param("name")?;
    let catalog = gw.dispatcher.catalog();
    let lock = InstallLock::read(&gw.skills_root).ok().flatten();
    let Some(s) = catalog.get(name) else {
        return match disabled::list(&catalog).iter().find(|d| d.name == name) {
            Some(d) => Ok(ok(&disabled_summary(d, lock.as_ref()))),
            None => Err(not_found(name)),
        };
    };
    let mut v = summary(gw, s, lock.as_ref());
    v["body"] = s.read_body().unwrap_or_default().into();
    v["files"] = serde_json::to_value(s.list_files().unwrap_or_default()).unwrap_or_default();
    v["permissions"] = serde_json::to_value(&s.permissions).unwrap_or_default();
    v["triggers"] = serde_json::to_value(&s.routing.triggers).unwrap_or_default();
    Ok(ok(&v))
}

/// `GET /v1/skills/{name}/files/{path}`: one file inside the skill folder.
pub async fn file(gw: &Gateway, req: Req) -> Reply {
    let name = req.param("name")?;
    let catalog = gw.dispatcher.catalog();
    let skill = catalog.get(name).ok_or_else(|| not_found(name))?;
    Ok(ok(&disclosure::file_response(skill, req.param("path")?)?))
}

fn not_found(name: &str) -> ApiError {
    ApiError::new(ErrorKind::NotFound, format!("no skill named {name:?}"))
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
fn skills(gw: &Gateway) -> Vec<Value> {
    let lock = InstallLock::read(&gw.skills_root).ok().flatten();
    let catalog = gw.dispatcher.catalog();
    let mut out: Vec<Value> = catalog
        .skills
        .iter()
        .map(|s| summary(gw, s, lock.as_ref()))
        .collect();
    for d in disabled::list(&catalog) {
        if catalog.get(&d.name).is_none() {
            out.push(disabled_summary(d, lock.as_ref()));
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
