//! The core's integration tests.

mod harness;
mod install_archive;
mod install_cli;
mod install_trust;
