//! End-to-end tests of skillbox: the suite in `tests/` (one binary, `tests/all.rs` +
//! `tests/suite/`) starts the real `skillbox` and `skillbox-executor` binaries built next
//! to it, on a workspace of test skills in a temporary folder, and attacks them through
//! the gateway and the mutual-TLS channel. This library is empty; the harness lives in
//! `tests/harness/`.
#![forbid(unsafe_code)]
