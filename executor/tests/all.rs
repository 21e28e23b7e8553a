//! Integration tests of `skillbox-executor`, compiled as one binary (STYLE: `tests/all.rs`
//! with `mod suite;`). They drive the real binary (`skillbox-executor exec`) against
//! skills written into temporary folders; see `suite/harness.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod suite;
