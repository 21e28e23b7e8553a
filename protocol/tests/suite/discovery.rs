//! Discovery over several roots: precedence and shadowing, depth and folder caps,
//! symlinks, ignored folders.

use std::path::PathBuf;

use skillbox_protocol::skill::{
    discover, standard_roots, DiscoveryOptions, DEFAULT_MAX_DEPTH, DEFAULT_MAX_FOLDERS,
};
use tempfile::tempdir;

use super::common::*;

fn opts(max_depth: usize, max_folders: usize) -> DiscoveryOptions {
    DiscoveryOptions {
        max_depth,
        max_folders,
    }
}

#[test]
fn discover_first_root_wins_and_records_shadowing() {
    let high = tempdir().unwrap();
    let low = tempdir().unwrap();
    let kept = write_skill(
        high.path(),
        "dup",
        &[("SKILL.md", &skill_md("dup", "high", ""))],
    );
    let hidden = write_skill(
        low.path(),
        "dup",
        &[("SKILL.md", &skill_md("dup", "low", ""))],
    );
    write_skill(
        low.path(),
        "only-low",
        &[("SKILL.md", &skill_md("only-low", "low", ""))],
    );
    let catalog = discover(
        &[high.path().to_path_buf(), low.path().to_path_buf()],
        DiscoveryOptions::default(),
    );
    let names: Vec<_> = catalog.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["dup", "only-low"]);
    assert_eq!(catalog.get("dup").unwrap().description, "high");
    assert_eq!(catalog.shadowed.len(), 1);
    assert_eq!(catalog.shadowed[0].name, "dup");
    assert_eq!(catalog.shadowed[0].kept, kept);
    assert_eq!(catalog.shadowed[0].hidden, hidden);
    assert!(catalog.skipped.is_empty() && catalog.refused.is_empty() && !catalog.truncated);

    // Swapping the roots swaps the winner.
    let catalog = discover(
        &[low.path().to_path_buf(), high.path().to_path_buf()],
        DiscoveryOptions::default(),
    );
    assert_eq!(catalog.get("dup").unwrap().description, "low");
    assert_eq!(catalog.shadowed[0].hidden, kept);
}

#[test]
fn discover_missing_root_is_skipped() {
    let root = tempdir().unwrap();
    write_skill(root.path(), "a", &[("SKILL.md", &skill_md("a", "x", ""))]);
    let catalog = discover(
        &[root.path().join("nope"), root.path().to_path_buf()],
        DiscoveryOptions::default(),
    );
    assert_eq!(catalog.skills.len(), 1);
    assert!(catalog.refused.is_empty());
}

#[test]
fn discover_reports_skipped_folders_with_reason() {
    let root = tempdir().unwrap();
    write_skill(
        root.path(),
        "good",
        &[("SKILL.md", &skill_md("good", "x", ""))],
    );
    let bad = write_skill(root.path(), "bad", &[("SKILL.md", "---\nname: bad\n---\n")]);
    let catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
    assert_eq!(catalog.skills.len(), 1);
    assert_eq!(catalog.skipped.len(), 1);
    assert_eq!(catalog.skipped[0].dir, bad);
    assert!(catalog.skipped[0].reason().contains("description"));
}

#[test]
fn discover_finds_nested_skills_within_depth() {
    let root = tempdir().unwrap();
    write_skill(
        root.path(),
        "group/sub/deep",
        &[("SKILL.md", &skill_md("deep", "x", ""))],
    );
    write_skill(
        root.path(),
        "group/mid",
        &[("SKILL.md", &skill_md("mid", "x", ""))],
    );
    let catalog = discover(
        &[root.path().to_path_buf()],
        opts(DEFAULT_MAX_DEPTH, DEFAULT_MAX_FOLDERS),
    );
    assert!(catalog.get("deep").is_some() && catalog.get("mid").is_some());
}

#[test]
fn discover_stops_at_depth_cap() {
    let root = tempdir().unwrap();
    write_skill(
        root.path(),
        "top",
        &[("SKILL.md", &skill_md("top", "x", ""))],
    );
    write_skill(
        root.path(),
        "group/mid",
        &[("SKILL.md", &skill_md("mid", "x", ""))],
    );
    write_skill(
        root.path(),
        "a/b/c/d",
        &[("SKILL.md", &skill_md("d", "x", ""))],
    );
    let names = |depth| {
        let c = discover(
            &[root.path().to_path_buf()],
            opts(depth, DEFAULT_MAX_FOLDERS),
        );
        c.skills.into_iter().map(|s| s.name).collect::<Vec<_>>()
    };
    assert_eq!(names(1), ["top"]);
    assert_eq!(names(2), ["mid", "top"]);
    assert_eq!(names(3), ["mid", "top"]);
    assert_eq!(names(4), ["d", "mid", "top"]);
}

#[test]
fn discover_does_not_look_inside_a_skill_folder() {
    let root = tempdir().unwrap();
    write_skill(
        root.path(),
        "outer",
        &[
            ("SKILL.md", &skill_md("outer", "x", "")),
            ("examples/inner/SKILL.md", &skill_md("inner", "x", "")),
        ],
    );
    let catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
    assert!(catalog.get("outer").is_some());
    assert!(catalog.get("inner").is_none());
}

#[test]
fn discover_folder_cap_truncates() {
    let root = tempdir().unwrap();
    for i in 0..10 {
        let name = format!("s{i:02}");
        write_skill(
            root.path(),
            &name,
            &[("SKILL.md", &skill_md(&name, "x", ""))],
        );
    }
    let capped = discover(&[root.path().to_path_buf()], opts(DEFAULT_MAX_DEPTH, 4));
    assert!(capped.truncated);
    assert_eq!(capped.skills.len(), 4);
    let full = discover(&[root.path().to_path_buf()], opts(DEFAULT_MAX_DEPTH, 10));
    assert!(!full.truncated);
    assert_eq!(full.skills.len(), 10);
}

#[test]
fn discover_folder_cap_spans_all_roots() {
    let a = tempdir().unwrap();
    let b = tempdir().unwrap();
    for (root, prefix) in [(&a, "a"), (&b, "b")] {
        for i in 0..3 {
            let name = format!("{prefix}{i}");
            write_skill(
                root.path(),
                &name,
                &[("SKILL.md", &skill_md(&name, "x", ""))],
            );
        }
    }
    let c = discover(
        &[a.path().to_path_buf(), b.path().to_path_buf()],
        opts(DEFAULT_MAX_DEPTH, 4),
    );
    assert!(c.truncated);
    assert_eq!(c.skills.len(), 4);
}

#[test]
fn discover_ignores_hidden_folders_and_node_modules() {
    let root = tempdir().unwrap();
    write_skill(
        root.path(),
        ".hidden",
        &[("SKILL.md", &skill_md(".hidden", "x", ""))],
    );
    write_skill(
        root.path(),
        ".git/sub",
        &[("SKILL.md", &skill_md("sub", "x", ""))],
    );
    write_skill(
        root.path(),
        "node_modules",
        &[("SKILL.md", &skill_md("node-modules", "x", ""))],
    );
    write_skill(
        root.path(),
        "group/node_modules/pkg",
        &[("SKILL.md", &skill_md("pkg", "x", ""))],
    );
    write_skill(
        root.path(),
        "visible",
        &[("SKILL.md", &skill_md("visible", "x", ""))],
    );
    let catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
    let names: Vec<_> = catalog.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["visible"]);
    assert!(catalog.skipped.is_empty());
}

#[test]
fn discover_does_not_load_plain_npm_packages_and_says_why() {
    let root = tempdir().unwrap();
    write_skill(
        root.path(),
        "lib",
        &[("package.json", r#"{ "name": "lib", "description": "d" }"#)],
    );
    // Deeper down (inside a group folder that holds a skill) it is not reported at all.
    write_skill(
        root.path(),
        "group/dep",
        &[("package.json", r#"{ "name": "dep" }"#)],
    );
    write_skill(
        root.path(),
        "group/real",
        &[("SKILL.md", &skill_md("real", "x", ""))],
    );
    let catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
    let names: Vec<_> = catalog.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["real"]);
    // A direct child of the root: listed as skipped, naming the field it lacks.
    assert_eq!(catalog.skipped.len(), 1, "{:#?}", catalog.skipped);
    assert_eq!(catalog.skipped[0].dir, root.path().join("lib"));
    assert!(catalog.skipped[0]
        .reason()
        .contains("package.json with an owliabot/skillbox field"));
}

#[cfg(unix)]
#[test]
fn discover_accepts_symlinked_skill_inside_root() {
    let root = tempdir().unwrap();
    // The real folder sits in a hidden store inside the root, so only the link finds it.
    let real = write_skill(
        root.path(),
        ".store/real",
        &[("SKILL.md", &skill_md("linked", "x", ""))],
    );
    let link = root.path().join("linked");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
    assert!(catalog.refused.is_empty(), "{:#?}", catalog.refused);
    let skill = catalog.get("linked").unwrap();
    assert_eq!(skill.dir, link);
    assert_eq!(skill.warnings, []);
}

#[cfg(unix)]
#[test]
fn discover_accepts_symlink_to_sibling_inside_root() {
    let root = tempdir().unwrap();
    write_skill(
        root.path(),
        "real",
        &[("SKILL.md", &skill_md("real", "x", ""))],
    );
    write_skill(
        root.path(),
        "group/inner",
        &[("SKILL.md", &skill_md("inner", "x", ""))],
    );
    std::os::unix::fs::symlink(root.path().join("group/inner"), root.path().join("link")).unwrap();
    let catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
    assert!(catalog.refused.is_empty(), "{:#?}", catalog.refused);
    // Reached twice (through the link and the real folder): the second is recorded as shadowed.
    assert!(catalog.get("inner").is_some() && catalog.get("real").is_some());
    assert_eq!(catalog.shadowed.len(), 1);
}

#[cfg(unix)]
#[test]
fn discover_refuses_symlinked_skill_outside_root() {
    let root = tempdir().unwrap();
    let outside = tempdir().unwrap();
    write_skill(
        outside.path(),
        "evil",
        &[("SKILL.md", &skill_md("evil", "x", ""))],
    );
    let link = root.path().join("evil");
    std::os::unix::fs::symlink(outside.path().join("evil"), &link).unwrap();
    let catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
    assert!(catalog.get("evil").is_none());
    assert_eq!(catalog.refused.len(), 1);
    assert_eq!(catalog.refused[0].dir, link);
    assert!(catalog.refused[0].reason.contains("leaves the skills root"));
}

#[cfg(unix)]
#[test]
fn discover_refuses_broken_symlink() {
    let root = tempdir().unwrap();
    std::os::unix::fs::symlink(root.path().join("gone"), root.path().join("dangling")).unwrap();
    let catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
    // A dangling link is not a directory: nothing to enter, nothing loaded.
    assert!(catalog.skills.is_empty());
}

#[cfg(unix)]
#[test]
fn discover_survives_symlink_loop() {
    let root = tempdir().unwrap();
    write_skill(
        root.path(),
        "group/s",
        &[("SKILL.md", &skill_md("s", "x", ""))],
    );
    std::os::unix::fs::symlink(root.path().join("group"), root.path().join("group/loop")).unwrap();
    let catalog = discover(&[root.path().to_path_buf()], opts(8, 100));
    assert!(catalog.get("s").is_some());
    assert!(catalog.refused.is_empty());
}

#[test]
fn discover_through_a_symlinked_root() {
    let real = tempdir().unwrap();
    write_skill(real.path(), "a", &[("SKILL.md", &skill_md("a", "x", ""))]);
    let holder = tempdir().unwrap();
    let root = holder.path().join("root");
    #[cfg(unix)]
    std::os::unix::fs::symlink(real.path(), &root).unwrap();
    #[cfg(not(unix))]
    let root = real.path().to_path_buf();
    let catalog = discover(&[root], DiscoveryOptions::default());
    assert!(catalog.get("a").is_some());
}

#[test]
fn standard_roots_are_in_precedence_order() {
    let roots = standard_roots(
        std::path::Path::new("/w"),
        Some(std::path::Path::new("/h")),
        &[PathBuf::from("/extra")],
    );
    assert_eq!(
        roots,
        [
            PathBuf::from("/w/skills"),
            PathBuf::from("/w/.agents/skills"),
            PathBuf::from("/h/.agents/skills"),
            PathBuf::from("/extra"),
        ]
    );
    assert_eq!(
        standard_roots(std::path::Path::new("/w"), None, &[]).len(),
        2
    );
}

#[test]
fn discover_lists_a_folder_without_a_manifest_as_skipped_with_the_reason() {
    let root = tempdir().unwrap();
    // A Ruby skill: files, but none of the three manifests.
    let ruby = write_skill(
        root.path(),
        "weather-rb",
        &[("skill.rb", "puts 'hi'\n"), ("README.md", "# weather\n")],
    );
    // A real skill with a scripts/ folder of its own: the inner folder is not a skill.
    write_skill(
        root.path(),
        "echo",
        &[
            ("SKILL.md", &skill_md("echo", "x", "")),
            ("scripts/run.py", "print(1)\n"),
        ],
    );
    // A group folder with a README and a skill below: the group is not a skipped skill.
    write_skill(
        root.path(),
        "group",
        &[
            ("README.md", "# group\n"),
            ("inner/SKILL.md", &skill_md("inner", "x", "")),
        ],
    );
    // An empty folder and one holding only hidden files are not skills either.
    std::fs::create_dir_all(root.path().join("empty")).unwrap();
    write_skill(root.path(), "dotfiles", &[(".keep", "")]);

    let catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
    let names: Vec<&str> = catalog.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["echo", "inner"]);
    assert_eq!(catalog.skipped.len(), 1, "{:#?}", catalog.skipped);
    assert_eq!(catalog.skipped[0].dir, ruby);
    let reason = catalog.skipped[0].reason();
    assert!(
        reason.contains(&ruby.display().to_string())
            && reason.ends_with(
                ": no SKILL.md, skill.yaml or package.json with an owliabot/skillbox field"
            ),
        "{reason}"
    );
}
