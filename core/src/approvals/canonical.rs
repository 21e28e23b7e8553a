//! The identity of a call's arguments: compact JSON with sorted keys, and its SHA-256, so
//! that two calls with the same arguments in any key order are the same call to approve.

use ring::digest::{digest, SHA256};
use serde_json::Value;

/// The hex SHA-256 of the canonical JSON of `args`: two calls with the same arguments in
/// any key order share it.
pub fn args_hash(args: &Value) -> String {
    hex(digest(&SHA256, canonical_json(args).as_bytes()).as_ref())
}

/// Compact JSON with every object's keys sorted, whatever map type serde_json was built
/// with (its `preserve_order` feature keeps insertion order).
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}
