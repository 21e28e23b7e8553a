//! `skillbox up` with the product defaults (no `[executor]` listen keys): its internal
//! listeners (executor, callbacks) take free ports, so two instances on one machine differ
//! only in their `--listen`.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::harness::{binary, free_port, http, poll, START_TIMEOUT};

/// A `skillbox up` in its own process group, killed with the group on drop.
struct Up {
    child: Child,
    addr: String,
    log: std::path::PathBuf,
}

impl Up {
    fn start(root: &Path, name: &str, rust_log: &str) -> Self {
        let ws = root.join(name);
        fs::create_dir_all(ws.join("skills")).unwrap();
        // Only the Docker engine is turned off (the suite does not depend on one); every
        // [executor] key keeps its default.
        fs::write(ws.join("skillbox.toml"), "[docker]\nsocket = \"off\"\n").unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let log = root.join(format!("{name}.log"));
        let child = Command::new(binary("skillbox"))
            .args(["up", "--workspace"])
            .arg(&ws)
            .args(["--listen", &addr])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("RUST_LOG", rust_log)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&log).unwrap())
            .stderr(fs::File::create(root.join(format!("{name}.err"))).unwrap())
            .process_group(0)
            .spawn()
            .unwrap();
        Self { child, addr, log }
    }

    fn logs(&self) -> String {
        let err = self.log.with_extension("err");
        format!(
            "--- stdout\n{}\n--- stderr\n{}",
            fs::read_to_string(&self.log).unwrap_or_default(),
            fs::read_to_string(err).unwrap_or_default()
        )
    }

    /// Waits until `/healthz` answers with a healthy executor; panics with the logs if the
    /// process exits first.
    fn wait_healthy(&mut self) {
        let addr = self.addr.clone();
        let child = &mut self.child;
        let log = self.log.clone();
        poll(
            &format!("a healthy skillbox up on {addr}"),
            START_TIMEOUT,
            || {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "skillbox up on {addr} exited ({status}):\n{}\n{}",
                        fs::read_to_string(&log).unwrap_or_default(),
                        fs::read_to_string(log.with_extension("err")).unwrap_or_default()
                    );
                }
                let r = http::request(&addr, "GET", "/healthz", &[], None).ok()?;
                (r.status == 200 && r.json()["executor"] == "ok").then_some(())
            },
        );
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

#[test]
fn two_up_with_different_listen_both_answer_healthz() {
    let root = tempfile::Builder::new()
        .prefix("skillbox-up-twice-")
        .tempdir()
        .unwrap();
    let mut first = Up::start(root.path(), "first", "warn");
    first.wait_healthy();
    // The second starts while the first holds its executor and callback ports.
    let mut second = Up::start(root.path(), "second", "warn");
    second.wait_healthy();
    for up in [&first, &second] {
        let r = http::request(&up.addr, "GET", "/healthz", &[], None).unwrap();
        assert_eq!(r.status, 200, "{}\n{}", r.body, up.logs());
        assert_eq!(r.json()["executor"], "ok", "{}\n{}", r.body, up.logs());
    }
}

#[test]
fn clean_start_logs_no_executor_warning_and_no_colour_codes() {
    let root = tempfile::Builder::new()
        .prefix("skillbox-up-clean-")
        .tempdir()
        .unwrap();
    let mut up = Up::start(root.path(), "clean", "info");
    up.wait_healthy();
    let logs = up.logs();
    // At info level a start logs something ("executor started"), so the checks below
    // look at real log lines.
    assert!(logs.contains("executor started"), "{logs}");
    // Not answering before the executor first answered is start-up, not a failure.
    assert!(!logs.contains("executor unhealthy"), "{logs}");
    // stderr is a file here, not a terminal: no ANSI escape sequences.
    assert!(!logs.contains('\u{1b}'), "{logs}");
}
