//! `skillbox approvals list|approve|deny`: talks to the running core's gateway (address
//! and token from the workspace's state folder), so a decision wakes the waiting call.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

use super::client::{self, CoreClient};
use super::table;
use super::up::workspace;
use skillbox_core::approvals::payload;
use skillbox_core::state::Workspace;

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
    /// Workspace of the running core (default, as for `skillbox up`: examples/workspace
    /// when it exists, else the current folder).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

/// Runs an approvals command.
pub fn run(cmd: ApprovalsCommand) -> anyhow::Result<u8> {
    client::runtime()?.block_on(async move {
        match cmd {
            ApprovalsCommand::List { ws, all, json } => {
                let path = if all {
                    "/v1/approvals"
                } else {
                    "/v1/approvals?status=pending"
                };
                let v = ws.client()?.json("GET", path, None).await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&v)?);
                    return Ok(0);
                }
                let approvals = v["approvals"].as_array().cloned().unwrap_or_default();
                let rows: Vec<Vec<String>> = approvals
                    .iter()
                    .map(|a| {
                        let mut row: Vec<String> = ["id", "skill", "tool", "security", "status"]
                            .iter()
                            .map(|k| a[*k].as_str().unwrap_or("-").to_string())
                            .collect();
                        row.push(table::truncate(&payload::summary(a), ARGS_WIDTH));
                        row
                    })
                    .collect();
                print!(
                    "{}",
                    table::render(
                        &["ID", "SKILL", "TOOL", "SECURITY", "STATUS", "ARGUMENTS"],
                        &rows
                    )
                );
                if approvals
                    .iter()
                    .any(|a| payload::summary(a).chars().count() > ARGS_WIDTH)
                {
                    println!("(arguments cut to {ARGS_WIDTH} characters; --json shows them whole)");
                }
                Ok(0)
            }
            ApprovalsCommand::Approve { id, ws } => decide(&ws, &id, "approve", None).await,
            ApprovalsCommand::Deny { id, ws, reason } => decide(&ws, &id, "deny", reason).await,
        }
    })
}

/// Width of the ARGUMENTS column.
const ARGS_WIDTH: usize = 80;

impl WorkspaceArg {
    /// The workspace folder (default as `skillbox up`).
    pub fn dir(&self) -> anyhow::Result<Workspace> {
        workspace(self.workspace.as_deref())
    }

    /// The client of the core running on the workspace.
    pub fn client(&self) -> anyhow::Result<CoreClient> {
        Ok(CoreClient::for_workspace(&self.dir()?)?)
    }
}

async fn decide(
    ws: &WorkspaceArg,
    id: &str,
    decision: &str,
    reason: Option<String>,
) -> anyhow::Result<u8> {
    let body = json!({"decision": decision, "reason": reason});
    let v = ws
        .client()?
        .json("POST", &format!("/v1/approvals/{id}"), Some(&body))
        .await?;
    println!("{id}: {}", v["status"].as_str().unwrap_or("?"));
    Ok(0)
}
