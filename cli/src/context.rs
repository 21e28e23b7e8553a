//! `skillbox context pin|unpin|pinned|prompt ID [NAME] [--workspace DIR]`: skills pinned
//! per context.
//!
//! The command opens the workspace's SQLite store directly rather than going through the
//! gateway: the store is the one source of truth (WAL mode, a busy timeout for the running
//! core's connection), and the core reads pins at every request, so a pin made here takes
//! effect at once in a running core, and the command also works with no core running.
//! Skills are discovered from `DIR/skills`; env prerequisites are checked against the
//! workspace's `secrets.env` and this process's environment. The running core's answer
//! (`GET /v1/contexts/{id}`) also leaves out skills its trust policy disabled.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use skillbox_protocol::skill::{discover, DiscoveryOptions};

use super::up::workspace;
use skillbox_core::contexts::{self, ContextView};
use skillbox_core::state::secrets::Secrets;
use skillbox_core::state::store::Store;

/// `skillbox context ...`
#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// Pin a skill in a context: its body joins the context's prompt, its allowed-tools
    /// bound the context's tools.
    Pin {
        /// Context id.
        id: String,
        /// Skill name.
        name: String,
        #[command(flatten)]
        ws: WorkspaceArg,
    },
    /// Unpin a skill from a context.
    Unpin {
        /// Context id.
        id: String,
        /// Skill name.
        name: String,
        #[command(flatten)]
        ws: WorkspaceArg,
    },
    /// List the pinned skills and the active tools of a context.
    Pinned {
        /// Context id.
        id: String,
        #[command(flatten)]
        ws: WorkspaceArg,
        /// Print the context as JSON (as GET /v1/contexts/{id}).
        #[arg(long)]
        json: bool,
    },
    /// Print the prompt of a context (skill catalogue + pinned skills' bodies).
    Prompt {
        /// Context id.
        id: String,
        #[command(flatten)]
        ws: WorkspaceArg,
    },
}

/// The workspace whose store and skills are used.
#[derive(Debug, Args)]
pub struct WorkspaceArg {
    /// Workspace (default: examples/workspace or the current folder).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
}

struct Opened {
    store: Store,
    catalog: skillbox_protocol::skill::Catalog,
    secrets: Secrets,
    /// `[routing] catalogue_budget_chars` of the workspace (the default without a config).
    catalogue_budget: usize,
}

fn open(ws: &WorkspaceArg) -> anyhow::Result<Opened> {
    let ws = workspace(ws.workspace.as_deref())?;
    let state = ws
        .ensure_state_dir()
        .with_context(|| format!("creating the state folder of {}", ws.root().display()))?;
    let store = Store::open(&ws.db_file())?;
    let catalog = discover(&[ws.skills_dir()], DiscoveryOptions::default());
    let secrets = Secrets::load(&state).context("reading the workspace's secrets")?;
    let config = skillbox_core::state::config::Config::load(ws.root())?;
    Ok(Opened {
        store,
        catalog,
        secrets,
        catalogue_budget: config.routing.catalogue_budget_chars,
    })
}

fn view(o: &Opened, id: &str) -> anyhow::Result<ContextView> {
    let available = |s: &skillbox_protocol::skill::Skill| {
        s.prerequisites
            .env
            .iter()
            .all(|n| o.secrets.has(n) || std::env::var_os(n).is_some())
    };
    let v = contexts::view(&o.store, &o.catalog, &available, id, o.catalogue_budget)?;
    for d in &v.tools.dropped {
        eprintln!("dropped the pin of {d}: the skill no longer exists");
    }
    Ok(v)
}

/// Runs a context command.
pub fn run(cmd: ContextCommand) -> anyhow::Result<u8> {
    match cmd {
        ContextCommand::Pin { id, name, ws } => {
            let o = open(&ws)?;
            let new = contexts::pin(&o.store, &o.catalog, &id, &name)?;
            println!(
                "{name} {} in context {id}",
                if new { "pinned" } else { "was already pinned" }
            );
            Ok(0)
        }
        ContextCommand::Unpin { id, name, ws } => {
            let o = open(&ws)?;
            if contexts::unpin(&o.store, &id, &name)? {
                println!("{name} unpinned from context {id}");
                Ok(0)
            } else {
                println!("{name} was not pinned in context {id}");
                Ok(super::EXIT_FAILED)
            }
        }
        ContextCommand::Pinned { id, ws, json } => {
            let o = open(&ws)?;
            let v = view(&o, &id)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
                return Ok(0);
            }
            if v.tools.pinned.is_empty() {
                println!("no skills pinned in context {id}");
            }
            for p in &v.tools.pinned {
                println!("{}", p.name);
            }
            if v.tools.restricted {
                let active: Vec<String> = v
                    .tools
                    .active_tools
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                println!("active tools: {}", active.join(", "));
            } else {
                println!("active tools: all (no pinned skill declares allowed-tools)");
            }
            Ok(0)
        }
        ContextCommand::Prompt { id, ws } => {
            let o = open(&ws)?;
            print!("{}", view(&o, &id)?.prompt);
            Ok(0)
        }
    }
}
