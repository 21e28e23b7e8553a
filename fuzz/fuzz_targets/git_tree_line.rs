//! The lines `git ls-tree -r --long` prints for a fetched repository, which a hostile
//! repository shapes (its paths): none panics, and an accepted line keeps its path whole
//! (everything after the first tab).
#![no_main]

use libfuzzer_sys::fuzz_target;
use skillbox_core::skills::sources::git::parse_tree_line;

fuzz_target!(|line: &str| {
    if let Ok(entry) = parse_tree_line(line) {
        let (_, path) = line.split_once('\t').expect("an accepted line has a tab");
        assert_eq!(entry.path, path);
    }
});
