//! The paths a bot or a tool names a context file by: every accepted path is relative,
//! made of plain names (no empty, `.` or `..` segment), with no control or format
//! character, and is exactly its segments joined by `/`. None panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillbox_core::contexts::files::check_path;

fuzz_target!(|path: &str| {
    if let Ok(segments) = check_path(path) {
        assert_eq!(segments.join("/"), path);
        assert!(!path.starts_with('/'));
        for s in &segments {
            assert!(!s.is_empty() && *s != "." && *s != "..", "{path:?}");
        }
        assert!(!path.chars().any(char::is_control), "{path:?}");
        assert!(
            !path.contains('\u{202e}') && !path.contains('\u{200b}'),
            "{path:?}"
        );
    }
});
