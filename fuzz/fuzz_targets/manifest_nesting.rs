//! The manifest nesting pre-check on arbitrary UTF-8: it never panics, and text it passes
//! goes on to the YAML and JSON parsers the loaders run (which must not panic either; a
//! slow input shows up as a libFuzzer timeout).
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillbox_protocol::skill::nesting::{check_json, check_yaml, MAX_MANIFEST_DEPTH};

fuzz_target!(|text: &str| {
    if check_yaml(text, MAX_MANIFEST_DEPTH).is_ok() {
        let _ = serde_norway::from_str::<serde_json::Value>(text);
    }
    if check_json(text, MAX_MANIFEST_DEPTH).is_ok() {
        let _ = serde_json::from_str::<serde_json::Value>(text);
    }
});
