//! `GET /v1/contexts/{id}` and `PUT`/`DELETE /v1/contexts/{id}/skills/{name}`: a caller's
//! context, and pinning or unpinning a skill in it ([`crate::contexts`]).

use crate::contexts;
use crate::gateway::web::request::{ok, Reply, Req};
use crate::gateway::Gateway;

/// `GET /v1/contexts/{id}`.
pub async fn get(gw: &Gateway, req: Req) -> Reply {
    context(gw, &req, None).await
}

/// `PUT /v1/contexts/{id}/skills/{name}`: pins the skill.
pub async fn pin(gw: &Gateway, req: Req) -> Reply {
    let name = req.param("name")?.to_string();
    context(gw, &req, Some((true, name))).await
}

/// `DELETE /v1/contexts/{id}/skills/{name}`: unpins the skill.
pub async fn unpin(gw: &Gateway, req: Req) -> Reply {
    let name = req.param("name")?.to_string();
    context(gw, &req, Some((false, name))).await
}

/// The context, after the pin (`true`) or unpin of `change` when given; `changed` in the
/// answer says whether that changed anything.
async fn context(gw: &Gateway, req: &Req, change: Option<(bool, String)>) -> Reply {
    let d = gw.contexts.clone();
    let id = req.param("id")?.to_string();
    let caller = req.caller.clone();
    if let Some(why) = change.as_ref().and_then(|(_, n)| caller.skill_refusal(n)) {
        return Err(crate::gateway::ApiError::new(
            skillbox_protocol::result::ErrorKind::PermissionDenied,
            why,
        ));
    }
    let (changed, view) = tokio::task::spawn_blocking(move || {
        let catalog = d.load.catalog();
        contexts::enter(&d.store, &caller, &id)?;
        let changed = match &change {
            Some((true, name)) => Some(contexts::pin(&d.store, &catalog, &id, name)?),
            Some((false, name)) => Some(contexts::unpin(&d.store, &id, name)?),
            None => None,
        };
        let view = d.pipeline.context_view(&caller, &id)?;
        Ok::<_, contexts::ContextError>((changed, view))
    })
    .await??;
    let mut body = serde_json::to_value(view).unwrap_or_default();
    if let Some(changed) = changed {
        body["changed"] = changed.into();
    }
    Ok(ok(&body))
}
