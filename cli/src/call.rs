//! `skillbox call SKILL:TOOL --args JSON [--workspace DIR]`: calls a tool through the
//! running core (`POST /v1/tools/call`, the token from the workspace's state folder), as a
//! bot does. A `write` or `sign` tool waits for an operator as it does for bots; while it
//! waits, the approvals it asked for (found by polling `GET /v1/approvals`) are printed on
//! stderr with the commands that approve or deny them. The call's result (JSON) goes
//! to stdout; the exit code is 0 when the call succeeded, 1 when it did not.

use skillbox_protocol::ToolRef;
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::{json, Value};

use super::client::{self, CoreClient};
use super::up::workspace;
use super::EXIT_FAILED;
use skillbox_core::approvals::{args_hash, payload};
use skillbox_core::state::store::unix_ms_now;

/// How often a waiting call looks for its approvals.
const APPROVAL_POLL: Duration = Duration::from_millis(500);
/// Clock slack when matching approvals to this call by creation time.
const CREATED_SLACK_MS: i64 = 2_000;

/// `call` arguments.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// The tool, as SKILL:TOOL (see `GET /v1/tools`).
    tool: String,
    /// The arguments, a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    args: String,
    /// Workspace of the running core (default, as for `skillbox up`: examples/workspace
    /// when it exists, else the current folder).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Call within this context (only its active tools are callable).
    #[arg(long, value_name = "ID")]
    context: Option<String>,
}

/// Runs `skillbox call`.
pub fn run(a: CallArgs) -> anyhow::Result<u8> {
    let args: Value =
        serde_json::from_str(&a.args).with_context(|| format!("--args is not JSON: {}", a.args))?;
    if !args.is_object() {
        anyhow::bail!("--args must be a JSON object, e.g. --args '{{\"text\":\"hi\"}}'");
    }
    let ToolRef { skill, tool } =
        ToolRef::parse(&a.tool).map_err(|e| anyhow::anyhow!("{e}, e.g. echo:echo"))?;
    let ws = workspace(a.workspace.as_deref())?;
    let core = CoreClient::for_workspace(&ws)?;
    let mut body = json!({"tool": a.tool, "args": args});
    if let Some(c) = &a.context {
        body["context_id"] = c.clone().into();
    }
    let mine = Mine {
        skill: skill.to_string(),
        tool: tool.to_string(),
        args_hash: args_hash(&args),
        since: unix_ms_now() - CREATED_SLACK_MS,
    };
    let ws_flag = match &a.workspace {
        Some(_) => format!(" --workspace {}", ws.root().display()),
        None => String::new(),
    };
    let result = client::runtime()?.block_on(async {
        let call = core.json("POST", "/v1/tools/call", Some(&body));
        tokio::pin!(call);
        let mut shown = HashSet::new();
        loop {
            tokio::select! {
                r = &mut call => return r,
                () = tokio::time::sleep(APPROVAL_POLL) => {
                    announce_waiting(&core, &mine, &ws_flag, &mut shown).await;
                }
            }
        }
    })?;
    println!("{}", serde_json::to_string_pretty(&result)?);
    if result["success"] == true {
        return Ok(0);
    }
    if let Some(id) = result["approval_id"].as_str() {
        eprintln!(
            "skillbox: the call failed ({}); it waited on approval {id}, whose decision `skillbox approvals list --all{ws_flag}` shows",
            result["error_kind"].as_str().unwrap_or("?")
        );
    }
    Ok(EXIT_FAILED)
}

/// What identifies the approvals this call asked for: its tool, created since it started,
/// and for a `write` call its arguments (a `sign` tool's approval holds the payload).
#[derive(Debug)]
struct Mine {
    skill: String,
    tool: String,
    args_hash: String,
    since: i64,
}

impl Mine {
    fn matches(&self, a: &Value) -> bool {
        a["skill"] == self.skill.as_str()
            && a["tool"] == self.tool.as_str()
            && a["created_at"].as_i64().is_some_and(|t| t >= self.since)
            && (a["security"] == "sign" || a["args_hash"] == self.args_hash.as_str())
    }
}

/// Prints each new pending approval of this call once, with the commands to decide it.
async fn announce_waiting(
    core: &CoreClient,
    mine: &Mine,
    ws_flag: &str,
    shown: &mut HashSet<String>,
) {
    let Ok(v) = core.json("GET", "/v1/approvals?status=pending", None).await else {
        return;
    };
    for a in v["approvals"].as_array().into_iter().flatten() {
        let Some(id) = a["id"].as_str() else { continue };
        if !mine.matches(a) || !shown.insert(id.to_string()) {
            continue;
        }
        eprintln!(
            "waiting for approval {id} ({}:{}, {}): {}",
            mine.skill,
            mine.tool,
            a["security"].as_str().unwrap_or("?"),
            payload::summary(a)
        );
        eprintln!("  approve: skillbox approvals approve {id}{ws_flag}");
        eprintln!("  deny:    skillbox approvals deny {id}{ws_flag}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mine_matches_this_calls_write_approval_and_not_anothers() {
        let mine = Mine {
            skill: "notes".into(),
            tool: "append".into(),
            args_hash: args_hash(&json!({"text": "a"})),
            since: 1_000,
        };
        let approval = |tool: &str, args: Value, created: i64, security: &str| {
            json!({"skill": "notes", "tool": tool, "args_hash": args_hash(&args),
                   "created_at": created, "security": security})
        };
        assert!(mine.matches(&approval("append", json!({"text": "a"}), 1_500, "write")));
        assert!(
            !mine.matches(&approval("append", json!({"text": "b"}), 1_500, "write")),
            "other arguments: another call"
        );
        assert!(
            !mine.matches(&approval("append", json!({"text": "a"}), 500, "write")),
            "older than this call"
        );
        assert!(!mine.matches(&approval("other", json!({"text": "a"}), 1_500, "write")));
        assert!(
            mine.matches(&approval("append", json!({"sign": {}}), 1_500, "sign")),
            "a signature's approval holds the payload, not the call's arguments"
        );
    }
}
