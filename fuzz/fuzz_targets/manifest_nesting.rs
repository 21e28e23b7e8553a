//! The manifest nesting pre-check on arbitrary UTF-8: never panics, and text it passes is
//! parsed by the YAML and JSON parsers without hitting their recursion limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillbox_protocol::skill::nesting::{check_json, check_yaml, MAX_MANIFEST_DEPTH};

fuzz_target!(|text: &str| {
    if check_yaml(text, MAX_MANIFEST_DEPTH).is_ok() {
        if let Err(e) = serde_norway::from_str::<serde_json::Value>(text) {
            assert!(!e.to_string().contains("recursion limit"), "{e}");
        }
    }
    if check_json(text, MAX_MANIFEST_DEPTH).is_ok() {
        if let Err(e) = serde_json::from_str::<serde_json::Value>(text) {
            assert!(!e.to_string().contains("recursion limit"), "{e}");
        }
    }
});
