//! Bodies stay on disk: a loaded `Skill` holds an offset, never the Markdown body, so a
//! catalog of many skills with large bodies stays small. No timing here.

use skillbox_protocol::skill::{discover, DiscoveryOptions, Skill};
use tempfile::tempdir;

use super::common::*;

const MARKER: &str = "BODY-ONLY-MARKER";

#[test]
fn skill_value_does_not_hold_the_body() {
    let root = tempdir().unwrap();
    let body = format!("{MARKER}\n{}", "lorem ipsum dolor sit amet\n".repeat(800));
    assert!(body.len() > 20 * 1024);
    let text = format!("---\nname: big\ndescription: Does X.\n---\n{body}");
    let dir = write_skill(root.path(), "big", &[("SKILL.md", &text)]);
    let skill = clean(&dir);
    let debug = format!("{skill:?}");
    assert!(
        !debug.contains(MARKER),
        "the body leaked into the Skill value"
    );
    let json = serde_json::to_string(&skill).unwrap();
    assert!(!json.contains(MARKER));
    assert!(
        json.len() < 2048,
        "serialized skill is {} bytes",
        json.len()
    );
    assert!(std::mem::size_of::<Skill>() < 1024);
    assert!(skill.read_body().unwrap().starts_with(MARKER));
}

#[test]
fn catalog_of_large_skills_does_not_hold_bodies() {
    let root = tempdir().unwrap();
    let body = format!("{MARKER}\n{}", "x".repeat(20 * 1024));
    for i in 0..50 {
        let name = format!("s{i}");
        write_skill(
            root.path(),
            &name,
            &[(
                "SKILL.md",
                &format!("---\nname: {name}\ndescription: Does X.\n---\n{body}"),
            )],
        );
    }
    let catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
    assert_eq!(catalog.skills.len(), 50);
    let json = serde_json::to_string(&catalog).unwrap();
    assert!(!json.contains(MARKER));
    // 50 bodies of 20 KiB would be 1 MiB; the catalog is a small fraction of that.
    assert!(
        json.len() < 50 * 1024,
        "catalog serializes to {} bytes",
        json.len()
    );
}
