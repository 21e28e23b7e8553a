//! `SKILL.md` frontmatter splitting on arbitrary UTF-8: never panics, and on success the
//! YAML lies inside the text and the body offset is a char boundary within it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillbox_protocol::skill::frontmatter::split;

fuzz_target!(|text: &str| {
    if let Ok(s) = split(text) {
        assert!(s.body_offset <= text.len());
        assert!(text.is_char_boundary(s.body_offset));
        let start = s.yaml.as_ptr() as usize - text.as_ptr() as usize;
        assert!(start + s.yaml.len() <= s.body_offset);
    }
});
