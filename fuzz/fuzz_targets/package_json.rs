//! `package.json` of arbitrary UTF-8, loaded as discovery loads a skill folder
//! (`skill::load_skill`: the `owliabot`/`skillbox` field check, size cap, nesting
//! pre-check, JSON parse into the typed manifest, validation). Never panics; a plain npm
//! package (a JSON object with neither field) is "not a skill"; a loaded skill has a name,
//! comes from `package.json` alone and carries no error; a skipped one gives at least one
//! error as its reason.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use skillbox_protocol::skill::{load_skill, LoadOutcome, ManifestFormat, Severity};

/// One skill folder for the whole run; each input overwrites its manifest.
static FOLDER: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();

fuzz_target!(|text: &str| {
    let (_, dir) = FOLDER.get_or_init(|| {
        let tmp = tempfile::tempdir().expect("a temporary folder for the skill");
        let dir = tmp.path().join("fuzzed");
        std::fs::create_dir(&dir).expect("the skill folder");
        (tmp, dir)
    });
    if std::fs::write(dir.join("package.json"), text).is_err() {
        return;
    }
    match load_skill(dir) {
        LoadOutcome::Loaded(skill) => {
            assert!(!skill.name.is_empty(), "a loaded skill without a name");
            assert_eq!(skill.formats, [ManifestFormat::PackageJson]);
            assert!(
                skill.warnings.iter().all(|d| d.severity != Severity::Error),
                "a loaded skill carries an error: {:?}",
                skill.warnings
            );
        }
        LoadOutcome::Skipped(skipped) => {
            assert!(
                skipped
                    .diagnostics
                    .iter()
                    .any(|d| d.severity == Severity::Error),
                "skipped without an error: {:?}",
                skipped.diagnostics
            );
        }
        LoadOutcome::NotASkill => {
            let value: serde_json::Value =
                serde_json::from_str(text).expect("only a parsed object is \"not a skill\"");
            let object = value
                .as_object()
                .expect("only an object is \"not a skill\"");
            assert!(!object.contains_key("owliabot") && !object.contains_key("skillbox"));
        }
    }
});
