//! Integration tests of the core crate, compiled as one binary (STYLE: tests/all.rs + suite).

mod suite;
