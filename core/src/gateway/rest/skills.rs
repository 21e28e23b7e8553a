//! `GET /v1/skills`, `GET /v1/skills/{name}` and `GET /v1/skills/{name}/files/{path}`: the
//! skills offered (and those the trust policy disabled, with the reason).

use std::sync::Arc;

use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::skill::{InstallLock, Skill};
use skillbox_protocol::ToolRef;

use super::api::{SkillDependencies, SkillDetail, SkillList, SkillSummary};
use crate::contexts::disclosure;
use crate::gateway::web::error::ApiError;
use crate::gateway::web::request::{ok, ok_of, Reply, Req};
use crate::gateway::Gateway;
use crate::skills::install::{disabled, verify};

/// `GET /v1/skills`: those the caller may use.
pub async fn list(gw: &Gateway, req: Req) -> Reply {
    let mut skills = skills(gw);
    skills.retain(|s| req.caller.may_use_skill(&s.name));
    Ok(ok_of(&SkillList { skills }))
}

/// `GET /v1/skills/{name}`: the summary, body, files, permissions and triggers.
pub async fn get(gw: &Gateway, req: Req) -> Reply {
    let name = req.param("name")?;
    if !req.caller.may_use_skill(name) {
        return Err(not_found(name));
    }
    let loaded = gw.skills.load.current();
    let catalog = Arc::clone(&loaded.catalog);
    let lock = InstallLock::read(&gw.skills_root).ok().flatten();
    let Some(s) = catalog.get(name) else {
        return match disabled::list(&catalog).iter().find(|d| d.name == name) {
            Some(d) => Ok(ok_of(&disabled_summary(d, lock.as_ref()))),
            None => Err(not_found(name)),
        };
    };
    Ok(ok_of(&SkillDetail {
        summary: summary(gw, s, lock.as_ref()),
        body: s.read_body().unwrap_or_default(),
        files: s.list_files().unwrap_or_default(),
        permissions: match loaded.grant_of(name) {
            Some((declared, _)) => declared.clone(),
            None => s.permissions.clone(),
        },
        granted: loaded.grant_of(name).map(|(_, g)| g.clone()),
        effective_permissions: s.permissions.clone(),
        triggers: s.routing.triggers.clone(),
        dependencies: SkillDependencies {
            declared: s.dependencies.clone(),
            build: gw.skills.availability.deps().and_then(|d| d.get(name)),
            problem: gw.skills.availability.deps().and_then(|d| d.problem(s)),
            progress: gw.skills.availability.deps().and_then(|d| d.progress(name)),
        },
    }))
}

/// `GET /v1/skills/{name}/files/{path}`: one file inside the skill folder.
pub async fn file(gw: &Gateway, req: Req) -> Reply {
    let name = req.param("name")?;
    let catalog = gw.skills.load.catalog();
    let skill = (catalog.get(name))
        .filter(|_| req.caller.may_use_skill(name))
        .ok_or_else(|| not_found(name))?;
    let workspace = gw.workspace();
    Ok(ok(&disclosure::file_response(
        skill,
        req.param("path")?,
        &workspace,
    )?))
}

fn not_found(name: &str) -> ApiError {
    ApiError::new(ErrorKind::NotFound, format!("no skill named {name:?}"))
}

fn summary(gw: &Gateway, s: &Skill, lock: Option<&InstallLock>) -> SkillSummary {
    let reason = gw.skills.availability.of(s).reason().map(str::to_string);
    SkillSummary {
        name: s.name.clone(),
        version: s.version.clone(),
        description: Some(s.description.clone()),
        available: reason.is_none(),
        reason,
        disabled: None,
        tools: (s.tools.iter())
            .map(|t| ToolRef::new(&s.name, &t.name).to_string())
            .collect(),
        trust: verify::trust_label(lock, &s.name),
        warnings: s.warnings.len(),
        script_warnings: gw.skills.availability.script_warnings(&s.name),
    }
}

/// The skills offered, then those the trust policy disabled (unavailable, with the reason).
fn skills(gw: &Gateway) -> Vec<SkillSummary> {
    let lock = InstallLock::read(&gw.skills_root).ok().flatten();
    let catalog = gw.skills.load.catalog();
    let mut out: Vec<SkillSummary> = catalog
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
fn disabled_summary(d: &disabled::Disabled, lock: Option<&InstallLock>) -> SkillSummary {
    SkillSummary {
        name: d.name.clone(),
        version: lock
            .and_then(|l| l.get(&d.name))
            .and_then(|e| e.version.clone()),
        description: None,
        available: false,
        reason: Some(d.reason.clone()),
        disabled: Some(true),
        tools: Vec::new(),
        trust: verify::trust_label(lock, &d.name),
        warnings: 0,
        script_warnings: Vec::new(),
    }
}
