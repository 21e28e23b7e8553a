//! A skill collection index as `skillbox skill find` reads it from a file or a URL
//! (docs/skill-index.md): arbitrary bytes never panic, and an index that parses holds only
//! valid skill names, one entry per name.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillbox_core::skills::find::parse_index;
use skillbox_protocol::skill::validate::is_spec_skill_name;

fuzz_target!(|input: &[u8]| {
    if let Ok(index) = parse_index(input, "fuzz") {
        for (i, e) in index.skills.iter().enumerate() {
            assert!(is_spec_skill_name(&e.name), "{:?}", e.name);
            assert!(index.skills[..i].iter().all(|o| o.name != e.name));
        }
    }
});
