//! Integration tests of skillbox-certs, compiled as one binary.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod suite;
