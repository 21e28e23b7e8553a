//! `skill.yaml` of arbitrary UTF-8, loaded as discovery loads a skill folder
//! (`skill::load_skill`: read with its size cap, nesting pre-check, YAML parse into the
//! typed manifest, validation, merge). Never panics; a folder with a `skill.yaml` is never
//! "not a skill"; a loaded skill has a name, comes from `skill.yaml` alone and carries no
//! error; a skipped one gives at least one error as its reason.
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
    if std::fs::write(dir.join("skill.yaml"), text).is_err() {
        return;
    }
    match load_skill(dir) {
        LoadOutcome::Loaded(skill) => {
            assert!(!skill.name.is_empty(), "a loaded skill without a name");
            assert_eq!(skill.formats, [ManifestFormat::SkillYaml]);
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
        LoadOutcome::NotASkill => panic!("a folder with a skill.yaml is not a skill"),
    }
});
