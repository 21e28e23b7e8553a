//! Integration tests of `skillbox-core`, compiled as one binary (STYLE: `tests/all.rs` with
//! `mod suite;`): verified install of skill packages (archive attacks, trust policy,
//! rollback, revocation, rotation), removal, importing other agents' skills, collection
//! indexes, and the routing evaluation on the corpus.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod suite;

/// Fixtures shared with other crates' tests (they include these files with `#[path]`).
mod support {
    pub mod skill_folder;
}
