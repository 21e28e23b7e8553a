use std::path::{Path, PathBuf};

use skillbox_protocol::skill::{discover, Catalog, DiscoveryOptions, LockedSkill};

use super::*;
use skillbox_protocol::result::ErrorKind;

const SKILL_MD: &str = "---\nname: notes\ndescription: Keeps notes. Use when the user asks to note something.\n---\n# Notes\n\nRun `scripts/run.py` with the text.\nIt prints the note.\n";

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    store: Store,
    config: RepairConfig,
    catalog: Catalog,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        let skill = root.join("notes");
        std::fs::create_dir_all(skill.join("scripts")).unwrap();
        std::fs::create_dir_all(skill.join("references")).unwrap();
        std::fs::write(skill.join("SKILL.md"), SKILL_MD).unwrap();
        std::fs::write(skill.join("scripts/run.py"), "print('note')\n").unwrap();
        std::fs::write(skill.join("references/guide.md"), "# Guide\n").unwrap();
        let store = Store::open(&Store::db_path(dir.path())).unwrap();
        let catalog = discover(std::slice::from_ref(&root), DiscoveryOptions::default());
        assert!(catalog.get("notes").is_some(), "{:?}", catalog.skipped);
        // Two executed runs of `notes` the proposals name; `rt_plan` was only planned.
        for (run, executed) in [("rt_1", true), ("rt_2", true), ("rt_plan", false)] {
            record_run(&store, run, "notes", executed);
        }
        Self {
            _dir: dir,
            root,
            store,
            config: RepairConfig::default(),
            catalog,
        }
    }

    fn skill(&self) -> PathBuf {
        self.root.join("notes")
    }

    fn propose(&self, p: &RepairProposal) -> Result<RepairRecord, RepairError> {
        let target = RepairTarget {
            skills_root: &self.root,
            catalog: &self.catalog,
            store: &self.store,
            config: &self.config,
        };
        propose(&target, "notes", p)
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.skill().join(rel)).unwrap()
    }
}

/// Records route `run` of `skill` as the routes endpoints do, with its events when it was
/// executed.
fn record_run(store: &Store, run: &str, skill: &str, executed: bool) {
    let route = crate::state::store::RouteRecord {
        route_id: run.into(),
        at: 1,
        query: "q".into(),
        context_id: None,
        primary: Some(skill.into()),
        plan: serde_json::json!({}),
        caller: "operator".into(),
    };
    store.record_route(&route, 100).unwrap();
    if executed {
        let event = crate::state::store::RouteEvent {
            route_id: run.into(),
            seq: 0,
            from_state: "selected".into(),
            to_state: "failed".into(),
            skill: Some(skill.into()),
            tool: Some("run".into()),
            reason: "tool_error".into(),
            at: 2,
        };
        store.record_route_events(&[event]).unwrap();
    }
}

#[test]
fn a_run_id_must_name_a_real_run_of_that_skill() {
    let f = Fixture::new();
    record_run(&f.store, "rt_other", "weather", true);
    for (run, why) in [
        ("made-up-1", "is not a run of this core"),
        ("rt_plan", "only planned"),
        ("rt_other", "did not run skill \"notes\""),
    ] {
        let mut p = proposal(vec![diff("SKILL.md", DOC_DIFF)]);
        p.run_id = run.into();
        let err = f.propose(&p).unwrap_err();
        assert!(matches!(err, RepairError::Proposal { .. }), "{run}: {err}");
        assert!(err.to_string().contains(why), "{run}: {err}");
        assert_eq!(f.store.repair_attempts("notes", run).unwrap(), 0, "{run}");
    }
    assert_eq!(f.read("SKILL.md"), SKILL_MD);
}

fn proposal(patch: Vec<FileChange>) -> RepairProposal {
    RepairProposal {
        run_id: "rt_1".into(),
        error_signature: "tool_error: missing --text".into(),
        root_cause: "the example omits --text".into(),
        expected_effect: "the agent passes --text".into(),
        task_progress: 0.8,
        root_cause_count: 1,
        patch,
    }
}

fn diff(path: &str, diff: &str) -> FileChange {
    FileChange {
        path: path.into(),
        diff: Some(diff.into()),
        content: None,
    }
}

fn content(path: &str, content: &str) -> FileChange {
    FileChange {
        path: path.into(),
        diff: None,
        content: Some(content.into()),
    }
}

const DOC_DIFF: &str = "--- a/SKILL.md\n+++ b/SKILL.md\n@@ -7,2 +7,2 @@\n-Run `scripts/run.py` with the text.\n+Run `scripts/run.py --text \"...\"`.\n It prints the note.\n";

#[test]
fn repair_applies_a_diff_and_new_files_and_records_it() {
    let f = Fixture::new();
    let record = f
        .propose(&proposal(vec![
            diff("SKILL.md", DOC_DIFF),
            content("scripts/run.py", "import sys\nprint(sys.argv)\n"),
            content("references/flags/text.md", "Pass --text.\n"),
        ]))
        .unwrap();
    assert_eq!(record.outcome, RepairOutcome::Applied);
    assert_eq!(record.attempt, 1);
    assert_eq!(
        record.patched_files,
        ["SKILL.md", "scripts/run.py", "references/flags/text.md"]
    );
    assert!(f.read("SKILL.md").contains("--text \"...\""));
    assert!(f.read("SKILL.md").starts_with("---\nname: notes\n"));
    assert_eq!(f.read("scripts/run.py"), "import sys\nprint(sys.argv)\n");
    assert_eq!(f.read("references/flags/text.md"), "Pass --text.\n");
    let stored = f.store.repairs_of("notes").unwrap();
    assert_eq!(stored, [record]);
    let leftovers: Vec<_> = std::fs::read_dir(f.skill().join("scripts"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "no temporary files left");
}

#[test]
fn repair_refuses_a_signed_skill() {
    let f = Fixture::new();
    std::fs::write(f.skill().join(SIGNATURE_FILE), "sig").unwrap();
    let err = f
        .propose(&proposal(vec![diff("SKILL.md", DOC_DIFF)]))
        .unwrap_err();
    assert!(matches!(err, RepairError::Signed { .. }), "{err}");
    assert_eq!(err.check(), "trust");
    std::fs::remove_file(f.skill().join(SIGNATURE_FILE)).unwrap();

    // Signed according to the install lock.
    let mut l = lock::read(&f.root).unwrap();
    l.skills.insert(
        "notes".into(),
        LockedSkill {
            version: Some("1.0.0".into()),
            digest: "sha256:00".into(),
            trust: Trust::Signed,
            publisher: Some("acme".into()),
            leaf_fingerprint: None,
            publisher_key: None,
            root_fingerprint: None,
            installed_at: "2025-01-01T00:00:00Z".into(),
            origin: None,
        },
    );
    lock::write(&f.root, &l).unwrap();
    let err = f
        .propose(&proposal(vec![diff("SKILL.md", DOC_DIFF)]))
        .unwrap_err();
    assert!(matches!(err, RepairError::Signed { .. }), "{err}");
    assert!(
        err.to_string().contains("only local, unsigned skills"),
        "{err}"
    );
    assert_eq!(f.read("SKILL.md"), SKILL_MD, "untouched");
}

#[test]
fn repair_refuses_paths_outside_its_scope() {
    let f = Fixture::new();
    let outside = f.root.parent().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, f.skill().join("scripts/link")).unwrap();
    for path in [
        "skill.yaml",
        "../other/SKILL.md",
        "/etc/passwd",
        "scripts/../../other/run.py",
        "policies/default.json",
        "scripts/link/evil.py",
    ] {
        let err = f
            .propose(&proposal(vec![content(path, "x\n")]))
            .unwrap_err();
        assert!(
            matches!(err, RepairError::OutOfScope { .. }),
            "{path}: {err}"
        );
        assert_eq!(err.error_kind(), ErrorKind::PermissionDenied);
    }
    assert!(
        !outside.join("evil.py").exists(),
        "nothing written through the link"
    );
}

#[test]
fn repair_refuses_a_change_to_the_frontmatter() {
    let f = Fixture::new();
    let widened = SKILL_MD.replace("---\n# Notes", "allowed-tools: [\"*\"]\n---\n# Notes");
    let err = f
        .propose(&proposal(vec![content("SKILL.md", &widened)]))
        .unwrap_err();
    assert!(matches!(err, RepairError::Manifest), "{err}");
    assert_eq!(f.read("SKILL.md"), SKILL_MD);
}

#[test]
fn repair_refuses_too_many_files() {
    let f = Fixture::new();
    let files = (0..4)
        .map(|i| content(&format!("references/{i}.md"), "x\n"))
        .collect();
    let err = f.propose(&proposal(files)).unwrap_err();
    assert!(
        matches!(
            err,
            RepairError::Budget {
                what: "files",
                count: 4,
                max: 3
            }
        ),
        "{err}"
    );
    assert!(!f.skill().join("references/0.md").exists());
}

#[test]
fn repair_refuses_too_many_hunks() {
    let f = Fixture::new();
    let old: String = (0..20).map(|i| format!("line {i}\n")).collect();
    std::fs::write(f.skill().join("scripts/run.py"), &old).unwrap();
    // Every other line changed: 9 separate hunks.
    let new: String = (0..20)
        .map(|i| {
            if i % 2 == 1 && i < 18 {
                format!("LINE {i}\n")
            } else {
                format!("line {i}\n")
            }
        })
        .collect();
    let err = f
        .propose(&proposal(vec![content("scripts/run.py", &new)]))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RepairError::Budget {
                what: "hunks",
                count: 9,
                max: 8
            }
        ),
        "{err}"
    );
    assert_eq!(f.read("scripts/run.py"), old);
}

#[test]
fn repair_refuses_too_many_added_doc_words_but_not_script_words() {
    let f = Fixture::new();
    let long = "word ".repeat(301) + "\n";
    let err = f
        .propose(&proposal(vec![content("references/long.md", &long)]))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RepairError::Budget {
                what: "added doc words",
                count: 301,
                max: 300
            }
        ),
        "{err}"
    );
    // The same words in a script are code, not documentation.
    let script = format!("# {long}");
    f.propose(&proposal(vec![content("scripts/run.py", &script)]))
        .unwrap();
}

#[test]
fn repair_refuses_a_third_attempt_in_a_run() {
    let f = Fixture::new();
    for i in 0..2 {
        let r = f
            .propose(&proposal(vec![content(
                "references/guide.md",
                &format!("v{i}\n"),
            )]))
            .unwrap();
        assert_eq!(r.attempt, i + 1);
    }
    let err = f
        .propose(&proposal(vec![content("references/guide.md", "v2\n")]))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RepairError::Attempts {
                used: 2,
                max: 2,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.check(), "budget");
    assert_eq!(f.read("references/guide.md"), "v1\n");
    // Another run has its own budget.
    let mut other = proposal(vec![content("references/guide.md", "v3\n")]);
    other.run_id = "rt_2".into();
    assert_eq!(f.propose(&other).unwrap().attempt, 1);
}

#[test]
fn repair_refuses_an_ineligible_failure_and_records_it() {
    let f = Fixture::new();
    let cases = [
        (0.5, 1, "too far from success"),
        (0.9, 2, "2 root causes"),
        (0.9, 0, "no root cause"),
    ];
    for (progress, causes, why) in cases {
        let mut p = proposal(vec![diff("SKILL.md", DOC_DIFF)]);
        p.task_progress = progress;
        p.root_cause_count = causes;
        let err = f.propose(&p).unwrap_err();
        assert!(matches!(err, RepairError::Ineligible { .. }), "{err}");
        assert!(err.to_string().contains(why), "{err}");
    }
    let records = f.store.repairs_of("notes").unwrap();
    assert_eq!(records.len(), 3);
    assert!(records
        .iter()
        .all(|r| r.outcome == RepairOutcome::Refused && r.check.as_deref() == Some("eligibility")));
    assert_eq!(
        f.store.repair_attempts("notes", "rt_1").unwrap(),
        0,
        "refusals use no attempt"
    );
    assert_eq!(f.read("SKILL.md"), SKILL_MD);
}

#[test]
fn repair_refuses_a_diff_that_does_not_apply() {
    let f = Fixture::new();
    let err = f
        .propose(&proposal(vec![diff(
            "SKILL.md",
            "@@ -1,1 +1,1 @@\n-nope\n+yes\n",
        )]))
        .unwrap_err();
    assert!(matches!(err, RepairError::Patch { .. }), "{err}");
}

#[test]
fn repair_of_an_installed_local_skill_updates_its_locked_digest() {
    let f = Fixture::new();
    let mut l = lock::read(&f.root).unwrap();
    l.skills.insert(
        "notes".into(),
        LockedSkill {
            version: None,
            digest: package_digest(&f.skill()).unwrap().prefixed(),
            trust: Trust::Local,
            publisher: None,
            leaf_fingerprint: None,
            publisher_key: None,
            root_fingerprint: None,
            installed_at: "2025-01-01T00:00:00Z".into(),
            origin: None,
        },
    );
    lock::write(&f.root, &l).unwrap();
    f.propose(&proposal(vec![diff("SKILL.md", DOC_DIFF)]))
        .unwrap();
    let after = lock::read(&f.root).unwrap();
    assert_eq!(
        after.get("notes").unwrap().digest,
        package_digest(&f.skill()).unwrap().prefixed()
    );
}

fn change(target: &Path, new: &str, old: Option<&str>) -> Change {
    Change {
        target: target.to_path_buf(),
        new: new.as_bytes().to_vec(),
        old: old.map(|o| o.as_bytes().to_vec()),
        mode: 0o644,
    }
}

#[test]
fn apply_rolls_back_a_partial_failure() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.md");
    let b = dir.path().join("new/deeper/b.md");
    let c = dir.path().join("c.md");
    std::fs::write(&a, "old a\n").unwrap();
    std::fs::write(&c, "old c\n").unwrap();
    let changes = [
        change(&a, "new a\n", Some("old a\n")),
        change(&b, "new b\n", None),
        change(&c, "new c\n", Some("old c\n")),
    ];
    let mut renames = 0;
    let err = apply::apply_with(&changes, &mut |from, to| {
        renames += 1;
        if renames == 3 {
            return Err(std::io::Error::other("disk full"));
        }
        std::fs::rename(from, to)
    })
    .unwrap_err();
    assert!(matches!(err, ApplyError::Replace { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "old a\n", "restored");
    assert_eq!(
        std::fs::read_to_string(&c).unwrap(),
        "old c\n",
        "never replaced"
    );
    assert!(!b.exists(), "the new file is gone");
    assert!(
        !dir.path().join("new").exists(),
        "and the folders made for it"
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, ["a.md", "c.md"], "no temporary file left");
}

#[test]
fn apply_writes_everything_when_nothing_fails() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.md");
    std::fs::write(&a, "old\n").unwrap();
    let b = dir.path().join("x/b.md");
    apply::apply(&[change(&a, "new\n", Some("old\n")), change(&b, "b\n", None)]).unwrap();
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "new\n");
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "b\n");
}

#[test]
fn repair_record_id_fails_instead_of_zeros_when_the_random_source_fails() {
    let err = RepairError::from(record_id(&crate::random::fake::FailingAfter::new(0)).unwrap_err());
    assert_eq!(err.error_kind(), ErrorKind::Unavailable);
    assert!(
        err.to_string()
            .contains("no repair record id could be made"),
        "{err}"
    );
    let id = record_id(&crate::random::SystemSource::default()).unwrap();
    assert!(
        id.starts_with("rp_") && id.len() == 19 && id != "rp_0000000000000000",
        "{id}"
    );
}
