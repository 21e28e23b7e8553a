//! The requests a hostile program sends through the egress proxy's reading of a skill
//! with bound secrets (`intercept.rs`), as a plain HTTP connection to `api.test`: the first
//! byte's low bit allows placeholders in bodies, the rest is the connection. None panics
//! or hangs; the secret bound to another host never reaches this server, and no secret's
//! value comes back to the program, unless the program sent that value itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillbox_core::proxy::egress::{judge_reading, JUDGE_VALUE_ELSEWHERE, JUDGE_VALUE_HERE};

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, bytes)) = data.split_first() else {
        return;
    };
    let judged = judge_reading(bytes, flags & 1 == 1);
    if !contains(bytes, JUDGE_VALUE_ELSEWHERE) {
        assert!(
            !contains(&judged.server_saw, JUDGE_VALUE_ELSEWHERE),
            "a secret bound to another host reached api.test"
        );
    }
    for value in [JUDGE_VALUE_HERE, JUDGE_VALUE_ELSEWHERE] {
        if !contains(bytes, value) {
            assert!(
                !contains(&judged.program_got, value),
                "a secret's value came back to the program"
            );
        }
    }
});
