//! A context's files under `skillbox up`: a bot uploads a file larger than the JSON body
//! limit with `skillbox files put`, lists it, downloads it byte for byte; another bot gets
//! nothing of it; the owner removes it.

use crate::harness::{Options, Skillbox};

#[test]
fn files_put_ls_get_rm_through_the_cli_for_the_bot_that_owns_the_context() {
    let sb = Skillbox::start(Options::default());
    let a = sb.bot_token("bot-a", &[]);
    let b = sb.bot_token("bot-b", &[]);
    let a_file = sb.ws.join("a.token");
    let b_file = sb.ws.join("b.token");
    std::fs::write(&a_file, &a).unwrap();
    std::fs::write(&b_file, &b).unwrap();
    // 3 MiB: three times the gateway's JSON body limit in the harness (1 MiB).
    let bytes: Vec<u8> = (0..=255u8).cycle().take(3 << 20).collect();
    let local = sb.ws.join("upload.bin");
    std::fs::write(&local, &bytes).unwrap();
    let tf = |f: &std::path::Path| f.to_str().unwrap().to_string();
    let run = |args: &[&str]| {
        let out = sb.cli(args);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, out, err) = run(&[
        "files",
        "put",
        "job-7",
        "in/upload.bin",
        local.to_str().unwrap(),
        "--token-file",
        &tf(&a_file),
    ]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("3145728 bytes"), "{out}");
    let (ok, out, err) = run(&[
        "files",
        "ls",
        "job-7",
        "--json",
        "--token-file",
        &tf(&a_file),
    ]);
    assert!(ok, "{err}");
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed[0]["path"], "in/upload.bin", "{listed}");
    let back = sb.ws.join("back.bin");
    let (ok, _, err) = run(&[
        "files",
        "get",
        "job-7",
        "in/upload.bin",
        back.to_str().unwrap(),
        "--token-file",
        &tf(&a_file),
    ]);
    assert!(ok, "{err}");
    assert_eq!(std::fs::read(&back).unwrap(), bytes);
    // Bot B: the context is not its own.
    let (ok, _, err) = run(&["files", "ls", "job-7", "--token-file", &tf(&b_file)]);
    assert!(!ok && err.contains("another caller"), "{err}");
    let (ok, _, err) = run(&[
        "files",
        "rm",
        "job-7",
        "in/upload.bin",
        "--token-file",
        &tf(&a_file),
    ]);
    assert!(ok, "{err}");
    let (ok, out, _) = run(&[
        "files",
        "ls",
        "job-7",
        "--json",
        "--token-file",
        &tf(&a_file),
    ]);
    assert!(ok);
    assert_eq!(out.trim(), "[]");
}

/// A name with a space (or any character a URI escapes) is the same file over REST, where
/// it arrives as `%20`, and through the CLI, which escapes it: stored, listed and read back
/// under its own name, never under the literal escape.
#[test]
fn percent_escaped_file_names_round_trip_through_rest_and_the_cli() {
    let sb = Skillbox::start(Options::default());
    let body = serde_json::json!("hello");
    let r = sb.request(
        "PUT",
        "/v1/contexts/esc-1/files/in/my%20file%231.txt",
        Some(&body),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["path"], "in/my file#1.txt", "{}", r.body);
    let listed = sb.request("GET", "/v1/contexts/esc-1/files", None).json();
    assert_eq!(listed["files"][0]["path"], "in/my file#1.txt", "{listed}");
    let token = sb.ws.join("operator.token");
    std::fs::write(&token, &sb.token).unwrap();
    let back = sb.ws.join("back.txt");
    let out = sb.cli(&[
        "files",
        "get",
        "esc-1",
        "in/my file#1.txt",
        back.to_str().unwrap(),
        "--token-file",
        token.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&back).unwrap(), "\"hello\"");
    let local = sb.ws.join("up.txt");
    std::fs::write(&local, "from the cli").unwrap();
    let out = sb.cli(&[
        "files",
        "put",
        "esc-1",
        "with space.txt",
        local.to_str().unwrap(),
        "--token-file",
        token.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = sb.request("GET", "/v1/contexts/esc-1/files/with%20space.txt", None);
    assert_eq!((r.status, r.body.as_str()), (200, "from the cli"));
    let r = sb.request("GET", "/v1/contexts/esc-1/files/bad%FF.txt", None);
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("not UTF-8"), "{}", r.body);
}

/// The executor keeps a context's folder between its calls (docs/sessions.md): a second
/// command finds the unchanged files in place (the same inodes: nothing laid out again),
/// and still sees every change the bot made in between, a file replaced or removed.
#[test]
fn a_contexts_next_command_finds_unchanged_files_in_place_and_the_bots_changes() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: not root, so calls have no users of their own and no folder is kept");
        return;
    }
    let sb = Skillbox::start(Options::default());
    let put = |path: &str, text: &str| {
        let r = sb.request(
            "PUT",
            &format!("/v1/contexts/kept-1/files/{path}"),
            Some(&serde_json::json!(text)),
        );
        assert!(r.status == 201 || r.status == 200, "{}", r.body);
    };
    let run = || {
        let cmd = "for f in *.txt; do echo \"$f $(stat -c %i \"$f\") $(cat \"$f\")\"; done";
        let r = sb
            .request(
                "POST",
                "/v1/tools/call",
                Some(
                    &serde_json::json!({"tool": "exec_command", "context_id": "kept-1",
                                         "args": {"cmd": cmd, "yield_ms": 10000}}),
                ),
            )
            .json();
        assert_eq!(r["data"]["exit_code"], 0, "{r}");
        r["data"]["output"].as_str().unwrap_or_default().to_string()
    };
    put("kept.txt", "one");
    put("changed.txt", "old");
    let first = run();
    // The first command's end keeps the folder off its critical path: give it a moment.
    let second = crate::harness::poll(
        "a command finding the files in place (the same inodes)",
        std::time::Duration::from_secs(10),
        || {
            let out = run();
            (out == first).then_some(out)
        },
    );
    assert_eq!(second, first);
    let inode = |out: &str, name: &str| {
        (out.lines().find(|l| l.starts_with(name)))
            .and_then(|l| l.split(' ').nth(1))
            .map(str::to_string)
    };
    put("changed.txt", "new");
    let third = run();
    assert_eq!(
        inode(&third, "kept.txt"),
        inode(&first, "kept.txt"),
        "{third}"
    );
    // (A JSON body is stored as its text, quotes and all.)
    assert!(third.contains("\"new\""), "{third}");
    let r = sb.request("DELETE", "/v1/contexts/kept-1/files/kept.txt", None);
    assert!(r.status < 300, "{}", r.body);
    let fourth = run();
    assert!(
        !fourth.contains("kept.txt"),
        "a removed file is gone: {fourth}"
    );
}

/// A large file of a context (3 MiB, past the stream's 1 MiB threshold) comes to the
/// executor over a file stream of the channel, as raw bytes: the command sees it whole,
/// by its SHA-256, and the core says it streamed it.
#[test]
fn a_large_context_file_comes_to_the_executor_over_a_file_stream() {
    let sb = Skillbox::start(Options {
        rust_log: Some("warn,skillbox_core::calls::file_stream=info"),
        ..Options::default()
    });
    let text: String = (0u32..400_000)
        .map(|i| format!("{:08x}", i.wrapping_mul(2_654_435_761)))
        .collect();
    let r = sb.request(
        "PUT",
        "/v1/contexts/streamed-1/files/big.txt",
        Some(&serde_json::json!(text)),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let sha = r.json()["sha256"].as_str().unwrap().to_string();
    let r = sb
        .request(
            "POST",
            "/v1/tools/call",
            Some(
                &serde_json::json!({"tool": "exec_command", "context_id": "streamed-1",
                                     "args": {"cmd": "sha256sum big.txt", "yield_ms": 10000}}),
            ),
        )
        .json();
    assert_eq!(r["data"]["exit_code"], 0, "{r}");
    let out = r["data"]["output"].as_str().unwrap_or_default();
    assert!(
        out.starts_with(&sha),
        "the command saw other bytes: {out} (want {sha})"
    );
    assert!(
        sb.logs().contains("context file streamed to the executor"),
        "the file did not come over a file stream:\n{}",
        sb.logs()
    );
}
