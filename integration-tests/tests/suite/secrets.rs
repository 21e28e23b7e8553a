//! Secrets: the core holds them (`<state>/secrets.env`) and hands a call only the values
//! of the env names its skill declared; the executor process never holds them.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::json;

use crate::harness::{poll, Options, Skillbox, POLL_TIMEOUT};

#[test]
fn declared_secret_reaches_the_tool_undeclared_does_not_and_the_executor_holds_none() {
    let declared = format!("sk-live-{}", std::process::id());
    let undeclared = format!("other-secret-{}", std::process::id());
    let sb = Skillbox::start(Options {
        secrets: vec![
            ("API_KEY".to_string(), declared.clone()),
            ("OTHER_SECRET".to_string(), undeclared.clone()),
        ],
        ..Options::default()
    });

    let r = sb.call_ok("vault:env", json!({"q": 1}));
    let stdout = r["stdout"].as_str().unwrap();
    assert!(
        stdout.contains(&format!("API_KEY={declared}\n")),
        "{stdout}"
    );
    assert!(stdout.contains("OTHER_SECRET=<unset>\n"), "{stdout}");
    assert!(!stdout.contains(&undeclared), "{stdout}");
    assert!(stdout.contains(r#"ARGS={"q":1}"#), "{stdout}");

    // The executor process never held the values: the core sends them per call.
    let pid = poll("the executor child", POLL_TIMEOUT, || sb.executor_pid());
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(
        !environ.contains(&declared),
        "the executor's environment holds a secret"
    );
    assert!(
        !environ.contains(&undeclared),
        "the executor's environment holds a secret"
    );
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains(&declared));

    // Nor do the logs of the core and the executor.
    let logs = sb.logs();
    assert!(!logs.contains(&declared), "a secret value was logged");
    assert!(!logs.contains(&undeclared), "a secret value was logged");
}

#[test]
fn secrets_env_edited_is_picked_up_by_reload_and_sighup_without_a_restart() {
    let first = format!("sk-first-{}", std::process::id());
    let second = format!("sk-second-{}", std::process::id());
    let third = format!("sk-third-{}", std::process::id());
    let sb = Skillbox::start(Options {
        secrets: vec![("API_KEY".to_string(), first.clone())],
        ..Options::default()
    });
    let api_key = |sb: &Skillbox| {
        let r = sb.call_ok("vault:env", json!({}));
        r["stdout"].as_str().unwrap().to_string()
    };
    assert!(api_key(&sb).contains(&format!("API_KEY={first}\n")));

    // POST /v1/skills/reload reads secrets.env again.
    std::fs::write(
        sb.state().join("secrets.env"),
        format!("API_KEY={second}\n"),
    )
    .unwrap();
    let r = sb.request("POST", "/v1/skills/reload", None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        !r.body.contains(&second),
        "the reload report carries a secret"
    );
    let got = api_key(&sb);
    assert!(
        got.contains(&format!("API_KEY={second}\n")),
        "{got}\n{}",
        sb.logs()
    );

    // So does SIGHUP.
    std::fs::write(sb.state().join("secrets.env"), format!("API_KEY={third}\n")).unwrap();
    let pid = Pid::from_raw(i32::try_from(sb.pid()).unwrap());
    kill(pid, Signal::SIGHUP).unwrap();
    poll("the value after SIGHUP", POLL_TIMEOUT, || {
        api_key(&sb)
            .contains(&format!("API_KEY={third}\n"))
            .then_some(())
    });
    let logs = sb.logs();
    for value in [&first, &second, &third] {
        assert!(!logs.contains(value.as_str()), "a secret value was logged");
    }
}
