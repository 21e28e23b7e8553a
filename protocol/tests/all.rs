//! Integration tests of `skillbox-protocol`, compiled as one binary (see `suite/`).

mod suite;
