//! The real-world corpus (unmodified `SKILL.md` files from Anthropic's and OpenClaw's
//! collections): everything loads leniently, and strict validation fails exactly the skills
//! listed here by hand (nothing below is computed by the code under test).
//!
//! The corpus is not part of the repository. It is found at `$SKILLBOX_CORPUS` (which must
//! then exist: CI sets it), else at `../shared/corpus` beside the repository; without
//! either, each test prints `SKIPPED <name>: no corpus ...` and returns.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use skillbox_protocol::skill::{discover, validate_skill, Catalog, DiscoveryOptions, Severity};

#[path = "../support/corpus_dir.rs"]
mod corpus_dir;
use corpus_dir::corpus_dir as corpus;

const ANTHROPIC: [&str; 12] = [
    "algorithmic-art",
    "brand-guidelines",
    "canvas-design",
    "claude-api",
    "frontend-design",
    "internal-comms",
    "mcp-builder",
    "skill-creator",
    "slack-gif-creator",
    "theme-factory",
    "web-artifacts-builder",
    "webapp-testing",
];

/// OpenClaw skills with a top-level `homepage` key (not an Agent Skills field), found
/// with `grep -l '^homepage:' $SKILLBOX_CORPUS/openclaw/*/SKILL.md`.
const OPENCLAW_WITH_HOMEPAGE: [&str; 31] = [
    "1password",
    "apple-notes",
    "apple-reminders",
    "bear-notes",
    "blogwatcher",
    "blucli",
    "camsnap",
    "eightctl",
    "gemini",
    "gifgrep",
    "gog",
    "goplaces",
    "himalaya",
    "mcporter",
    "nano-pdf",
    "notion",
    "obsidian",
    "openai-whisper",
    "openai-whisper-api",
    "openhue",
    "oracle",
    "ordercli",
    "peekaboo",
    "sag",
    "songsee",
    "sonoscli",
    "spotify-player",
    "summarize",
    "things-mac",
    "trello",
    "weather",
];

/// OpenClaw skills with the unknown top-level key `user-invocable`.
const OPENCLAW_WITH_USER_INVOCABLE: [&str; 2] = ["control-ui", "gh-issues"];

/// The remaining OpenClaw skills, which pass strict validation.
const OPENCLAW_STRICT_CLEAN: [&str; 18] = [
    "clawhub",
    "coding-agent",
    "diagram-maker",
    "github",
    "healthcheck",
    "meme-maker",
    "model-usage",
    "node-connect",
    "node-inspect-debugger",
    "python-debugpy",
    "sherpa-onnx-tts",
    "skill-creator",
    "spike",
    "taskflow",
    "taskflow-inbox-triage",
    "tmux",
    "visualize",
    "xurl",
];

/// One collection of the corpus, which must then be there.
fn collection_root(corpus: &Path, collection: &str) -> PathBuf {
    let root = corpus.join(collection);
    assert!(
        root.is_dir(),
        "the corpus at {} has no {collection}/ folder",
        corpus.display()
    );
    root
}

fn load(corpus: &Path, collection: &str) -> Catalog {
    discover(
        &[collection_root(corpus, collection)],
        DiscoveryOptions::default(),
    )
}

fn openclaw_names() -> BTreeSet<&'static str> {
    OPENCLAW_WITH_HOMEPAGE
        .iter()
        .chain(&OPENCLAW_WITH_USER_INVOCABLE)
        .chain(&OPENCLAW_STRICT_CLEAN)
        .copied()
        .collect()
}

fn assert_loads_all(catalog: &Catalog, expected: &BTreeSet<&str>) {
    assert!(
        catalog.skipped.is_empty(),
        "skipped: {:#?}",
        catalog
            .skipped
            .iter()
            .map(|s| s.reason())
            .collect::<Vec<_>>()
    );
    assert!(
        catalog.refused.is_empty(),
        "refused: {:#?}",
        catalog.refused
    );
    assert!(catalog.shadowed.is_empty() && !catalog.truncated);
    let names: BTreeSet<&str> = catalog.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(&names, expected);
}

#[test]
fn corpus_all_63_skills_load_leniently() {
    let Some(corpus) = corpus("corpus_all_63_skills_load_leniently") else {
        return;
    };
    let anthropic = load(&corpus, "anthropic");
    let openclaw = load(&corpus, "openclaw");
    assert_loads_all(&anthropic, &ANTHROPIC.into_iter().collect());
    assert_loads_all(&openclaw, &openclaw_names());
    assert_eq!(anthropic.skills.len() + openclaw.skills.len(), 63);
    for skill in anthropic.skills.iter().chain(&openclaw.skills) {
        assert!(!skill.description.trim().is_empty(), "{}", skill.name);
        assert!(skill.body.is_some(), "{}", skill.name);
        assert!(skill.tools.is_empty(), "{}", skill.name);
        // Only spec deviations, never errors, on loaded skills.
        assert!(skill
            .warnings
            .iter()
            .all(|w| w.severity == Severity::Warning));
    }
}

#[test]
fn corpus_both_collections_together_shadow_the_second_skill_creator() {
    let Some(corpus) = corpus("corpus_both_collections_together_shadow_the_second_skill_creator")
    else {
        return;
    };
    let anthropic = collection_root(&corpus, "anthropic");
    let openclaw = collection_root(&corpus, "openclaw");
    let catalog = discover(
        &[anthropic.clone(), openclaw.clone()],
        DiscoveryOptions::default(),
    );
    assert_eq!(catalog.skills.len(), 62);
    assert_eq!(catalog.shadowed.len(), 1);
    let shadowed = &catalog.shadowed[0];
    assert_eq!(shadowed.name, "skill-creator");
    assert!(shadowed.kept.starts_with(&anthropic) && shadowed.hidden.starts_with(&openclaw));
}

#[test]
fn corpus_claude_api_warns_about_description_length() {
    let Some(corpus) = corpus("corpus_claude_api_warns_about_description_length") else {
        return;
    };
    let catalog = load(&corpus, "anthropic");
    let skill = catalog.get("claude-api").unwrap();
    assert_eq!(skill.description.chars().count(), 1068);
    assert_eq!(skill.warnings.len(), 1, "{:#?}", skill.warnings);
    let w = &skill.warnings[0];
    assert_eq!(w.severity, Severity::Warning);
    assert_eq!(w.field, "description");
    assert!(w.file.ends_with("claude-api/SKILL.md"));
    assert!(w.message.contains("1068 characters"), "{}", w.message);
}

#[test]
fn corpus_strict_validation_fails_exactly_the_known_deviations() {
    let Some(corpus) = corpus("corpus_strict_validation_fails_exactly_the_known_deviations") else {
        return;
    };
    let mut expected_failures: BTreeSet<String> = OPENCLAW_WITH_HOMEPAGE
        .iter()
        .chain(&OPENCLAW_WITH_USER_INVOCABLE)
        .map(|n| format!("openclaw/{n}"))
        .collect();
    expected_failures.insert("anthropic/claude-api".into());

    let mut failures = BTreeSet::new();
    let mut folders = 0;
    for collection in ["anthropic", "openclaw"] {
        let mut dirs: Vec<_> = std::fs::read_dir(collection_root(&corpus, collection))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        for dir in dirs {
            folders += 1;
            let folder = dir.file_name().unwrap().to_string_lossy().into_owned();
            let lenient = validate_skill(&dir, false);
            assert!(
                lenient.passed,
                "{collection}/{folder} fails lenient validation: {:#?}",
                lenient.diagnostics
            );
            let strict = validate_skill(&dir, true);
            if !strict.passed {
                assert!(!strict.diagnostics.is_empty());
                failures.insert(format!("{collection}/{folder}"));
            }
        }
    }
    assert_eq!(folders, 63);
    assert_eq!(failures, expected_failures);
}

#[test]
fn corpus_strict_failures_name_the_offending_key() {
    let Some(corpus) = corpus("corpus_strict_failures_name_the_offending_key") else {
        return;
    };
    for name in OPENCLAW_WITH_USER_INVOCABLE {
        let v = validate_skill(&collection_root(&corpus, "openclaw").join(name), true);
        assert_eq!(v.diagnostics.len(), 1, "{name}: {:#?}", v.diagnostics);
        assert_eq!(v.diagnostics[0].field, "user-invocable");
        assert_eq!(v.diagnostics[0].severity, Severity::Warning);
    }
    for name in ["1password", "weather"] {
        let v = validate_skill(&collection_root(&corpus, "openclaw").join(name), true);
        assert_eq!(v.diagnostics.len(), 1, "{name}: {:#?}", v.diagnostics);
        assert_eq!(v.diagnostics[0].field, "homepage");
    }
}

#[test]
fn corpus_openclaw_requirements_map_to_prerequisites() {
    let Some(corpus) = corpus("corpus_openclaw_requirements_map_to_prerequisites") else {
        return;
    };
    let catalog = load(&corpus, "openclaw");
    let op = catalog.get("1password").unwrap();
    assert_eq!(op.prerequisites.bins, ["op"]);
    assert!(op.prerequisites.os.is_empty());
    let notes = catalog.get("apple-notes").unwrap();
    assert_eq!(notes.prerequisites.bins, ["memo"]);
    assert_eq!(notes.prerequisites.os, ["darwin"]);
    let coding = catalog.get("coding-agent").unwrap();
    assert_eq!(
        coding.prerequisites.any_bins,
        ["claude", "codex", "opencode"]
    );
    assert!(coding.prerequisites.bins.is_empty());
    let places = catalog.get("goplaces").unwrap();
    assert_eq!(places.prerequisites.env, ["GOOGLE_PLACES_API_KEY"]);
}
