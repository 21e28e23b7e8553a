//! skillbox core: holds every secret, discovers and verifies skills, routes queries,
//! serves bots, and forwards tool calls to the executor. This crate is also the
//! `skillbox` CLI (see [`cli`]).

pub mod cli;
