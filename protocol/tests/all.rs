//! Integration tests of `skillbox-protocol`, compiled as one binary (see `suite/`).

// `cfg(test)` always holds here; it marks the helpers in `suite/` as test code for clippy's
// `allow-unwrap-in-tests`.
#[cfg(test)]
mod suite;
