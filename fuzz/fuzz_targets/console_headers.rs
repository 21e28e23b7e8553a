//! What a browser or bot puts in headers and URLs the console and the gateway read:
//! `traceparent`, the `Cookie` header, and the sign-in's `next` destination. None panics;
//! an accepted traceparent is the canonical 55-character form, a cookie value lies inside
//! the header, and an accepted `next` is a plain console path (no open redirect).
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillbox_core::gateway::console::{safe_next, session::cookie_value};
use skillbox_core::observe::TraceParent;

fuzz_target!(|text: &str| {
    if let Some(t) = TraceParent::parse(text) {
        assert_eq!(t.as_str().len(), 55);
        assert_eq!(t.trace_id().len(), 32);
        assert!(t
            .as_str()
            .bytes()
            .all(|b| b == b'-' || b.is_ascii_hexdigit()));
    }
    if let Some(v) = cookie_value(text, "skillbox_console") {
        let start = v.as_ptr() as usize - text.as_ptr() as usize;
        assert!(start + v.len() <= text.len());
        assert!(!v.contains(';'));
    }
    if let Some(next) = safe_next(Some(text)) {
        assert!(next.starts_with("/console/"));
        assert!(!next.contains("//") && !next.contains("..") && !next.contains(':'));
        assert!(!next.contains('?') && !next.contains('#') && !next.contains('\\'));
    }
});
