//! `POST /v1/skills/reload` and `POST /v1/trust/reload`: rediscover the skills and
//! re-verify them with the trust store as it is now ([`crate::reload`]).

use super::api::ReloadOutcome;
use crate::gateway::web::request::{ok_of, Reply, Req};
use crate::gateway::Gateway;
use crate::reload::Cause;

/// `POST /v1/skills/reload`.
pub async fn skills(gw: &Gateway, _req: Req) -> Reply {
    reload(gw, Cause::Request).await
}

/// `POST /v1/trust/reload`.
pub async fn trust(gw: &Gateway, _req: Req) -> Reply {
    reload(gw, Cause::Request).await
}

/// Rediscovers the skills, re-verifies them with the trust store as it is now (a skill
/// that no longer verifies is disabled with the reason), swaps the catalog (calls in flight
/// keep the one they started with) and has the executor reload: [`crate::reload`].
async fn reload(gw: &Gateway, cause: Cause) -> Reply {
    Ok(ok_of(&gw.reloader.reload(cause).await?))
}

/// The reload after an install, removal or repair, as the answer's `reload` field: `"ok"`
/// or `{"error": ...}` (the change itself stands either way).
pub async fn after_change(gw: &Gateway, cause: Cause) -> ReloadOutcome {
    match gw.reloader.reload(cause).await {
        Ok(_) => ReloadOutcome::Ok("ok"),
        Err(e) => ReloadOutcome::Failed {
            error: e.to_string(),
        },
    }
}
