//! `skillbox`: the core daemon and the operator CLI.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    skillbox_cli::init_tracing();
    let cli = skillbox_cli::Cli::parse();
    skillbox_cli::run(cli)
}
