//! The core's integration tests.

mod cli_roots;
mod harness;
mod install_archive;
mod install_cli;
mod install_publisher;
mod install_remove;
mod install_trust;
mod routing_eval;
