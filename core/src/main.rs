//! `skillbox`: the core daemon and the operator CLI.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = skillbox_core::cli::Cli::parse();
    skillbox_core::cli::init_tracing_for(&cli);
    skillbox_core::cli::run(cli)
}
