//! The `skillbox` command line: one file per command group over the library.
#![forbid(unsafe_code)]

mod approvals;
mod call;
mod certs;
pub mod client;
mod context;
mod deps;
mod deps_wait;
mod doctor;
mod files;
mod find;
mod import;
mod install;
pub mod log;
mod mcp;
mod progress;
mod route;
mod script_uses;
mod skill;
mod sources;
mod table;
mod tokens;
pub mod up;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use skillbox_core::observe::log::LogFormat;

/// Exit code when the command ran and found problems (a failed validation, a missing skill).
pub const EXIT_FAILED: u8 = 1;
/// Exit code for a usage error (clap uses the same).
pub const EXIT_USAGE: u8 = 2;

/// skillbox: run third-party agent skills without trusting them.
#[derive(Debug, Parser)]
#[command(
    name = "skillbox",
    version,
    about,
    after_help = "Docs in the repository: docs/cli.md (commands), docs/http-api.md (the gateway), \
                  docs/skill-format.md (writing skills), docs/integrate-a-bot.md."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect and validate skills.
    #[command(subcommand)]
    Skill(skill::SkillCommand),
    /// List, approve or deny calls waiting for approval (talks to the running core).
    #[command(subcommand)]
    Approvals(approvals::ApprovalsCommand),
    /// Put, get, list and remove a context's files (through the running core).
    #[command(subcommand)]
    Files(files::FilesCommand),
    /// Make, list and revoke bot tokens (docs/http-api.md, "Roles"); through the running
    /// core when there is one, so a revocation acts at once.
    #[command(subcommand)]
    Tokens(tokens::TokensCommand),
    /// Code-signing CA and trust store: roots, developer certificates, revocation,
    /// rotation, signing (docs/signing-runbook.md).
    #[command(subcommand)]
    Certs(certs::CertsCommand),
    /// Run the core and a local sandboxed executor on this machine (docs/cli.md).
    Up(up::UpArgs),
    /// Run the core alone against the executor at [executor] url (containers).
    Serve(up::UpArgs),
    /// Route a query to skills and print the activation plan with the score breakdown.
    Route(route::RouteArgs),
    /// Pin and unpin skills per context; show a context's pins, active tools and prompt.
    #[command(subcommand)]
    Context(context::ContextCommand),
    /// Call a tool through the running core, as a bot does; a write or sign tool waits for
    /// an approval, and the approval id and the command that approves it are printed.
    Call(call::CallArgs),
    /// An MCP server on stdin/stdout for clients that start servers as a command: every
    /// message is forwarded to the running core's POST /mcp (docs/mcp.md).
    Mcp(mcp::McpArgs),
    /// Say what is wrong and what to do: the kernel sandbox, the running core and executor,
    /// unavailable skills. Exits 1 when something is wrong.
    Doctor(doctor::DoctorArgs),
}

/// Runs a parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Skill(cmd) => skill::run(cmd),
        Command::Approvals(cmd) => approvals::run(cmd),
        Command::Tokens(cmd) => tokens::run(cmd),
        Command::Files(cmd) => files::run(cmd),
        Command::Certs(cmd) => certs::run(cmd),
        Command::Up(args) => up::run(args, true),
        Command::Serve(args) => up::run(args, false),
        Command::Route(args) => route::run(args),
        Command::Context(cmd) => context::run(cmd),
        Command::Call(args) => call::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Doctor(args) => doctor::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("skillbox: {e:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// Logs to stderr in the text format; `RUST_LOG` sets the filter (default: warnings).
pub fn init_tracing() {
    log::init(LogFormat::Text);
}

/// Logs to stderr in the format the command's workspace asks for: `[log] format` of
/// `up` and `serve` (a config that does not parse logs as text, and `up` reports it),
/// text for every other command.
pub fn init_tracing_for(cli: &Cli) {
    let format = match &cli.command {
        Command::Up(args) | Command::Serve(args) => up::workspace(args.workspace.as_deref())
            .ok()
            .and_then(|ws| skillbox_core::state::config::Config::load(ws.root()).ok())
            .map(|c| c.log.format)
            .unwrap_or_default(),
        _ => LogFormat::Text,
    };
    log::init(format);
}
