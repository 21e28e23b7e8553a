//! A context's files (docs/http-api.md, "A context's files"): `PUT`, `GET` and `DELETE
//! /v1/contexts/{id}/files/{path}`, `GET /v1/contexts/{id}/files`, and `DELETE
//! /v1/contexts/{id}` (the context whole). Raw bytes both ways: an upload is streamed to
//! disk within `[files]`'s quotas, not bound by the JSON body limit, and a download is
//! streamed from the open file; neither is held whole in memory. A bot reaches only the
//! contexts it uses ([`crate::contexts::enter`]).

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Full;
use serde_json::json;

use crate::contexts::files::{content_type, ContextFiles, FileError, OpenedFile};
use crate::contexts::{self, ContextError};
use crate::gateway::web::body::{FileBody, ReplyBody};
use crate::gateway::web::error::{json_response, ApiError};
use crate::gateway::web::request::{ok, Answered, Reply, Req};
use crate::gateway::Gateway;

impl From<FileError> for ApiError {
    fn from(e: FileError) -> Self {
        ApiError::new(e.error_kind(), e.to_string())
    }
}

/// Lets the caller into context `id` (a bot's own contexts only).
async fn enter(gw: &Gateway, req: &Req) -> Result<(String, ContextFiles), ApiError> {
    let id = req.param("id")?.to_string();
    let (store, caller, entered) = (gw.contexts.store.clone(), req.caller.clone(), id.clone());
    tokio::task::spawn_blocking(move || contexts::enter(&store, &caller, &entered))
        .await?
        .map_err(|e: ContextError| ApiError::new(e.error_kind(), e.to_string()))?;
    Ok((id, gw.contexts.files.clone()))
}

/// `PUT /v1/contexts/{id}/files/{path}`: the body is the file; 201 new, 200 replaced.
pub async fn put(gw: &Gateway, req: Req) -> Reply {
    let (id, files) = enter(gw, &req).await?;
    let path = req.param("path")?.to_string();
    let timeout = req.body_timeout;
    let (file, new) = files.put(&id, &path, req.body, timeout).await?;
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json_response(
        status,
        &json!({"path": file.path, "size": file.size, "sha256": file.sha256}),
    ))
}

/// `GET /v1/contexts/{id}/files/{path}`: the bytes, typed by the name, `ETag` its SHA-256.
///
/// The file is opened before the answer begins (a refusal is still a JSON error with its
/// status), then streamed from that descriptor ([`FileBody`]): one version whole, even
/// when a `PUT` replaces the file meanwhile ([`ContextFiles::open`]).
pub async fn get(gw: &Gateway, req: Req) -> Answered {
    let (id, files) = enter(gw, &req).await?;
    let path = req.param("path")?.to_string();
    let OpenedFile { record, file } =
        tokio::task::spawn_blocking(move || files.open(&id, &path)).await??;
    let mut r = Response::new(ReplyBody::from(FileBody::new(file, record.size)));
    let headers = r.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(&record.path)),
    );
    headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(record.size));
    if let Ok(tag) = HeaderValue::from_str(&format!("\"{}\"", record.sha256)) {
        headers.insert(http::header::ETAG, tag);
    }
    Ok(r)
}

/// `DELETE /v1/contexts/{id}/files/{path}`: 204.
pub async fn delete(gw: &Gateway, req: Req) -> Reply {
    let (id, files) = enter(gw, &req).await?;
    let path = req.param("path")?.to_string();
    tokio::task::spawn_blocking(move || files.delete(&id, &path)).await??;
    Ok(no_content())
}

/// `GET /v1/contexts/{id}/files`: path, size, sha256, modified, written_by of each.
pub async fn list(gw: &Gateway, req: Req) -> Reply {
    let (id, files) = enter(gw, &req).await?;
    let listed = tokio::task::spawn_blocking(move || files.list(&id)).await??;
    Ok(ok(&json!({ "files": listed })))
}

/// `DELETE /v1/contexts/{id}`: the context's sessions (their processes ended), pins,
/// files and owner; 204.
pub async fn delete_context(gw: &Gateway, req: Req) -> Reply {
    let (id, files) = enter(gw, &req).await?;
    if let Err(e) = gw.contexts.pipeline.close_sessions(&id, None).await {
        tracing::warn!(context = %id, error = %e, "a session of a removed context could not be closed");
    }
    tokio::task::spawn_blocking(move || files.delete_context(&id)).await??;
    Ok(no_content())
}

fn no_content() -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::NO_CONTENT;
    r
}
