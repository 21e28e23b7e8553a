//! `skillbox approvals list|approve|deny`: talks to the running core's gateway (address
//! and token from the workspace's state folder), so a decision wakes the waiting call.

use std::path::PathBuf;

use anyhow::Context;
use bytes::Bytes;
use clap::{Args, Subcommand};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

use super::table;
use super::up::workspace;
use crate::state;

/// `skillbox approvals ...`
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List approvals (pending by default).
    List {
        #[command(flatten)]
        ws: WorkspaceArg,
        /// Show every status, not only pending ones.
        #[arg(long)]
        all: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending call.
    Approve {
        /// Approval id.
        id: String,
        #[command(flatten)]
        ws: WorkspaceArg,
    },
    /// Deny a pending call.
    Deny {
        /// Approval id.
        id: String,
        #[command(flatten)]
        ws: WorkspaceArg,
        /// Why, shown to the caller.
        #[arg(long)]
        reason: Option<String>,
    },
}

/// The workspace of the running core.
#[derive(Debug, Args)]
pub struct WorkspaceArg {
    /// Workspace of the running core (default: examples/workspace or the current folder).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
}

/// Runs an approvals command.
pub fn run(cmd: ApprovalsCommand) -> anyhow::Result<u8> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cmd {
            ApprovalsCommand::List { ws, all, json } => {
                let path = if all {
                    "/v1/approvals"
                } else {
                    "/v1/approvals?status=pending"
                };
                let v = request(&ws, "GET", path, None).await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&v)?);
                    return Ok(0);
                }
                let rows: Vec<Vec<String>> = v["approvals"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| {
                        ["id", "skill", "tool", "security", "status"]
                            .iter()
                            .map(|k| a[*k].as_str().unwrap_or("-").to_string())
                            .collect()
                    })
                    .collect();
                print!(
                    "{}",
                    table::render(&["ID", "SKILL", "TOOL", "SECURITY", "STATUS"], &rows)
                );
                Ok(0)
            }
            ApprovalsCommand::Approve { id, ws } => decide(&ws, &id, "approve", None).await,
            ApprovalsCommand::Deny { id, ws, reason } => decide(&ws, &id, "deny", reason).await,
        }
    })
}

async fn decide(
    ws: &WorkspaceArg,
    id: &str,
    decision: &str,
    reason: Option<String>,
) -> anyhow::Result<u8> {
    let body = json!({"decision": decision, "reason": reason});
    let v = request(ws, "POST", &format!("/v1/approvals/{id}"), Some(body)).await?;
    println!("{id}: {}", v["status"].as_str().unwrap_or("?"));
    Ok(0)
}

async fn request(
    ws: &WorkspaceArg,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<Value> {
    let ws = workspace(ws.workspace.as_deref())?;
    let state = ws.join(crate::state::STATE_DIR);
    let addr =
        std::fs::read_to_string(state.join(state::GATEWAY_ADDR_FILE)).with_context(|| {
            format!(
                "no running core found for {} (start it with `skillbox up`)",
                ws.display()
            )
        })?;
    let token =
        std::fs::read_to_string(state.join(state::TOKEN_FILE)).context("reading the API token")?;
    let stream = tokio::net::TcpStream::connect(addr.trim())
        .await
        .with_context(|| {
            format!(
                "the core at {} is not answering; is `skillbox up` running?",
                addr.trim()
            )
        })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, addr.trim())
        .header(
            http::header::AUTHORIZATION,
            format!("Bearer {}", token.trim()),
        )
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        )))?;
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    let bytes = resp.into_body().collect().await?.to_bytes();
    let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if !status.is_success() {
        anyhow::bail!(
            "{}",
            v["error"].as_str().unwrap_or(&format!("HTTP {status}"))
        );
    }
    Ok(v)
}
