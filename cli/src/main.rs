//! `skillbox`: the core daemon and the operator CLI.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = skillbox_cli::Cli::parse();
    skillbox_cli::init_tracing_for(&cli);
    skillbox_cli::run(cli)
}
