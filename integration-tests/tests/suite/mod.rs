//! The tests, one file per surface under attack.

mod approvals;
mod auth;
mod availability;
mod channel;
mod cli_verbs;
mod compose;
mod console;
mod containers;
mod context_files;
mod contexts;
mod drain;
mod fetch;
mod gateway_limits;
mod install;
mod kubernetes;
mod mcp;
mod protocols;
mod read_file;
mod repairs;
mod resilience;
mod roles;
mod scratch_tmpfs;
mod secrets;
mod sessions;
mod signing;
mod up;
