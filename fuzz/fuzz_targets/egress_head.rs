//! The first bytes a hostile program sends the egress proxy: the head is read, sorted
//! (`CONNECT host:port`, an absolute `http://` URL, or refused) and its `Host` checked
//! against the host asked for. None panics; a head the proxy would carry names its host
//! and no other.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillbox_core::proxy::egress::judge_head;

fuzz_target!(|bytes: &[u8]| {
    let verdict = judge_head(bytes);
    if let Some(asked) = verdict.strip_prefix("asks ") {
        assert!(
            asked.starts_with("http://") || asked.starts_with("https://"),
            "{asked}"
        );
        assert!(!asked.contains(char::is_whitespace), "{asked}");
    }
});
