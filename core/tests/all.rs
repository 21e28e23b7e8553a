//! Integration tests of `skillbox-core`, compiled as one binary (STYLE: `tests/all.rs` with
//! `mod suite;`): verified install of skill packages (archive attacks, trust policy,
//! rollback, revocation, rotation) and the `certs` / `skill` commands through the binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod suite;
