//! `skillbox files put|get|ls|rm CONTEXT [PATH] [LOCAL]`: a context's files through the
//! running core (docs/http-api.md, "A context's files"), with the workspace's operator
//! token, or a bot's with `--token-file`.

use skillbox_core::gateway::web::pct::encode_path;
use std::path::PathBuf;

use bytes::Bytes;
use clap::{Args, Subcommand};
use serde_json::Value;

use super::approvals::WorkspaceArg;
use super::client::{self, CoreClient};
use super::table;

/// `skillbox files ...`
#[derive(Debug, Subcommand)]
pub enum FilesCommand {
    /// Upload LOCAL (default: PATH's file name in the current folder) as PATH.
    Put {
        #[command(flatten)]
        at: At,
        /// The local file (default: the last segment of PATH).
        local: Option<PathBuf>,
    },
    /// Download PATH to LOCAL (default: PATH's file name; `-` writes to stdout).
    Get {
        #[command(flatten)]
        at: At,
        /// Where to write it.
        local: Option<PathBuf>,
    },
    /// List the context's files.
    Ls {
        /// The context id.
        context: String,
        #[command(flatten)]
        who: Who,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove PATH from the context.
    Rm {
        #[command(flatten)]
        at: At,
    },
}

/// A file of a context.
#[derive(Debug, Args)]
pub struct At {
    /// The context id.
    context: String,
    /// The file's path in the context's folder.
    path: String,
    #[command(flatten)]
    who: Who,
}

/// Which core, as whom.
#[derive(Debug, Args)]
pub struct Who {
    #[command(flatten)]
    ws: WorkspaceArg,
    /// A file holding a bot token to act as (default: the workspace's operator token).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
}

impl Who {
    fn client(&self) -> anyhow::Result<CoreClient> {
        let core = self.ws.client()?;
        Ok(match &self.token_file {
            Some(f) => core.with_token(std::fs::read_to_string(f)?.trim().to_string()),
            None => core,
        })
    }
}

/// The route of file `path` of `context`, each segment percent-escaped (`with space.txt`).
fn url(context: &str, path: &str) -> String {
    let (context, path) = (encode_path(context), encode_path(path));
    format!("/v1/contexts/{context}/files/{path}")
}

fn file_name(path: &str) -> PathBuf {
    PathBuf::from(path.rsplit('/').next().unwrap_or(path))
}

/// The core's refusal as an error.
fn refused(status: http::StatusCode, body: &[u8]) -> anyhow::Error {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    anyhow::anyhow!(
        "{}",
        v["error"]
            .as_str()
            .map_or_else(|| format!("HTTP {status}"), str::to_string)
    )
}

/// Runs a files command.
pub fn run(cmd: FilesCommand) -> anyhow::Result<u8> {
    client::runtime()?.block_on(async move {
        match cmd {
            FilesCommand::Put { at, local } => {
                let local = local.unwrap_or_else(|| file_name(&at.path));
                let bytes = std::fs::read(&local)
                    .map_err(|e| anyhow::anyhow!("reading {}: {e}", local.display()))?;
                let (status, body) = at
                    .who
                    .client()?
                    .raw("PUT", &url(&at.context, &at.path), Bytes::from(bytes))
                    .await?;
                if !status.is_success() {
                    return Err(refused(status, &body));
                }
                let v: Value = serde_json::from_slice(&body)?;
                println!(
                    "{}  {} bytes  sha256 {}",
                    v["path"].as_str().unwrap_or_default(),
                    v["size"],
                    v["sha256"].as_str().unwrap_or_default()
                );
                Ok(0)
            }
            FilesCommand::Get { at, local } => {
                let (status, body) = at
                    .who
                    .client()?
                    .raw("GET", &url(&at.context, &at.path), Bytes::new())
                    .await?;
                if !status.is_success() {
                    return Err(refused(status, &body));
                }
                match local {
                    Some(p) if p.as_os_str() == "-" => {
                        use std::io::Write;
                        std::io::stdout().write_all(&body)?;
                    }
                    other => {
                        let to = other.unwrap_or_else(|| file_name(&at.path));
                        std::fs::write(&to, &body)
                            .map_err(|e| anyhow::anyhow!("writing {}: {e}", to.display()))?;
                        eprintln!("{} bytes written to {}", body.len(), to.display());
                    }
                }
                Ok(0)
            }
            FilesCommand::Ls { context, who, json } => {
                let v = who
                    .client()?
                    .json("GET", &format!("/v1/contexts/{context}/files"), None)
                    .await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&v["files"])?);
                    return Ok(0);
                }
                let rows: Vec<Vec<String>> = (v["files"].as_array().into_iter().flatten())
                    .map(|f| {
                        vec![
                            f["path"].as_str().unwrap_or_default().to_string(),
                            f["size"].to_string(),
                            f["written_by"].as_str().unwrap_or_default().to_string(),
                        ]
                    })
                    .collect();
                print!("{}", table::render(&["PATH", "SIZE", "WRITTEN BY"], &rows));
                Ok(0)
            }
            FilesCommand::Rm { at } => {
                let (status, body) = at
                    .who
                    .client()?
                    .raw("DELETE", &url(&at.context, &at.path), Bytes::new())
                    .await?;
                if !status.is_success() {
                    return Err(refused(status, &body));
                }
                println!("removed: {}", at.path);
                Ok(0)
            }
        }
    })
}
