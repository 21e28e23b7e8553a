//! `skillbox tokens create|list|revoke`: the operator's bot tokens. With a core running on
//! the workspace, each command goes through it (`/v1/tokens`, operator token), so a
//! revocation acts on the bot's next request; with none, it writes the state database,
//! which the core reads when it starts (in a folder that is a workspace only).

use std::time::{Duration, UNIX_EPOCH};

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::approvals::WorkspaceArg;
use super::client::{self, ClientError, CoreClient};
use super::table;
use skillbox_core::approvals::{ApprovalPolicy, Approvals};
use skillbox_core::auth::BotTokens;
use skillbox_core::random::SystemSource;
use skillbox_core::skills::install::rfc3339;
use skillbox_core::state::store::Store;

/// `skillbox tokens ...`
#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Make a bot token and print it once (only its hash is kept).
    Create(CreateArgs),
    /// List bot tokens: name, skills, created, expires, last used.
    List {
        #[command(flatten)]
        ws: WorkspaceArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a bot's token; its next request is refused.
    Revoke {
        /// The bot's name.
        name: String,
        #[command(flatten)]
        ws: WorkspaceArg,
    },
}

/// `tokens create` arguments.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The bot's name (a-z, 0-9, '-', '_'; not "operator").
    name: String,
    /// The skills the bot may use, comma-separated (every skill when left out).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    skills: Option<Vec<String>>,
    /// Days until the token stops working (never when left out).
    #[arg(long, value_name = "DAYS")]
    expires: Option<u64>,
    #[command(flatten)]
    ws: WorkspaceArg,
}

/// Runs a tokens command.
pub fn run(cmd: TokensCommand) -> anyhow::Result<u8> {
    client::runtime()?.block_on(async move {
        match cmd {
            TokensCommand::Create(a) => {
                let body = json!({"name": a.name, "skills": a.skills, "expires_days": a.expires});
                let made = match running_core(&a.ws)? {
                    Some(core) => core.json("POST", "/v1/tokens", Some(&body)).await?,
                    None => {
                        let (token, info) = offline(&a.ws)?.create(
                            &SystemSource::default(),
                            &a.name,
                            a.skills,
                            a.expires,
                        )?;
                        let mut v = serde_json::to_value(info)?;
                        v["token"] = token.into();
                        v
                    }
                };
                println!("{}", made["token"].as_str().unwrap_or_default());
                eprintln!(
                    "skillbox: token of bot {:?} printed above; it is shown only this once. \
                     Give it to the bot as its bearer token (docs/integrate-a-bot.md).",
                    made["name"].as_str().unwrap_or_default()
                );
                Ok(0)
            }
            TokensCommand::List { ws, json } => {
                let tokens = match running_core(&ws)? {
                    Some(core) => core.json("GET", "/v1/tokens", None).await?["tokens"].clone(),
                    None => serde_json::to_value(offline(&ws)?.list())?,
                };
                if json {
                    println!("{}", serde_json::to_string_pretty(&tokens)?);
                } else {
                    print!("{}", render(&tokens));
                }
                Ok(0)
            }
            TokensCommand::Revoke { name, ws } => {
                let (sessions, refused) = match running_core(&ws)? {
                    Some(core) => {
                        let done = core
                            .json("DELETE", &format!("/v1/tokens/{name}"), None)
                            .await?;
                        let refused = done["approvals_refused"].as_array().map_or(0, Vec::len);
                        (done["sessions_ended"].as_u64().unwrap_or(0), refused)
                    }
                    // No core: no session runs; the approvals it asked for are refused in
                    // the database, so none waits for an operator after a restart.
                    None => {
                        let (bots, store) = offline_store(&ws)?;
                        bots.revoke(&name)?;
                        let approvals = Approvals::new(store, ApprovalPolicy::default());
                        (0, approvals.refuse_pending_of(&name)?.len())
                    }
                };
                println!(
                    "revoked: {name} ({sessions} session(s) ended, {refused} pending approval(s) refused)"
                );
                Ok(0)
            }
        }
    })
}

/// The client of the core running on the workspace, or `None` when no core runs there.
fn running_core(ws: &WorkspaceArg) -> anyhow::Result<Option<CoreClient>> {
    match CoreClient::for_workspace(&ws.dir()?) {
        Ok(core) if answers(&core) => Ok(Some(core)),
        Ok(_) | Err(ClientError::NoAddress { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Whether something accepts connections at the core's recorded address.
fn answers(core: &CoreClient) -> bool {
    std::net::TcpStream::connect(core.addr()).is_ok()
}

/// The tokens in the workspace's state database, for when no core runs. A folder that is
/// no workspace is refused, with nothing made in it: a token written there would be one
/// no core reads.
fn offline(ws: &WorkspaceArg) -> anyhow::Result<BotTokens> {
    Ok(offline_store(ws)?.0)
}

/// [`offline`], and the state database it reads.
fn offline_store(ws: &WorkspaceArg) -> anyhow::Result<(BotTokens, Store)> {
    let ws = ws.dir()?;
    if !ws.is_workspace() {
        anyhow::bail!(
            "{} is not a skillbox workspace (it has no .skillbox/ state folder and no \
             skillbox.toml) and no core runs on it, so a token made here would be one no core \
             reads; nothing was written. Run the command in the folder your core runs on \
             (where `skillbox up` was started), or name it: --workspace DIR",
            ws.root().display()
        );
    }
    ws.ensure_state_dir()?;
    let store = Store::open(&ws.db_file())?;
    Ok((BotTokens::load(store.clone())?, store))
}

/// The tokens as a table.
fn render(tokens: &Value) -> String {
    let date = |v: &Value| -> String { v.as_i64().map_or_else(|| "-".to_string(), iso_date) };
    let rows: Vec<Vec<String>> = (tokens.as_array().into_iter().flatten())
        .map(|t| {
            let skills = t["skills"].as_array().map_or_else(
                || "(all)".to_string(),
                |s| {
                    s.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(",")
                },
            );
            vec![
                t["name"].as_str().unwrap_or_default().to_string(),
                skills,
                date(&t["created_at"]),
                date(&t["expires_at"]),
                date(&t["last_used_at"]),
            ]
        })
        .collect();
    table::render(
        &["NAME", "SKILLS", "CREATED", "EXPIRES", "LAST USED"],
        &rows,
    )
}

/// Unix milliseconds as an RFC 3339 time, to the second (UTC).
fn iso_date(ms: i64) -> String {
    let secs = u64::try_from(ms.div_euclid(1000)).unwrap_or(0);
    rfc3339(UNIX_EPOCH + Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(iso_date(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_date(1_795_000_000_000), "2026-11-18T11:06:40Z");
    }
}
