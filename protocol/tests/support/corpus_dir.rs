//! Where the corpus of real skills is, for the tests that need it (protocol's corpus
//! tests, core's routing evaluation; core includes this file with `#[path]`): the folder
//! `SKILLBOX_CORPUS` names, else `../shared/corpus` beside the clone. Without either, the
//! test prints that it is skipped, by name, and does not run.

use std::path::PathBuf;

/// The corpus folder, or `None` after printing that `test` is skipped. `SKILLBOX_CORPUS`
/// set to a missing folder fails instead: whoever set it (CI does) expects the run.
pub fn corpus_dir(test: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SKILLBOX_CORPUS") {
        let dir = PathBuf::from(dir);
        assert!(
            dir.is_dir(),
            "SKILLBOX_CORPUS is {} but that is not a folder",
            dir.display()
        );
        return Some(dir);
    }
    // `CARGO_MANIFEST_DIR` is a crate folder of the repository (`<repo>/protocol`,
    // `<repo>/core`): the default is `<repo>/../shared/corpus`.
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus");
    if beside.is_dir() {
        return Some(beside);
    }
    println!(
        "SKIPPED {test}: no corpus (set SKILLBOX_CORPUS or put the corpus at ../shared/corpus)"
    );
    None
}
