use super::*;
use std::os::unix::fs::symlink;

struct Fixture {
    _root: tempfile::TempDir,
    outside: PathBuf,
    proxy: ReadFileProxy,
    workspace: PathBuf,
}

/// The core's files in the fixture's state folder and config, each holding [`SECRET`].
const STATE_FILES: [&str; 7] = [
    ".skillbox/api-token",
    ".skillbox/secrets.env",
    ".skillbox/pki/skillbox-core.key",
    ".skillbox/pki/skillbox-executor.key",
    ".skillbox/ca/root.key",
    ".skillbox/skillbox.db",
    "skillbox.toml",
];

/// What every file of [`STATE_FILES`] holds; no refusal may carry it.
const SECRET: &str = "the-core-secret";

/// `<root>/ws` is the workspace with `notes/a.md`, `notes/sub/b.md`, `secret.txt` and
/// the core's [`STATE_FILES`]; `<root>/outside.txt` is outside it.
fn fixture(max_bytes: u64) -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    std::fs::create_dir_all(ws.join("notes/sub")).unwrap();
    std::fs::write(ws.join("notes/a.md"), "hello").unwrap();
    std::fs::write(ws.join("notes/sub/b.md"), "deep").unwrap();
    std::fs::write(ws.join("secret.txt"), "secret").unwrap();
    for file in STATE_FILES {
        let path = ws.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, SECRET).unwrap();
    }
    let outside = root.path().join("outside.txt");
    std::fs::write(&outside, "outside").unwrap();
    Fixture {
        proxy: ReadFileProxy::new(ws.clone(), max_bytes),
        workspace: ws,
        outside,
        _root: root,
    }
}

fn globs(g: &[&str]) -> Vec<String> {
    g.iter().map(|s| s.to_string()).collect()
}

fn read(f: &Fixture, g: &[&str], path: &str) -> Result<ReadFileResult, ProxyError> {
    f.proxy.read(
        &globs(g),
        &ReadFileParams {
            path: path.to_string(),
        },
    )
}

fn denied(r: Result<ReadFileResult, ProxyError>) -> String {
    match r {
        Err(ProxyError::PermissionDenied { reason, .. }) => reason,
        other => panic!("expected a permission refusal, got {other:?}"),
    }
}

fn invalid(r: Result<ReadFileResult, ProxyError>) -> String {
    match r {
        Err(ProxyError::InvalidParams { reason, .. }) => reason,
        other => panic!("expected an invalid-params refusal, got {other:?}"),
    }
}

#[test]
fn readfile_reads_declared_file() {
    let f = fixture(DEFAULT_MAX_BYTES);
    assert_eq!(
        read(&f, &["notes/**"], "notes/a.md").unwrap().content,
        "hello"
    );
    assert_eq!(
        read(&f, &["notes/**"], "./notes//sub/b.md")
            .unwrap()
            .content,
        "deep"
    );
    assert_eq!(
        read(&f, &["notes/*"], "notes/a.md").unwrap().content,
        "hello"
    );
}

#[test]
fn readfile_refuses_dotdot() {
    let f = fixture(DEFAULT_MAX_BYTES);
    for path in ["../outside.txt", "notes/../secret.txt", "notes/.."] {
        let reason = denied(read(&f, &["**"], path));
        assert!(reason.contains("\"..\""), "{path}: {reason}");
    }
}

#[test]
fn readfile_refuses_absolute_path() {
    let f = fixture(DEFAULT_MAX_BYTES);
    let abs = f.workspace.join("notes/a.md");
    for path in ["/etc/passwd", abs.to_str().unwrap()] {
        let reason = denied(read(&f, &["**"], path));
        assert!(reason.starts_with("absolute path"), "{path}: {reason}");
    }
}

#[test]
fn readfile_refuses_symlink_out_of_workspace() {
    let f = fixture(DEFAULT_MAX_BYTES);
    symlink(&f.outside, f.workspace.join("notes/abs-link")).unwrap();
    symlink("../../outside.txt", f.workspace.join("notes/rel-link")).unwrap();
    symlink("/etc", f.workspace.join("notes/etc")).unwrap();
    for path in ["notes/abs-link", "notes/rel-link", "notes/etc/passwd"] {
        let reason = denied(read(&f, &["notes/**"], path));
        assert!(
            reason.contains("leads outside the workspace"),
            "{path}: {reason}"
        );
    }
}

#[test]
fn readfile_follows_symlink_inside_workspace() {
    let f = fixture(DEFAULT_MAX_BYTES);
    symlink("sub/b.md", f.workspace.join("notes/inside")).unwrap();
    assert_eq!(
        read(&f, &["notes/**"], "notes/inside").unwrap().content,
        "deep"
    );
}

#[test]
fn readfile_refuses_magic_link() {
    let f = fixture(DEFAULT_MAX_BYTES);
    symlink("/proc/self/root", f.workspace.join("notes/root")).unwrap();
    let reason = denied(read(&f, &["notes/**"], "notes/root/etc/passwd"));
    assert!(
        reason.contains("outside the workspace") || reason.contains("magic link"),
        "{reason}"
    );
}

#[test]
fn readfile_refuses_undeclared_glob() {
    let f = fixture(DEFAULT_MAX_BYTES);
    let reason = denied(read(&f, &["notes/**"], "secret.txt"));
    assert!(
        reason.contains("not covered by the skill's permissions.workspace.read"),
        "{reason}"
    );
    // `*` does not cross a directory separator.
    let reason = denied(read(&f, &["notes/*"], "notes/sub/b.md"));
    assert!(reason.contains("not covered"), "{reason}");
    let reason = denied(read(&f, &[], "notes/a.md"));
    assert!(
        reason.contains("declares no permissions.workspace.read"),
        "{reason}"
    );
}

#[test]
fn readfile_refuses_directory() {
    let f = fixture(DEFAULT_MAX_BYTES);
    let reason = invalid(read(&f, &["notes/**"], "notes/sub"));
    assert!(reason.contains("is a directory"), "{reason}");
    let reason = invalid(read(&f, &["**"], "."));
    assert!(reason.contains("the workspace itself"), "{reason}");
}

#[test]
fn readfile_refuses_fifo_without_blocking() {
    let f = fixture(DEFAULT_MAX_BYTES);
    nix::unistd::mkfifo(
        &f.workspace.join("notes/pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let reason = invalid(read(&f, &["notes/**"], "notes/pipe"));
    assert!(reason.contains("named pipe"), "{reason}");
}

#[test]
fn readfile_refuses_oversize_file() {
    let f = fixture(4);
    let err = read(&f, &["notes/**"], "notes/a.md").unwrap_err();
    assert!(
        matches!(
            err,
            ProxyError::TooLarge {
                what: "file",
                limit: 4,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        read(&f, &["notes/**"], "notes/sub/b.md").unwrap().content,
        "deep"
    );
}

#[test]
fn readfile_refuses_binary_file() {
    let f = fixture(DEFAULT_MAX_BYTES);
    std::fs::write(f.workspace.join("notes/bin"), [0x7f, b'E', 0xff, 0xfe]).unwrap();
    let reason = invalid(read(&f, &["notes/**"], "notes/bin"));
    assert!(reason.contains("not UTF-8 text"), "{reason}");
}

#[test]
fn readfile_refuses_empty_and_nul_paths() {
    let f = fixture(DEFAULT_MAX_BYTES);
    assert!(invalid(read(&f, &["**"], "")).contains("empty"));
    assert!(invalid(read(&f, &["**"], "notes/a.md\0x")).contains("NUL"));
}

#[test]
fn readfile_reports_missing_file() {
    let f = fixture(DEFAULT_MAX_BYTES);
    let err = read(&f, &["notes/**"], "notes/none.md").unwrap_err();
    assert!(
        matches!(err, ProxyError::NotFound { ref path } if path == "notes/none.md"),
        "{err:?}"
    );
}

/// The reason of a refusal to read one of the core's files, checked to name the rule and
/// to carry none of the file's content.
fn refused_state(r: Result<ReadFileResult, ProxyError>, what: &str) -> String {
    let reason = denied(r);
    assert!(reason.contains(what), "{what:?} not in {reason:?}");
    assert!(reason.contains("never readable by skills"), "{reason:?}");
    assert!(!reason.contains(SECRET), "{reason:?}");
    reason
}

#[test]
fn readfile_refuses_every_state_file_to_a_read_everything_glob() {
    let f = fixture(DEFAULT_MAX_BYTES);
    let greedy: [&[&str]; 4] = [
        &["**"],
        &["**/*"],
        &["*", "*/**"],
        &[".skillbox/**", "skillbox.toml"],
    ];
    for g in greedy {
        for file in STATE_FILES {
            let what = if file == "skillbox.toml" {
                "the core's configuration"
            } else {
                "the core's state folder"
            };
            refused_state(read(&f, g, file), what);
        }
    }
    // The same globs still read ordinary workspace files.
    assert_eq!(read(&f, &["**"], "notes/a.md").unwrap().content, "hello");
    assert_eq!(read(&f, &["**"], "secret.txt").unwrap().content, "secret");
}

#[test]
fn readfile_refuses_state_folder_spelled_otherwise() {
    let f = fixture(DEFAULT_MAX_BYTES);
    for path in [
        "./.skillbox/api-token",
        ".//.skillbox//api-token",
        ".skillbox/./pki/skillbox-core.key",
        ".SKILLBOX/api-token",
        ".SkillBox/secrets.env",
        ".skillbox",
        ".skillbox/",
    ] {
        refused_state(read(&f, &["**"], path), "the core's state folder");
    }
    for path in ["./skillbox.toml", "SKILLBOX.TOML", "Skillbox.Toml"] {
        refused_state(read(&f, &["**"], path), "the core's configuration");
    }
}

#[test]
fn readfile_reads_lookalike_names_outside_the_state_folder() {
    let f = fixture(DEFAULT_MAX_BYTES);
    std::fs::create_dir_all(f.workspace.join("notes/.skillbox")).unwrap();
    std::fs::write(f.workspace.join("notes/.skillbox/x"), "nested").unwrap();
    std::fs::write(f.workspace.join("notes/skillbox.toml"), "mine").unwrap();
    std::fs::write(f.workspace.join(".skillbox-notes"), "near").unwrap();
    assert_eq!(
        read(&f, &["**"], "notes/.skillbox/x").unwrap().content,
        "nested"
    );
    assert_eq!(
        read(&f, &["**"], "notes/skillbox.toml").unwrap().content,
        "mine"
    );
    assert_eq!(
        read(&f, &["**"], ".skillbox-notes").unwrap().content,
        "near"
    );
}

#[test]
fn readfile_refuses_relative_symlink_into_state_folder() {
    let f = fixture(DEFAULT_MAX_BYTES);
    symlink("../.skillbox/api-token", f.workspace.join("notes/tok")).unwrap();
    symlink("../.skillbox", f.workspace.join("notes/state")).unwrap();
    symlink(
        "../../.skillbox/pki/skillbox-core.key",
        f.workspace.join("notes/sub/key"),
    )
    .unwrap();
    // A skill's own folder, its glob as narrow as it gets.
    std::fs::create_dir_all(f.workspace.join("skills/x/data")).unwrap();
    symlink(
        "../../../.skillbox/api-token",
        f.workspace.join("skills/x/data/tok"),
    )
    .unwrap();
    for (g, path, resolved) in [
        ("notes/**", "notes/tok", ".skillbox/api-token"),
        (
            "notes/**",
            "notes/state/secrets.env",
            ".skillbox/secrets.env",
        ),
        (
            "notes/**",
            "notes/sub/key",
            ".skillbox/pki/skillbox-core.key",
        ),
        ("skills/x/**", "skills/x/data/tok", ".skillbox/api-token"),
        ("**", "notes/tok", ".skillbox/api-token"),
    ] {
        let reason = refused_state(read(&f, &[g], path), "the core's state folder");
        assert!(
            reason.contains(&format!("{path:?} resolves to {resolved:?}")),
            "{path}: {reason}"
        );
    }
}

#[test]
fn readfile_refuses_relative_symlink_to_config() {
    let f = fixture(DEFAULT_MAX_BYTES);
    symlink("../skillbox.toml", f.workspace.join("notes/cfg")).unwrap();
    let reason = refused_state(
        read(&f, &["notes/**"], "notes/cfg"),
        "the core's configuration",
    );
    assert!(reason.contains("resolves to \"skillbox.toml\""), "{reason}");
}

#[test]
fn readfile_refuses_absolute_symlink_into_state_folder() {
    let f = fixture(DEFAULT_MAX_BYTES);
    symlink(
        f.workspace.join(".skillbox/api-token"),
        f.workspace.join("notes/tok"),
    )
    .unwrap();
    symlink(
        f.workspace.join(".skillbox"),
        f.workspace.join("notes/state"),
    )
    .unwrap();
    symlink(
        f.workspace.join("skillbox.toml"),
        f.workspace.join("notes/cfg"),
    )
    .unwrap();
    for path in ["notes/tok", "notes/state/api-token", "notes/cfg"] {
        // The kernel refuses every absolute symlink under RESOLVE_BENEATH.
        let reason = denied(read(&f, &["**"], path));
        assert!(
            reason.contains("leads outside the workspace"),
            "{path}: {reason}"
        );
        assert!(!reason.contains(SECRET), "{reason}");
    }
}

#[test]
fn readfile_refuses_symlink_from_declared_name_to_undeclared_file() {
    let f = fixture(DEFAULT_MAX_BYTES);
    symlink("../secret.txt", f.workspace.join("notes/innocent.md")).unwrap();
    symlink("..", f.workspace.join("notes/up")).unwrap();
    for (path, resolved) in [
        ("notes/innocent.md", "secret.txt"),
        ("notes/up/secret.txt", "secret.txt"),
    ] {
        let reason = denied(read(&f, &["notes/**"], path));
        assert!(
            reason.contains(&format!(
                "{path:?} resolves to {resolved:?}, which is not covered by the skill's \
                 permissions.workspace.read"
            )),
            "{path}: {reason}"
        );
        assert!(!reason.contains("secret\""), "{reason}");
    }
}

#[test]
fn readfile_refuses_hard_link_to_api_token() {
    let f = fixture(DEFAULT_MAX_BYTES);
    std::fs::hard_link(
        f.workspace.join(".skillbox/api-token"),
        f.workspace.join("notes/todo.md"),
    )
    .unwrap();
    let reason = refused_state(read(&f, &["notes/**"], "notes/todo.md"), "hard link");
    assert!(
        reason.contains("\"notes/todo.md\" is the same file as \".skillbox/api-token\""),
        "{reason}"
    );
}

#[test]
fn readfile_refuses_hard_link_to_config() {
    let f = fixture(DEFAULT_MAX_BYTES);
    std::fs::hard_link(
        f.workspace.join("skillbox.toml"),
        f.workspace.join("notes/cfg.md"),
    )
    .unwrap();
    let reason = refused_state(read(&f, &["notes/**"], "notes/cfg.md"), "hard link");
    assert!(
        reason.contains("same file as \"skillbox.toml\""),
        "{reason}"
    );
}

#[test]
fn readfile_refuses_hard_link_to_nested_state_files() {
    let f = fixture(DEFAULT_MAX_BYTES);
    for (i, file) in STATE_FILES.iter().enumerate() {
        let link = f.workspace.join(format!("notes/sub/l{i}"));
        std::fs::hard_link(f.workspace.join(file), &link).unwrap();
        // A symlink to the hard link: both ways in at once.
        symlink(format!("sub/l{i}"), f.workspace.join(format!("notes/s{i}"))).unwrap();
        let name = format!("same file as {file:?}");
        refused_state(read(&f, &["**"], &format!("notes/sub/l{i}")), &name);
        refused_state(read(&f, &["**"], &format!("notes/s{i}")), &name);
    }
}
