//! Contexts and progressive disclosure over small skill folders in a temporary root.

use std::path::Path;

use serde_json::json;
use skillbox_protocol::skill::{discover, DiscoveryOptions};

use super::disclosure::{self, DisclosureError};
use super::*;
use skillbox_protocol::Target;

/// Writes a skill: SKILL.md with `extra` frontmatter, and a skill.yaml declaring `tools`
/// (each runs `scripts/<tool>.py`).
fn write_skill(root: &Path, name: &str, extra: &str, tools: &[&str]) {
    let d = root.join(name);
    std::fs::create_dir_all(d.join("scripts")).unwrap();
    std::fs::write(
        d.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: The {name} skill.\n{extra}---\n# {name} body\n"),
    )
    .unwrap();
    if !tools.is_empty() {
        let mut yaml = format!("name: {name}\ndescription: The {name} skill.\ntools:\n");
        for t in tools {
            yaml.push_str(&format!(
                "  - name: {t}\n    description: {t}\n    command: [\"python3\", \"scripts/{t}.py\"]\n"
            ));
            std::fs::write(d.join(format!("scripts/{t}.py")), "print(1)\n").unwrap();
        }
        std::fs::write(d.join("skill.yaml"), yaml).unwrap();
    }
}

fn load(root: &Path) -> Catalog {
    let c = discover(&[root.to_path_buf()], DiscoveryOptions::default());
    assert!(c.skipped.is_empty(), "{:?}", c.skipped);
    c
}

fn fixture() -> (tempfile::TempDir, Catalog) {
    let dir = tempfile::tempdir().unwrap();
    write_skill(
        dir.path(),
        "notes",
        "allowed-tools: [search, \"mail:send\", \"Bash(git:*)\", \"ghost:tool\"]\n",
        &["search", "edit"],
    );
    write_skill(dir.path(), "mail", "", &["send", "read"]);
    write_skill(dir.path(), "guide", "", &[]);
    let c = load(dir.path());
    (dir, c)
}

fn t(name: &str) -> Target {
    Target::parse(name).unwrap()
}

fn store(dir: &Path) -> Store {
    Store::open(&Store::db_path(dir)).unwrap()
}

#[test]
fn active_tools_union_of_allowed_and_base_intersected_with_existing() {
    let (_dir, c) = fixture();
    let notes = c.get("notes").unwrap();
    let mail = c.get("mail").unwrap();
    let active = active_tools(&c, &[notes]).unwrap();
    let names: Vec<String> = active.iter().map(Target::to_string).collect();
    assert_eq!(
        names,
        [
            "mail:send",
            "notes:search",
            "load_skill",
            "run_skill",
            "run_skill_script",
            "exec_command",
            "write_stdin",
            "close_context"
        ]
    );
    // A pinned skill without allowed-tools adds its own tools.
    let active = active_tools(&c, &[notes, mail]).unwrap();
    assert!(active.contains(&t("mail:read")), "{active:?}");
    assert!(!active.contains(&t("notes:edit")), "{active:?}");
    // Without any allowed-tools, no restriction.
    assert!(active_tools(&c, &[mail]).is_none());
    assert!(active_tools(&c, &[]).is_none());
}

#[test]
fn view_builds_prompt_and_refuses_tools_outside_the_context() {
    let (dir, c) = fixture();
    let state = tempfile::tempdir().unwrap();
    let s = store(state.path());
    pin(&s, &c, "chat-1", "notes").unwrap();
    let v = view(&s, &c, &|_| true, "chat-1", 6000).unwrap();
    assert!(v.tools.restricted);
    assert!(v.allows(&t("notes:search")));
    assert!(v.allows(&t("load_skill")));
    assert!(!v.allows(&t("notes:edit")));
    let refusal = v.tools.refusal(&t("notes:edit"));
    assert!(refusal.contains("notes:search"), "{refusal}");
    assert!(refusal.contains("not active"), "{refusal}");
    // Catalogue of every available skill, body of the pinned one only.
    assert!(v.prompt.contains("- mail: The mail skill."), "{}", v.prompt);
    assert!(v.prompt.contains("# notes body"), "{}", v.prompt);
    assert!(!v.prompt.contains("# mail body"), "{}", v.prompt);
    // An unavailable skill is left out of the catalogue.
    let v = view(&s, &c, &|s: &Skill| s.name != "mail", "chat-1", 6000).unwrap();
    assert!(!v.prompt.contains("- mail:"), "{}", v.prompt);
    // A context without pins restricts nothing.
    let v = view(&s, &c, &|_| true, "other", 6000).unwrap();
    assert!(!v.tools.restricted);
    assert!(v.allows(&t("notes:edit")));
    drop(dir);
}

#[test]
fn view_drops_and_reports_pins_of_removed_skills() {
    let (dir, c) = fixture();
    let state = tempfile::tempdir().unwrap();
    let s = store(state.path());
    pin(&s, &c, "chat-1", "guide").unwrap();
    pin(&s, &c, "chat-1", "mail").unwrap();
    std::fs::remove_dir_all(dir.path().join("guide")).unwrap();
    let c = load(dir.path());
    let v = view(&s, &c, &|_| true, "chat-1", 6000).unwrap();
    assert_eq!(v.tools.dropped, ["guide"]);
    assert_eq!(v.tools.pinned.len(), 1);
    let again = view(&s, &c, &|_| true, "chat-1", 6000).unwrap();
    assert!(again.tools.dropped.is_empty(), "the drop was written back");
}

#[test]
fn pin_refuses_unknown_skill_and_bad_context_id() {
    let (_dir, c) = fixture();
    let state = tempfile::tempdir().unwrap();
    let s = store(state.path());
    let e = pin(&s, &c, "chat-1", "nope").unwrap_err();
    assert_eq!(e.error_kind(), ErrorKind::NotFound);
    let e = pin(&s, &c, "../x", "notes").unwrap_err();
    assert_eq!(e.error_kind(), ErrorKind::InvalidArgs);
    assert!(unpin(&s, "chat-1", "notes").is_ok_and(|was| !was));
}

#[test]
fn read_file_serves_a_reference_inside_the_skill() {
    let (dir, c) = fixture();
    let refs = dir.path().join("guide/references");
    std::fs::create_dir_all(&refs).unwrap();
    std::fs::write(refs.join("api.md"), "# API\n").unwrap();
    let v = disclosure::file_response(c.get("guide").unwrap(), "references/api.md", dir.path())
        .unwrap();
    assert_eq!(v["content"], "# API\n");
}

#[test]
fn read_file_refuses_parent_traversal_and_absolute_paths() {
    let (_dir, c) = fixture();
    let g = c.get("guide").unwrap();
    for p in ["../notes/SKILL.md", "references/../../x", "/etc/passwd", ""] {
        let e = disclosure::read_file(g, p, Path::new("/nonexistent")).unwrap_err();
        assert!(matches!(e, DisclosureError::PathOutside { .. }), "{p}: {e}");
        assert_eq!(e.error_kind(), ErrorKind::PermissionDenied);
    }
}

#[cfg(unix)]
#[test]
fn read_file_refuses_symlink_out_of_the_skill() {
    let (dir, c) = fixture();
    let outside = dir.path().join("secret.txt");
    std::fs::write(&outside, "secret").unwrap();
    let g = dir.path().join("guide");
    std::os::unix::fs::symlink(&outside, g.join("leak.md")).unwrap();
    std::os::unix::fs::symlink(dir.path(), g.join("up")).unwrap();
    let guide = c.get("guide").unwrap();
    for p in ["leak.md", "up/secret.txt"] {
        let e = disclosure::read_file(guide, p, dir.path()).unwrap_err();
        assert!(matches!(e, DisclosureError::Symlink { .. }), "{p}: {e}");
    }
}

#[test]
fn read_file_refuses_files_over_the_cap() {
    let (dir, c) = fixture();
    let big = vec![b'a'; usize::try_from(disclosure::MAX_FILE_BYTES).unwrap() + 1];
    std::fs::write(dir.path().join("guide/big.txt"), big).unwrap();
    let e = disclosure::read_file(c.get("guide").unwrap(), "big.txt", dir.path()).unwrap_err();
    assert!(matches!(e, DisclosureError::TooLarge { .. }), "{e}");
}

#[test]
fn load_skill_returns_the_body_and_builtins_list_available_names() {
    let (_dir, c) = fixture();
    let v = disclosure::load_skill(&c, &json!({"name": "guide"})).unwrap();
    assert!(v["body"].as_str().unwrap().contains("# guide body"));
    let e = disclosure::load_skill(&c, &json!({"name": "nope"})).unwrap_err();
    assert_eq!(e.error_kind(), ErrorKind::NotFound);
    let tools = crate::contexts::builtins::listed(&["guide".into(), "mail".into()], false);
    assert_eq!(
        tools[0]["parameters"]["properties"]["name"]["enum"],
        json!(["guide", "mail"])
    );
    let names = |t: &[serde_json::Value]| -> Vec<String> {
        t.iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names(&tools),
        ["load_skill", "run_skill", "run_skill_script"]
    );
    let with_exec = crate::contexts::builtins::listed(&["guide".into()], true);
    assert_eq!(
        names(&with_exec),
        [
            "load_skill",
            "run_skill",
            "run_skill_script",
            "exec_command",
            "write_stdin",
            "close_context"
        ]
    );
}

#[test]
fn run_skill_script_runs_any_file_under_scripts_with_string_arguments() {
    let (dir, c) = fixture();
    std::fs::write(dir.path().join("mail/scripts/other.py"), "").unwrap();
    let s = disclosure::resolve_script(
        &c,
        &json!({"name": "mail", "script": "other.py", "args": ["in.pdf", 3, true]}),
    )
    .unwrap();
    assert_eq!(s.skill, "mail");
    assert_eq!(s.run.path, "scripts/other.py");
    assert_eq!(s.run.args, ["in.pdf", "3", "true"]);
    let e = disclosure::resolve_script(
        &c,
        &json!({"name": "mail", "script": "../notes/scripts/search.py"}),
    )
    .unwrap_err();
    assert!(matches!(e, DisclosureError::PathOutside { .. }), "{e}");
    let e =
        disclosure::resolve_script(&c, &json!({"name": "mail", "script": "nope.py"})).unwrap_err();
    assert!(matches!(e, DisclosureError::NoFile { .. }), "{e}");
    let e = disclosure::resolve_script(
        &c,
        &json!({"name": "mail", "script": "other.py", "args": {"to": "x"}}),
    )
    .unwrap_err();
    assert_eq!(e.error_kind(), ErrorKind::InvalidArgs, "{e}");
    assert!(e.to_string().contains("command-line arguments"), "{e}");
    let e = disclosure::resolve_script(
        &c,
        &json!({"name": "mail", "script": "other.py", "args": [{"a": 1}]}),
    )
    .unwrap_err();
    assert_eq!(e.error_kind(), ErrorKind::InvalidArgs, "{e}");
}

#[cfg(unix)]
#[test]
fn run_skill_script_refuses_a_link_under_scripts() {
    let (dir, c) = fixture();
    let outside = dir.path().join("outside.py");
    std::fs::write(&outside, "print(1)").unwrap();
    std::os::unix::fs::symlink(&outside, dir.path().join("mail/scripts/link.py")).unwrap();
    let e =
        disclosure::resolve_script(&c, &json!({"name": "mail", "script": "link.py"})).unwrap_err();
    assert!(matches!(e, DisclosureError::Symlink { .. }), "{e}");
}

#[test]
fn load_skill_points_base_dir_at_the_skill_folder_variable() {
    let (dir, _) = fixture();
    let md = dir.path().join("guide/SKILL.md");
    let text = std::fs::read_to_string(&md).unwrap();
    std::fs::write(
        &md,
        format!("{text}\nRun `python3 {{baseDir}}/scripts/x.py`.\n"),
    )
    .unwrap();
    let c = load(dir.path());
    let v = disclosure::load_skill(&c, &json!({"name": "guide"})).unwrap();
    let body = v["body"].as_str().unwrap();
    assert!(
        body.contains("python3 $SKILLBOX_SKILL_DIR/scripts/x.py"),
        "{body}"
    );
    assert!(!body.contains("{baseDir}"), "{body}");
    assert_eq!(v["base_dir"], "$SKILLBOX_SKILL_DIR");
}

#[test]
fn the_catalogue_keeps_always_skills_first_and_cuts_the_rest_to_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let long = "Does a great many things. ".repeat(20);
    for (name, extra) in [
        ("zeta", "always: true\n"),
        ("alpha", ""),
        ("beta", ""),
        ("gamma", ""),
    ] {
        let d = dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: {long}\n{extra}---\n"),
        )
        .unwrap();
    }
    let c = load(dir.path());
    let budget = CatalogueBudget {
        chars: 570,
        uses: [("gamma".to_string(), 9), ("beta".to_string(), 3)].into(),
    };
    let text = catalogue(&c, &|_| true, &budget);
    let lines: Vec<&str> = text.lines().collect();
    // The always skill first and whole, even past the budget; then by use.
    assert!(
        lines[0].starts_with("- zeta: ") && lines[0].len() > 500,
        "{text}"
    );
    assert!(
        lines[1].starts_with("- gamma: Does a great many things."),
        "{text}"
    );
    assert!(
        lines[1].len() < 60,
        "shortened to its first sentence: {text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("more skills are not listed")),
        "{text}"
    );
    // With room, every skill in full, by use after the always one.
    let roomy = CatalogueBudget {
        chars: 100_000,
        ..budget
    };
    let text = catalogue(&c, &|_| true, &roomy);
    let names: Vec<&str> = text
        .lines()
        .map(|l| l[2..].split(':').next().unwrap())
        .collect();
    assert_eq!(names, ["zeta", "gamma", "beta", "alpha"]);
}

/// A context that restricts nothing allows every tool through the set its load made once
/// (shared, not built per call); one whose pins restrict gets its own set.
#[test]
fn an_unrestricted_context_shares_its_loads_set_of_every_tool() {
    let (dir, c) = fixture();
    let s = store(dir.path());
    let every = Arc::new(all_tools(&c));
    let open = gate(&s, &c, &every, &crate::auth::Caller::Operator, "c1").unwrap();
    assert!(!open.restricted);
    assert!(Arc::ptr_eq(&open.active_tools, &every));
    assert!(open.allows(&t("mail:read")));
    pin(&s, &c, "c2", "notes").unwrap();
    let cut = gate(&s, &c, &every, &crate::auth::Caller::Operator, "c2").unwrap();
    assert!(cut.restricted);
    assert!(!Arc::ptr_eq(&cut.active_tools, &every));
    assert!(cut.allows(&t("mail:send")) && !cut.allows(&t("mail:read")));
}

/// The gate from reads alone judges as the blocking gate does, and answers only when
/// nothing must be written: a bot's first use (the claim) and a pin whose skill is gone
/// (the drop) go to the blocking gate; a context of another bot is refused at once.
#[test]
fn the_gate_at_once_judges_from_reads_and_leaves_every_write_to_the_blocking_gate() {
    let (dir, c) = fixture();
    let s = store(dir.path());
    let every = Arc::new(all_tools(&c));
    let bot = |name: &str| {
        crate::auth::Caller::Bot(Arc::new(crate::auth::Bot {
            name: name.into(),
            skills: None,
        }))
    };
    let (a, b) = (bot("bot-a"), bot("bot-b"));
    let at_once = |caller: &crate::auth::Caller, id: &str| {
        let conn = s.if_free().expect("nobody holds the connection");
        // In one read transaction, as the pipeline reads; it ends with the closure (the
        // writes below would fail inside a transaction left open).
        (conn.in_one_read(|conn| gate_at_once(conn, &c, &every, caller, id))).unwrap()
    };
    // A bot's first use claims the context: not from reads.
    assert!(at_once(&a, "c1").is_none());
    assert_eq!(s.context_owner("c1").unwrap(), None, "the read wrote");
    gate(&s, &c, &every, &a, "c1").unwrap();
    pin(&s, &c, "c1", "notes").unwrap();
    let read = at_once(&a, "c1").expect("owned, every pin exists").unwrap();
    assert_eq!(read, gate(&s, &c, &every, &a, "c1").unwrap());
    assert!(read.restricted && read.allows(&t("mail:send")) && !read.allows(&t("mail:read")));
    // Another bot is refused, as by the blocking gate; the operator enters.
    let refused = at_once(&b, "c1").expect("judged from reads").unwrap_err();
    assert!(
        matches!(refused, ContextError::NotYours { .. }),
        "{refused}"
    );
    assert!(at_once(&crate::auth::Caller::Operator, "c1")
        .unwrap()
        .is_ok());
    assert!(matches!(
        at_once(&a, "bad id!"),
        Some(Err(ContextError::InvalidId { .. }))
    ));
    // A pin whose skill is gone is dropped by the blocking gate only.
    s.pin_skill("c1", "ghost", unix_ms_now()).unwrap();
    assert!(at_once(&a, "c1").is_none());
    assert_eq!(gate(&s, &c, &every, &a, "c1").unwrap().dropped, ["ghost"]);
    assert!(at_once(&a, "c1").is_some());
    // A connection held elsewhere is not waited for.
    let held = s.if_free().unwrap();
    assert!(s.if_free().is_none());
    drop(held);
}
