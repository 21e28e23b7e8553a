//! `POST /v1/skills/{name}/deps`: builds a skill's Python dependencies on every executor
//! (docs/sandbox.md, "Dependencies") and answers the build's record: `ok`, the packages
//! with their SHA-256 (the lock), the installer's last lines. `{"rebuild": true}`
//! resolves the requirements again instead of installing the last lock.

use serde::Deserialize;

use crate::gateway::web::error::ApiError;
use crate::gateway::web::request::{ok_of, Reply, Req};
use crate::gateway::Gateway;

/// The request body (optional).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct DepsRequest {
    rebuild: bool,
}

/// `POST /v1/skills/{name}/deps`.
pub async fn build(gw: &Gateway, req: Req) -> Reply {
    let name = req.param("name")?.to_string();
    let body: DepsRequest = req.json_or_default().await?;
    let record = (gw.skills.deps)
        .build(&name, body.rebuild)
        .await
        .map_err(|e| ApiError::new(e.kind(), e.to_string()))?;
    Ok(ok_of(&record))
}
