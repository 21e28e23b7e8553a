//! A context's files as MCP resources: `resources/read` of
//! `skillbox://contexts/{id}/files/{path}` returns the file (text, or a base64 blob) up to
//! `[mcp] max_resource_bytes`, for the caller that may enter the context (a bot's own contexts
//! only, as over REST).

use serde_json::{json, Value};

use super::errors::McpError;
use crate::auth::Caller;
use crate::contexts::files::{content_type, FileError};
use crate::gateway::web::pct::{decode, encode_path};
use crate::gateway::Gateway;

/// The uri prefix of a context's files.
pub const SCHEME: &str = "skillbox://contexts/";

/// The uri of file `path` of context `id` (both percent-escaped).
pub fn uri(id: &str, path: &str) -> String {
    format!("{SCHEME}{}/files/{}", encode_path(id), encode_path(path))
}

/// The context id and file path of a context file's uri, unescaped (an unescaped uri, as
/// clients of older versions wrote, reads the same).
pub fn parse(uri: &str) -> Option<(String, String)> {
    let (id, path) = uri.strip_prefix(SCHEME)?.split_once("/files/")?;
    let (id, path) = (decode(id).ok()?, decode(path).ok()?);
    (!id.is_empty() && !path.is_empty()).then_some((id, path))
}

/// `resources/read` of a context's file.
pub async fn read(gw: &Gateway, caller: &Caller, asked: &str) -> Result<Value, McpError> {
    let unknown = || McpError::UnknownResource {
        uri: asked.to_string(),
    };
    let (id, path) = parse(asked).ok_or_else(unknown)?;
    let caller = caller.clone();
    let (store, files) = (gw.contexts.store.clone(), gw.contexts.files.clone());
    let cap = gw.contexts.load.config().mcp.max_resource_bytes;
    let read = tokio::task::spawn_blocking(move || {
        crate::contexts::enter(&store, &caller, &id).map_err(|_| None)?;
        files.get(&id, &path).map_err(Some)
    })
    .await
    .map_err(|e| McpError::Internal(e.to_string()))?;
    let (file, bytes) = match read {
        Ok(got) => got,
        Err(None | Some(FileError::NotFound { .. })) => return Err(unknown()),
        Err(Some(e)) => {
            return Err(McpError::ResourceRefused {
                uri: asked.to_string(),
                reason: e.to_string(),
            })
        }
    };
    if bytes.len() > cap {
        return Err(McpError::ResourceRefused {
            uri: asked.to_string(),
            reason: format!(
                "the file is {} bytes, over the {cap} bytes resources/read returns ([mcp] max_resource_bytes); GET it from /v1/contexts/{{id}}/files/{{path}}",
                bytes.len()
            ),
        });
    }
    let mime = content_type(&file.path);
    let content = match String::from_utf8(bytes) {
        Ok(text) => json!({"uri": asked, "mimeType": mime, "text": text}),
        Err(e) => {
            use base64::Engine;
            let blob = base64::engine::general_purpose::STANDARD.encode(e.into_bytes());
            json!({"uri": asked, "mimeType": mime, "blob": blob})
        }
    };
    Ok(json!({ "contents": [content] }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_file_uris_round_trip_and_others_are_not_ones() {
        let u = uri("chat-1", "out/a b.csv");
        assert_eq!(u, "skillbox://contexts/chat-1/files/out/a%20b.csv");
        let parts = Some(("chat-1".to_string(), "out/a b.csv".to_string()));
        assert_eq!(parse(&u), parts);
        assert_eq!(parse("skillbox://contexts/chat-1/files/out/a b.csv"), parts);
        for other in [
            "skill://notes/SKILL.md",
            "skillbox://contexts/chat-1/files/",
            "skillbox://contexts//files/a",
            "skillbox://contexts/chat-1/a",
        ] {
            assert_eq!(parse(other), None, "{other}");
        }
    }
}
