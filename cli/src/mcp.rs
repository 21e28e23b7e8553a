//! `skillbox mcp [--workspace DIR] [--context ID] [--token-file FILE]`: the MCP server on
//! stdin/stdout, for clients that start MCP servers as a command (desktop agents). Each
//! newline-delimited JSON-RPC message is POSTed to the running core's `/mcp` (or
//! `/mcp/{context}`) with a bot token (`--token-file`, else `SKILLBOX_TOKEN`), and each
//! answer is written back as one line. Without either it falls back to the workspace's
//! operator token and says on stderr that the agent then acts as the operator. Requests
//! run concurrently (a call waiting for an approval does not hold the others back).
//!
//! The stdio transport has no HTTP headers, so the forwarder writes the ones the body
//! implies: for a 2026-07-28 request `MCP-Protocol-Version` (from its `_meta`),
//! `Mcp-Method` and `Mcp-Name`; for the handshake era the version `initialize` agreed on.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use clap::Args;
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::client::{self, CoreClient};
use super::up::workspace;

/// The default of `--max-message-bytes`: the gateway's default `max_request_bytes`.
const DEFAULT_MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// `mcp` arguments.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Workspace of the running core (default, as for `skillbox up`: examples/workspace
    /// when it exists, else the current folder).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Serve only this context's active tools (`POST /mcp/{context}`).
    #[arg(long, value_name = "ID")]
    context: Option<String>,
    /// Longest message (one line) read from stdin; a longer one is answered with an error
    /// and skipped without being held in memory. The core applies its own
    /// `[gateway] max_request_bytes` as well.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_MESSAGE_BYTES)]
    max_message_bytes: usize,
    /// A file holding the agent's bot token (`skillbox tokens create NAME`); the
    /// environment variable SKILLBOX_TOKEN is read when this is not given.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
}

/// The environment variable holding a bot token for `skillbox mcp`.
pub const TOKEN_ENV: &str = "SKILLBOX_TOKEN";

/// The bot token the agent presents: from `file`, else from [`TOKEN_ENV`]; `None` when
/// neither gives one.
fn bot_token(file: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    if let Some(path) = file {
        let token = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading the token file {}: {e}", path.display()))?;
        let token = token.trim().to_string();
        if token.is_empty() {
            anyhow::bail!("the token file {} is empty; put the bot token from `skillbox tokens create NAME` in it", path.display());
        }
        return Ok(Some(token));
    }
    Ok(std::env::var(TOKEN_ENV)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty()))
}

/// Runs `skillbox mcp` until stdin closes.
pub fn run(a: McpArgs) -> anyhow::Result<u8> {
    let ws = workspace(a.workspace.as_deref())?;
    let core = CoreClient::for_workspace(&ws)?;
    let core = match bot_token(a.token_file.as_deref())? {
        Some(token) => core.with_token(token),
        None => {
            eprintln!(
                "skillbox mcp: no bot token (--token-file or {TOKEN_ENV}); using the workspace's \
                 operator token, so this agent may do everything the operator may. Make one with \
                 `skillbox tokens create NAME --skills ...` (docs/mcp.md)"
            );
            core
        }
    };
    let path = match &a.context {
        Some(c) => format!("/mcp/{c}"),
        None => "/mcp".to_string(),
    };
    client::runtime()?.block_on(forward(core, path, a.max_message_bytes))?;
    Ok(0)
}

/// The headers a message implies, and the handshake version it negotiates when it is an
/// `initialize` answer (read by the caller).
pub fn headers_for(
    message: &Value,
    handshake_version: Option<&str>,
) -> Vec<(&'static str, String)> {
    let method = message.get("method").and_then(Value::as_str);
    let params = message.get("params");
    let modern = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .and_then(Value::as_str);
    let mut out = Vec::new();
    match (modern, method) {
        (Some(version), Some(method)) => {
            out.push(("mcp-protocol-version", version.to_string()));
            out.push(("mcp-method", method.to_string()));
            let key = match method {
                "tools/call" | "prompts/get" => Some("name"),
                "resources/read" => Some("uri"),
                _ => None,
            };
            if let Some(name) = key
                .and_then(|k| params.and_then(|p| p.get(k)))
                .and_then(Value::as_str)
            {
                out.push(("mcp-name", encode_header_value(name)));
            }
        }
        _ if method != Some("initialize") => {
            if let Some(v) = handshake_version {
                out.push(("mcp-protocol-version", v.to_string()));
            }
        }
        _ => {}
    }
    out
}

/// A header value as MCP encodes it: verbatim when plain visible ASCII, else
/// `=?base64?…?=`.
fn encode_header_value(value: &str) -> String {
    use base64::Engine;
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
}

/// The answer written for a message the core did not answer with JSON-RPC (it was
/// unreachable, or refused at the HTTP level: the token, the size).
fn transport_error(id: Value, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": message}})
}

/// What to write for one forwarded message: the core's JSON-RPC answer, or an error
/// naming the HTTP refusal; nothing for a notification.
fn answer_of(message: &Value, status: http::StatusCode, body: &[u8]) -> Option<Value> {
    let id = message.get("id").cloned();
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    match parsed {
        Some(v) if v.get("jsonrpc").is_some() => Some(v),
        _ if id.is_none() => None,
        Some(v) => {
            let why = v["error"]
                .as_str()
                .map_or_else(|| format!("HTTP {status}"), str::to_string);
            Some(transport_error(id.unwrap_or(Value::Null), why))
        }
        None if status.is_success() => None,
        None => Some(transport_error(
            id.unwrap_or(Value::Null),
            format!("the core answered HTTP {status}"),
        )),
    }
}

/// One line of input: a message, or one over the limit (its bytes skipped).
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A line of at most the limit (without its newline).
    Message(Vec<u8>),
    /// A line over the limit, read to its end and dropped.
    TooLong,
}

/// Reads the next line of at most `max` bytes from `input`; `None` at the end of input.
async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    max: usize,
) -> std::io::Result<Option<Line>> {
    let mut buf = Vec::new();
    let cap = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let n = (&mut *input).take(cap).read_until(b'\n', &mut buf).await?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        return Ok(Some(Line::Message(buf)));
    }
    if buf.len() <= max {
        return Ok(Some(Line::Message(buf)));
    }
    // Over the limit: skip to the end of the line, a bounded chunk at a time.
    loop {
        let mut rest = Vec::new();
        let n = (&mut *input)
            .take(64 * 1024)
            .read_until(b'\n', &mut rest)
            .await?;
        if n == 0 || rest.last() == Some(&b'\n') {
            return Ok(Some(Line::TooLong));
        }
    }
}

/// Reads stdin line by line, forwards each message, writes the answers.
async fn forward(core: CoreClient, path: String, max: usize) -> anyhow::Result<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(v) = rx.recv().await {
            let mut line = v.to_string();
            line.push('\n');
            if out.write_all(line.as_bytes()).await.is_err() || out.flush().await.is_err() {
                break;
            }
        }
    });
    let handshake: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let core = Arc::new(core);
    let path = Arc::new(path);
    let mut input = BufReader::new(tokio::io::stdin());
    let mut tasks = tokio::task::JoinSet::new();
    while let Some(line) = read_line(&mut input, max).await? {
        let line = match line {
            Line::Message(bytes) => bytes,
            Line::TooLong => {
                let _ = tx.send(transport_error(
                    Value::Null,
                    format!("message over {max} bytes (--max-message-bytes) refused; it was not forwarded"),
                ));
                continue;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let message: Value = match serde_json::from_slice(&line) {
            Ok(v) => v,
            Err(e) => {
                let _ = tx.send(json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32700, "message": format!("not JSON: {e}")}}));
                continue;
            }
        };
        let version = handshake
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let headers = headers_for(&message, version.as_deref());
        let (core, path, tx, handshake) = (
            Arc::clone(&core),
            Arc::clone(&path),
            tx.clone(),
            Arc::clone(&handshake),
        );
        tasks.spawn(async move {
            let is_initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
            let answer = match core.post_raw(&path, &headers, Bytes::from(line)).await {
                Ok((status, body)) => answer_of(&message, status, &body),
                Err(e) => message
                    .get("id")
                    .map(|id| transport_error(id.clone(), e.to_string())),
            };
            if let Some(answer) = answer {
                if is_initialize {
                    if let Some(v) = answer["result"]["protocolVersion"].as_str() {
                        *handshake.lock().unwrap_or_else(PoisonError::into_inner) =
                            Some(v.to_string());
                    }
                }
                let _ = tx.send(answer);
            }
        });
        while tasks.try_join_next().is_some() {}
    }
    // stdin closed: the client is gone; calls still waiting are abandoned (their
    // approvals stay pending for a retry).
    tasks.abort_all();
    drop(tx);
    let _ = writer.await;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn modern_request_gets_its_routing_headers_from_the_body() {
        let m = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo.echo",
            "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}});
        let h = headers_for(&m, None);
        assert_eq!(
            h,
            vec![
                ("mcp-protocol-version", "2026-07-28".to_string()),
                ("mcp-method", "tools/call".to_string()),
                ("mcp-name", "echo.echo".to_string()),
            ]
        );
    }

    #[test]
    fn handshake_requests_carry_the_negotiated_version_but_initialize_does_not() {
        let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}});
        assert!(headers_for(&init, Some("2025-06-18")).is_empty());
        let list = json!({"jsonrpc":"2.0","id":2,"method":"tools/list"});
        assert_eq!(
            headers_for(&list, Some("2025-06-18")),
            vec![("mcp-protocol-version", "2025-06-18".to_string())]
        );
    }

    #[tokio::test]
    async fn line_over_the_limit_is_skipped_whole_and_the_next_one_read() {
        let input = format!("{}\n{{\"a\":1}}\n{}", "x".repeat(100), "y".repeat(5));
        let mut r = tokio::io::BufReader::new(input.as_bytes());
        assert_eq!(read_line(&mut r, 10).await.unwrap(), Some(Line::TooLong));
        assert_eq!(
            read_line(&mut r, 10).await.unwrap(),
            Some(Line::Message(b"{\"a\":1}".to_vec()))
        );
        assert_eq!(
            read_line(&mut r, 10).await.unwrap(),
            Some(Line::Message(b"yyyyy".to_vec()))
        );
        assert_eq!(read_line(&mut r, 10).await.unwrap(), None);
        // Exactly at the limit is a message.
        let mut r = tokio::io::BufReader::new("0123456789\n".as_bytes());
        assert_eq!(
            read_line(&mut r, 10).await.unwrap(),
            Some(Line::Message(b"0123456789".to_vec()))
        );
    }

    #[test]
    fn non_ascii_names_are_base64_wrapped() {
        assert_eq!(encode_header_value("echo.echo"), "echo.echo");
        assert_eq!(encode_header_value("é"), "=?base64?w6k=?=");
    }

    #[test]
    fn http_refusal_becomes_a_json_rpc_error_naming_it() {
        let m = json!({"jsonrpc":"2.0","id":7,"method":"tools/list"});
        let body = br#"{"error":"missing or wrong bearer token","error_kind":"permission_denied"}"#;
        let a = answer_of(&m, http::StatusCode::UNAUTHORIZED, body).unwrap();
        assert_eq!(a["id"], 7);
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("bearer token"),
            "{a}"
        );
        let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        assert!(answer_of(&note, http::StatusCode::ACCEPTED, b"").is_none());
    }
}
