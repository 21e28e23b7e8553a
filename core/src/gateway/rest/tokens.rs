//! `GET /v1/tokens`, `POST /v1/tokens` and `DELETE /v1/tokens/{name}`: the operator lists,
//! makes and revokes bot tokens ([`crate::auth::tokens`]). A new token is in the answer
//! of its creation only.

use serde::Deserialize;
use serde_json::json;
use skillbox_protocol::result::ErrorKind;

use crate::auth::TokenError;
use crate::gateway::web::error::ApiError;
use crate::gateway::web::request::{ok, Reply, Req};
use crate::gateway::Gateway;
use crate::random::SystemSource;

/// The body of `POST /v1/tokens`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    /// The bot's name.
    pub name: String,
    /// The skills it may use; every skill when absent.
    #[serde(default)]
    pub skills: Option<Vec<String>>,
    /// Days until it expires; never when absent.
    #[serde(default)]
    pub expires_days: Option<u64>,
}

impl From<TokenError> for ApiError {
    fn from(e: TokenError) -> Self {
        let kind = match &e {
            TokenError::BadName(_) | TokenError::BadSkill(_) | TokenError::BadExpiry(_) => {
                ErrorKind::InvalidArgs
            }
            TokenError::NoSuchBot(_) => ErrorKind::NotFound,
            TokenError::Expired { .. } => ErrorKind::PermissionDenied,
            TokenError::Store(crate::state::store::StoreError::TokenNameTaken { .. }) => {
                ErrorKind::InvalidArgs
            }
            TokenError::Random(_) | TokenError::Store(_) => ErrorKind::Unavailable,
        };
        ApiError::new(kind, e.to_string())
    }
}

/// `GET /v1/tokens`: every bot token (never the tokens themselves).
pub async fn list(gw: &Gateway, _req: Req) -> Reply {
    Ok(ok(&json!({ "tokens": gw.bots.list() })))
}

/// `POST /v1/tokens`: makes a token; the answer holds it, once.
pub async fn create(gw: &Gateway, req: Req) -> Reply {
    let body: CreateToken = req.json().await?;
    let bots = std::sync::Arc::clone(&gw.bots);
    let (token, info) = tokio::task::spawn_blocking(move || {
        bots.create(
            &SystemSource::default(),
            &body.name,
            body.skills,
            body.expires_days,
        )
    })
    .await??;
    let mut answer = serde_json::to_value(&info).unwrap_or_default();
    answer["token"] = token.into();
    Ok(ok(&answer))
}

/// `DELETE /v1/tokens/{name}`: revokes the token, at once: its next request is refused,
/// the command sessions the bot started end with their processes, and the approvals it
/// waits on are refused (a call waiting on one hears `approval_denied`).
pub async fn revoke(gw: &Gateway, req: Req) -> Reply {
    let name = req.param("name")?.to_string();
    let bots = std::sync::Arc::clone(&gw.bots);
    let revoked = name.clone();
    tokio::task::spawn_blocking(move || bots.revoke(&revoked)).await??;
    let sessions = gw.tokens.pipeline.close_sessions_of(&name).await;
    let approvals = std::sync::Arc::clone(&gw.tokens.approvals);
    let refusing = name.clone();
    let refused =
        tokio::task::spawn_blocking(move || approvals.refuse_pending_of(&refusing)).await??;
    Ok(ok(&json!({
        "revoked": name,
        "sessions_ended": sessions,
        "approvals_refused": refused.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
    })))
}
