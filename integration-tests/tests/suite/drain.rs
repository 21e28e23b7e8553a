//! An executor told to stop (SIGTERM, as an orchestrator scaling down or rolling an update
//! sends it): it finishes the call it holds, refuses new ones as draining before running
//! anything, says `draining` in `health`, and exits; the core answers calls meanwhile with a
//! clean `unavailable` naming the drain.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use skillbox_channel::{CORE_IDENTITY, EXECUTOR_IDENTITY};
use skillbox_protocol::jsonrpc::code;

use crate::harness::tls::{rpc, ClientCert};
use crate::harness::{poll, Options, Skillbox, POLL_TIMEOUT, START_TIMEOUT};

/// One JSON-RPC request to the executor with the core's real certificate.
fn ask_executor(sb: &Skillbox, body: &Value) -> Result<Value, String> {
    let pki = sb.pki();
    let cert = ClientCert::from_files(
        &pki.join(format!("{CORE_IDENTITY}.pem")),
        &pki.join(format!("{CORE_IDENTITY}.key")),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = runtime.block_on(rpc(
        &sb.executor_addr(),
        EXECUTOR_IDENTITY,
        &pki.join("ca.pem"),
        Some(cert),
        &body.to_string(),
    ))?;
    // The raw HTTP answer: the JSON-RPC body follows the blank line.
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).map_err(|e| format!("{e}: {answer}"))
}

#[test]
fn executor_on_sigterm_finishes_its_call_refuses_new_ones_as_draining_and_exits() {
    let sb = Skillbox::start(Options::default());
    let old = poll("the executor child", POLL_TIMEOUT, || sb.executor_pid());
    let held = sb.call_in_background("slow:sleep", json!({"seconds": 4}));
    poll("the slow call in flight", POLL_TIMEOUT, || {
        (sb.health()["sandbox"]["in_flight"].as_u64() >= Some(1)).then_some(())
    });
    kill(Pid::from_raw(i32::try_from(old).unwrap()), Signal::SIGTERM).unwrap();

    // `health` says draining (the core stops routing there)...
    let health = json!({"jsonrpc": "2.0", "id": 1, "method": "health", "params": {}});
    poll("health status draining", POLL_TIMEOUT, || {
        ask_executor(&sb, &health)
            .ok()
            .filter(|h| h["result"]["status"] == "draining")
    });
    // ...a new call is refused before anything of it runs, with the code the core resends on...
    let execute = json!({"jsonrpc": "2.0", "id": 2, "method": "tool.execute", "params": {
        "call_id": "late0000call", "capability_token": "t", "skill": "slow", "tool": "sleep",
        "args": {"seconds": 0}, "envelope": {}}});
    let refused = ask_executor(&sb, &execute).expect("the draining executor still answers");
    assert_eq!(
        refused["error"]["code"],
        code::EXECUTOR_DRAINING,
        "{refused}"
    );
    let reason = refused["error"]["message"].as_str().unwrap();
    assert!(reason.contains("draining"), "{reason}");
    assert!(
        reason.contains("ran nothing of call late0000call"),
        "{reason}"
    );
    // ...and through the gateway that is a clean `unavailable` saying why.
    let late = sb.call("echo:echo", json!({"text": "during the drain"}));
    assert_eq!(late["success"], false, "{late}");
    assert_eq!(late["error_kind"], "unavailable", "{late}");
    assert!(
        late["error"].as_str().unwrap().contains("draining"),
        "{late}"
    );

    // The call it held finishes as if nothing happened.
    let r = held.join().unwrap();
    assert_eq!(r["success"], true, "the held call was cut off: {r}");

    // Then it exits on its own (`up` starts a new one), without giving up on a call (that
    // would be a warning in the log).
    poll("the drained executor gone", START_TIMEOUT, || {
        sb.executor_pid().filter(|p| *p != old)
    });
    assert!(
        !sb.logs().contains("drain grace period over"),
        "{}",
        sb.logs()
    );
    poll("the new executor healthy", START_TIMEOUT, || {
        (sb.health()["executor"] == "ok").then_some(())
    });
    assert_eq!(
        sb.call_ok("echo:echo", json!({"text": "back"}))["echo"]["text"],
        "back"
    );
}

#[test]
fn executor_refuses_a_uid_base_among_system_users() {
    // Ids from the base up are the calls' users, and the end of a call kills every process
    // of its id: a base among system users (root is 0) must never be taken.
    for bad in ["0", "1000", "99999", "4000000001"] {
        let out = std::process::Command::new(crate::harness::binary("skillbox-executor"))
            .args(["serve", "--skills", "/nonexistent", "--pki", "/nonexistent"])
            .args(["--core-url", "https://127.0.0.1:9", "--uid-base", bad])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--uid-base {bad}: {stderr}");
        assert!(stderr.contains("--uid-base"), "{stderr}");
        assert!(stderr.contains("100000..=4000000000"), "{stderr}");
    }
}
