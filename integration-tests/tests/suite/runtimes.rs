//! Real programs under `skillbox up` (docs/sandbox.md, "Memory" and "Loopback inside the
//! call"): a Node script runs from `run_skill_script` and Node and the JVM start in an
//! `exec_command` session under a skill's default 256 MiB; a Node script allocating past
//! it is `resource_limit` naming the limit and how to raise it; a web server the skill's
//! command starts is reached by its own client over `localhost`, and not from the host.
//! A runtime the machine lacks is reported SKIPPED by name.

use std::path::Path;

use serde_json::{json, Value};

use crate::harness::skills::{open_up, write};
use crate::harness::{Options, Skillbox};

/// A skill shaped like the published document and web-app skills: scripts, no tools, and
/// a loopback of its own for the server its commands start.
fn runtime_skill(ws: &Path) {
    let dir = ws.join("skills/webbuilder");
    write(
        &dir.join("skill.yaml"),
        "name: webbuilder\ndescription: Builds documents with Node and checks a web app it serves\n\
         execution: { loopback: true }\ntools: []\n",
    );
    write(
        &dir.join("scripts/hello.js"),
        "console.log('hello from node ' + process.version)\n",
    );
    write(
        &dir.join("scripts/hog.js"),
        "const kept = [];\nfor (;;) kept.push(Buffer.alloc(1 << 20, 1));\n",
    );
    write(
        &dir.join("scripts/write.py"),
        "import os\n\
         with open(os.path.join(os.environ['HOME'], 'media.bin'), 'wb') as f:\n\
         \x20   for _ in range(int(os.environ.get('MIB', '9'))):\n\
         \x20       f.write(b'\\0' * (1 << 20))\n\
         print('written')\n",
    );
    write(
        &dir.join("scripts/check.py"),
        "import sys, time, urllib.request\n\
         url = 'http://localhost:%s/index.html' % sys.argv[1]\n\
         for _ in range(100):\n\
         \x20   try:\n\
         \x20       print(urllib.request.urlopen(url, timeout=5).read().decode())\n\
         \x20       break\n\
         \x20   except OSError:\n\
         \x20       time.sleep(0.05)\n",
    );
    open_up(&dir);
}

fn have(program: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()));
    if !found {
        eprintln!("SKIPPED {program}: not installed on this machine");
    }
    found
}

/// `POST /v1/tools/call` of `tool` in a context, as the operator.
fn call_in(sb: &Skillbox, tool: &str, args: Value) -> Value {
    sb.request(
        "POST",
        "/v1/tools/call",
        Some(&json!({"tool": tool, "args": args, "context_id": "runtimes"})),
    )
    .json()
}

fn exec(sb: &Skillbox, cmd: &str) -> Value {
    call_in(
        sb,
        "exec_command",
        json!({"cmd": cmd, "skill": "webbuilder", "yield_ms": 30000}),
    )
}

#[test]
fn node_and_the_jvm_start_under_the_default_limit_and_a_node_hog_is_resource_limit() {
    if !have("node") {
        return;
    }
    let sb = Skillbox::start(Options {
        prepare: Some(runtime_skill),
        ..Options::default()
    });
    let run = |script: &str| {
        call_in(
            &sb,
            "run_skill_script",
            json!({"name": "webbuilder", "script": script}),
        )
    };
    let r = run("scripts/hello.js");
    assert_eq!(r["success"], true, "{r}\n{}", sb.logs());
    let stdout = r["data"]["stdout"].as_str().unwrap_or_default();
    assert!(stdout.contains("hello from node"), "{r}");
    let r = run("scripts/hog.js");
    assert_eq!(r["error_kind"], "resource_limit", "{r}");
    let error = r["error"].as_str().unwrap_or_default();
    assert!(error.contains("memory limit of 256 MiB"), "{error}");
    assert!(error.contains("raise execution.memory_mb"), "{error}");
    // Health says how the executor limits memory; under a cgroup the kernel's kill is
    // named, under rlimits Node's own words.
    let health = sb.request("GET", "/healthz", None).json();
    let mode = health["sandbox"]["sandbox"]["memory_limit"].clone();
    match mode.as_str() {
        Some("cgroup_v2") | Some("cgroup_v1") => {
            assert!(error.contains("the kernel killed a process"), "{error}")
        }
        Some("rlimit") => {}
        _ => panic!("health names no memory limit mode: {health}"),
    }
    // And that the folders kept between a context's calls are watched (inotify works
    // in the executor, under its own seccomp policy).
    assert_eq!(
        health["sandbox"]["sandbox"]["watched_folders"], true,
        "{health}"
    );
    let mut cmd = "node -e 'console.log(6*7)'".to_string();
    if have("java") {
        cmd.push_str(" && java -version 2>&1");
    }
    let r = exec(&sb, &cmd);
    assert_eq!(r["data"]["exit_code"], 0, "{r}");
    let output = r["data"]["output"].as_str().unwrap_or_default();
    assert!(output.contains("42"), "{r}");
    if have("java") {
        assert!(output.contains("version"), "{r}");
    }
}

#[test]
fn a_server_the_skill_starts_answers_its_own_client_on_localhost_and_not_the_host() {
    let sb = Skillbox::start(Options {
        prepare: Some(runtime_skill),
        ..Options::default()
    });
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cmd = format!(
        "cd \"$HOME\" && echo 'the app under test' > index.html && \
         (python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 &) && \
         python3 \"$SKILLBOX_SKILL_DIR/scripts/check.py\" {port} && sleep 1"
    );
    let knock = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(700));
        std::net::TcpStream::connect(("127.0.0.1", port))
    });
    let r = exec(&sb, &cmd);
    assert_eq!(r["data"]["exit_code"], 0, "{r}");
    let output = r["data"]["output"].as_str().unwrap_or_default();
    assert!(output.contains("the app under test"), "{r}");
    let from_host = knock.join().unwrap();
    let refused = from_host.expect_err("the host reached the call's server");
    assert_eq!(
        refused.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "{refused}"
    );
}

/// The operator's `[grants.<skill>] max_file_mb` replaces the skill's 1024 MiB: a script
/// writing 9 MiB under a grant of 8 is stopped, named as the file-size limit and how to
/// raise it; without the grant the same script writes its file.
#[test]
fn an_operators_max_file_mb_grant_replaces_the_skills_limit() {
    let granted = Skillbox::start(Options {
        prepare: Some(runtime_skill),
        extra_toml: "[grants.webbuilder]\nmax_file_mb = 8\n".into(),
        ..Options::default()
    });
    let args = json!({"name": "webbuilder", "script": "scripts/write.py"});
    let r = call_in(&granted, "run_skill_script", args.clone());
    assert_eq!(r["error_kind"], "resource_limit", "{r}");
    let error = r["error"].as_str().unwrap_or_default();
    assert!(error.contains("file size limit of 8 MiB"), "{error}");
    assert!(error.contains("[grants.<skill>] max_file_mb"), "{error}");
    drop(granted);
    let plain = Skillbox::start(Options {
        prepare: Some(runtime_skill),
        ..Options::default()
    });
    let r = call_in(&plain, "run_skill_script", args);
    assert_eq!(r["success"], true, "{r}");
}
