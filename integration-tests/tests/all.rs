//! The skillbox end-to-end suite, one test binary: each test starts the real `skillbox up`
//! (which starts the real `skillbox-executor`) on a fresh temporary workspace, on port 0,
//! and drives it through the gateway and the mutual-TLS channel. The binaries are taken
//! from the target folder this test binary was built into; build the workspace first.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;
mod suite;
