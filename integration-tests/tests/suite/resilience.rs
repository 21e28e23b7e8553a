//! The executor dying mid-call, and many calls at once.

use std::collections::BTreeMap;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

use crate::harness::http;
use crate::harness::{poll, Options, Skillbox, POLL_TIMEOUT, START_TIMEOUT};

#[test]
fn executor_killed_mid_call_gives_unavailable_and_the_supervisor_restarts_it() {
    let sb = Skillbox::start(Options::default());
    let old = poll("the executor child", POLL_TIMEOUT, || sb.executor_pid());
    let call = sb.call_in_background("slow:sleep", json!({"seconds": 15}));
    poll("the slow call in flight", POLL_TIMEOUT, || {
        (sb.health()["sandbox"]["in_flight"].as_u64() >= Some(1)).then_some(())
    });
    kill(Pid::from_raw(i32::try_from(old).unwrap()), Signal::SIGKILL).unwrap();

    let r = call.join().unwrap();
    eprintln!("the call whose executor was killed: {r}");
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["error_kind"], "unavailable", "{r}");
    let error = r["error"].as_str().unwrap();
    assert!(error.contains("the executor is unavailable"), "{error}");
    assert!(error.contains("the call did not complete"), "{error}");

    // The supervisor starts a new executor; the next call works.
    let new = poll("a restarted executor", START_TIMEOUT, || {
        sb.executor_pid().filter(|p| *p != old)
    });
    poll("the restarted executor healthy", START_TIMEOUT, || {
        (sb.health()["executor"] == "ok").then_some(())
    });
    assert_ne!(new, old);
    let r = sb.call_ok("echo:echo", json!({"text": "back"}));
    assert_eq!(r["echo"]["text"], "back");
}

#[test]
fn concurrent_calls_complete_or_are_refused_unavailable_and_none_is_lost() {
    const CALLS: usize = 200;
    // A small executor so the queue overflows; the sandbox's user ids are shared by every
    // executor on the host, so it also keeps this test from starving parallel ones.
    let sb = Skillbox::start(Options {
        max_concurrent: Some(4),
        ..Options::default()
    });
    let threads: Vec<_> = (0..CALLS)
        .map(|i| {
            let addr = sb.addr.clone();
            let auth = format!("Bearer {}", sb.token);
            std::thread::spawn(move || {
                let body = json!({"tool": "echo:echo", "args": {"text": format!("call {i}")}});
                let r = http::request(
                    &addr,
                    "POST",
                    "/v1/tools/call",
                    &[("Authorization", auth.as_str())],
                    Some(&body),
                );
                (i, r)
            })
        })
        .collect();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut bad: Vec<String> = Vec::new();
    for t in threads {
        let (i, r) = t.join().unwrap();
        let r: Value = match r {
            Ok(r) if r.status == 200 => r.json(),
            Ok(r) => {
                bad.push(format!("call {i}: HTTP {} {}", r.status, r.body));
                continue;
            }
            Err(e) => {
                bad.push(format!("call {i}: no answer: {e}"));
                continue;
            }
        };
        if r["success"] == true && r["data"]["echo"]["text"] == format!("call {i}") {
            *outcomes.entry("success".into()).or_default() += 1;
        } else if r["success"] == false && r["error_kind"] == "unavailable" {
            *outcomes.entry("unavailable".into()).or_default() += 1;
        } else {
            bad.push(format!("call {i}: {r}"));
        }
    }
    eprintln!("{CALLS} concurrent calls: {outcomes:?}");
    assert!(
        bad.is_empty(),
        "{} calls lost or wrong: {bad:#?}",
        bad.len()
    );
    assert_eq!(outcomes.values().sum::<usize>(), CALLS);
    assert!(
        outcomes.get("success").copied().unwrap_or(0) > 0,
        "{outcomes:?}"
    );
    // Still serving afterwards.
    assert_eq!(sb.health()["executor"], "ok");
    assert_eq!(
        sb.call_ok("echo:echo", json!({"text": "after"}))["echo"]["text"],
        "after"
    );
}

/// Calls are recorded off their path (a writer thread behind a queue); a clean stop
/// (SIGTERM) writes every finished call before the core exits.
#[test]
fn a_clean_stop_keeps_every_recorded_call() {
    let mut sb = Skillbox::start(Options::default());
    let mut ids = Vec::new();
    for i in 0..12 {
        let r = sb.call("echo:echo", json!({ "text": format!("n{i}") }));
        assert_eq!(r["success"], true, "{r}");
        ids.push(r["call_id"].as_str().unwrap().to_string());
    }
    kill(
        Pid::from_raw(i32::try_from(sb.pid()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    let status = sb.wait_exit();
    assert!(status.success(), "{status}: {}", sb.logs());
    let db = rusqlite::Connection::open(sb.state().join("skillbox.db")).unwrap();
    for id in &ids {
        let n: i64 = db
            .query_row("SELECT COUNT(*) FROM calls WHERE call_id = ?1", [id], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(n, 1, "call {id} was not recorded");
    }
}
