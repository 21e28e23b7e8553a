//! Tests of the `skillbox` binary itself, compiled as one binary (STYLE: `tests/all.rs`
//! with `mod suite;`): the `certs` and `skill` commands and the skills roots the CLI reads.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../core/tests/support/git_repo.rs"]
mod git_repo;
#[path = "../../core/tests/support/skill_folder.rs"]
mod skill_folder;
mod suite;
