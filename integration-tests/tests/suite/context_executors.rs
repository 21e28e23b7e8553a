//! A context's files with two executors (`skillbox serve`, `[executor] url` and `urls`,
//! each executor on a scratch root of its own; the core spreads calls round robin): every
//! executor keeps what it laid out, so the test asks both, telling them apart by the
//! scratch root in the command's working folder. A file the bot changed between calls is
//! seen changed by the next command on either executor, never the copy one of them kept;
//! a file the bot removed is gone on both.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::json;

use crate::harness::{binary, free_port, poll, Options, Skillbox, POLL_TIMEOUT};

/// An executor the test started, stopped with it.
struct OwnExecutor(Child);

impl Drop for OwnExecutor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_executor(sb: &Skillbox, port: u16, scratch: &Path) -> OwnExecutor {
    std::fs::create_dir_all(scratch).unwrap();
    let child = Command::new(binary("skillbox-executor"))
        .arg("serve")
        .arg("--skills")
        .arg(sb.ws.join("skills"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--pki")
        .arg(sb.pki())
        .arg("--core-url")
        .arg(format!("https://{}", sb.callback_addr.clone().unwrap()))
        .arg("--scratch-root")
        .arg(scratch)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start skillbox-executor");
    OwnExecutor(child)
}

#[test]
fn a_changed_or_removed_file_is_seen_by_the_next_command_on_either_executor() {
    let (a, b) = (free_port(), free_port());
    let mut sb = Skillbox::spawn(Options {
        executor_url: Some(format!("https://127.0.0.1:{a}")),
        executor_toml: format!("urls = [\"https://127.0.0.1:{b}\"]\n"),
        fixed_callback_port: true,
        ..Options::default()
    });
    let pki = sb.pki();
    poll("the core's channel PKI", POLL_TIMEOUT, || {
        pki.join("ca.pem").exists().then_some(())
    });
    let roots = [
        sb.root.path().join("scratch-a"),
        sb.root.path().join("scratch-b"),
    ];
    let _executors = [
        start_executor(&sb, a, &roots[0]),
        start_executor(&sb, b, &roots[1]),
    ];
    sb.wait_ready();
    let put = |text: &str| {
        let r = sb.request("PUT", "/v1/contexts/two-1/files/f.txt", Some(&json!(text)));
        assert!(r.status == 201 || r.status == 200, "{}", r.body);
    };
    // What each executor's command saw, by scratch root: `pwd`, then `f.txt` or `gone`.
    let ask = |rounds: usize| -> BTreeMap<usize, Vec<String>> {
        let mut seen: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for _ in 0..rounds {
            let r = sb
                .request(
                    "POST",
                    "/v1/tools/call",
                    Some(&json!({"tool": "exec_command", "context_id": "two-1",
                                 "args": {"cmd": "pwd; cat f.txt 2>/dev/null || echo gone",
                                          "yield_ms": 10000}})),
                )
                .json();
            assert_eq!(r["data"]["exit_code"], 0, "{r}");
            let out = r["data"]["output"].as_str().unwrap_or_default().to_string();
            let (dir, text) = out.split_once('\n').unwrap_or((&out, ""));
            let which = (roots.iter())
                .position(|root| Path::new(dir).starts_with(root))
                .unwrap_or_else(|| panic!("{dir} is under neither scratch root"));
            seen.entry(which).or_default().push(text.trim().to_string());
        }
        seen
    };
    put("v1");
    // Until the second executor is healthy too, the first serves every call.
    let first = poll("both executors serving", POLL_TIMEOUT, || {
        let seen = ask(2);
        (seen.len() == 2).then_some(seen)
    });
    assert!(first.values().flatten().all(|t| t == "\"v1\""), "{first:?}");
    put("v2");
    let second = ask(4);
    assert_eq!(second.len(), 2, "{second:?}");
    assert!(
        second.values().flatten().all(|t| t == "\"v2\""),
        "a kept copy was served stale: {second:?}"
    );
    let r = sb.request("DELETE", "/v1/contexts/two-1/files/f.txt", None);
    assert!(r.status < 300, "{}", r.body);
    let third = ask(4);
    assert_eq!(third.len(), 2, "{third:?}");
    assert!(
        third.values().flatten().all(|t| t == "gone"),
        "a removed file was still there: {third:?}"
    );
}

/// The core names a context's unchanged list of files by its digest alone once an
/// executor got it whole; an executor restarted since holds no list, refuses the command
/// for it, and the core sends it again whole: the command runs once, over the files.
#[test]
fn a_restarted_executor_gets_the_list_it_no_longer_holds_whole_again() {
    let port = free_port();
    let mut sb = Skillbox::spawn(Options {
        executor_url: Some(format!("https://127.0.0.1:{port}")),
        fixed_callback_port: true,
        ..Options::default()
    });
    let pki = sb.pki();
    poll("the core's channel PKI", POLL_TIMEOUT, || {
        pki.join("ca.pem").exists().then_some(())
    });
    let scratch = sb.root.path().join("scratch");
    let executor = start_executor(&sb, port, &scratch);
    sb.wait_ready();
    let r = sb.request("PUT", "/v1/contexts/kept-1/files/f.txt", Some(&json!("v1")));
    assert!(r.status == 201 || r.status == 200, "{}", r.body);
    // Appends a line to a log the command leaves, so each run shows once.
    let run = || {
        sb.request(
            "POST",
            "/v1/tools/call",
            Some(&json!({"tool": "exec_command", "context_id": "kept-1",
                         "args": {"cmd": "cat f.txt; echo ran >> runs.log", "yield_ms": 10000}})),
        )
        .json()
    };
    let output = |r: &serde_json::Value| r["data"]["output"].as_str().map(|o| o.trim().to_string());
    for _ in 0..3 {
        let r = run();
        assert_eq!(output(&r).as_deref(), Some("\"v1\""), "{r}");
    }
    drop(executor);
    let _executor = start_executor(&sb, port, &scratch);
    let r = poll("a command on the restarted executor", POLL_TIMEOUT, || {
        let r = run();
        (r["success"] == true).then_some(r)
    });
    assert_eq!(output(&r).as_deref(), Some("\"v1\""), "{r}");
    let log = sb.request("GET", "/v1/contexts/kept-1/files/runs.log", None);
    assert_eq!(log.status, 200, "{}", log.body);
    assert_eq!(
        log.body.lines().count(),
        4,
        "each command ran once: {}",
        log.body
    );
}
