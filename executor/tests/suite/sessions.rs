//! Command sessions (`session.exec/write/close`), driven in this process against a
//! [`FakeCore`]: input written reaches the command, an end within `yield_ms` answers its
//! exit code, a longer one answers `running` then its exit, output keeps its head and
//! tail, close and the idle timeout kill every process, an unknown id is refused, a `tty`
//! session has a terminal, and the files a session writes reach the context.

use std::sync::Arc;
use std::time::{Duration, Instant};

use skillbox_executor::registry::Registry;
use skillbox_executor::session::{SessionError, Sessions};
use skillbox_protocol::jsonrpc::code;
use skillbox_protocol::methods::{Envelope, SecretValue};
use skillbox_protocol::session::{
    Command, SessionAnswer, SessionCloseParams, SessionExecParams, SessionLimits,
    SessionWriteParams,
};

use super::context_files::{runtime, sandbox};
use super::harness::fake_core::FakeCore;
use super::harness::unique;

struct Fixture {
    sessions: Sessions<FakeCore>,
    core: Arc<FakeCore>,
    registry: Registry,
    rt: tokio::runtime::Runtime,
}

impl Fixture {
    fn new() -> Self {
        let core = Arc::new(FakeCore::with(&[("in.txt", b"input")]));
        let skills = tempfile::tempdir().unwrap();
        Self {
            sessions: Sessions::new(sandbox(), Arc::clone(&core)),
            core,
            registry: Registry::load(skills.path()),
            rt: runtime(),
        }
    }

    fn params(&self, cmd: Command, yield_ms: u64) -> SessionExecParams {
        SessionExecParams {
            session_id: unique("s"),
            call_id: "session-call".into(),
            capability_token: SecretValue("tok".into()),
            skill: None,
            cmd,
            workdir: None,
            files: self.core.workdir(),
            envelope: Envelope::default(),
            yield_ms,
            max_output_bytes: 1 << 20,
            tty: false,
            limits: SessionLimits {
                idle_timeout_ms: 30_000,
                lifetime_ms: 60_000,
                output_kept_bytes: 1 << 20,
                memory_mb: 512,
                quiet_ms: skillbox_protocol::session::DEFAULT_QUIET_MS,
            },
            traceparent: None,
        }
    }

    fn exec(&self, p: SessionExecParams) -> SessionAnswer {
        self.rt
            .block_on(self.sessions.exec(&self.registry, p))
            .unwrap()
    }

    fn write(&self, id: &str, chars: &str, yield_ms: u64) -> Result<SessionAnswer, SessionError> {
        self.rt.block_on(self.sessions.write(SessionWriteParams {
            session_id: id.into(),
            chars: chars.into(),
            yield_ms,
            max_output_bytes: 1 << 20,
        }))
    }

    fn close(&self, id: &str) -> usize {
        self.rt
            .block_on(self.sessions.close(SessionCloseParams {
                session_ids: vec![id.into()],
            }))
            .closed
    }
}

fn shell(text: &str) -> Command {
    Command::Shell(text.into())
}

/// Whether `pid` is gone (or a zombie) within 3 s.
fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().next());
        if stat.is_empty() || state == Some("Z") {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn session_cat_echoes_what_is_written() {
    let f = Fixture::new();
    let p = f.params(Command::Argv(vec!["cat".into()]), 100);
    let id = p.session_id.clone();
    let a = f.exec(p);
    assert!(a.running && a.exit_code.is_none(), "{a:?}");
    // Each answer says where the executor's time went, for the core's stage metrics: the
    // command's start (a process spawned) and, after a write, the wait for the echo.
    let started = a.stages.expect("stages of the start");
    assert!(started.start_us > 0, "{started:?}");
    let a = f.write(&id, "hello\n", 5000).unwrap();
    assert_eq!(a.output, "hello\n", "{a:?}");
    assert!(a.running);
    let written = a.stages.expect("stages of the write");
    assert!(written.tool_us > 0, "{written:?}");
    assert_eq!(f.close(&id), 1);
}

#[test]
fn session_sh_runs_the_commands_written_to_it_and_answers_its_exit() {
    let f = Fixture::new();
    let p = f.params(Command::Argv(vec!["sh".into()]), 100);
    let id = p.session_id.clone();
    assert!(f.exec(p).running);
    let a = f.write(&id, "echo $((6*7)); cat in.txt\n", 5000).unwrap();
    // An answer goes once output is quiet for a moment: `cat` may start after it; polls
    // (empty writes) bring the rest, as an agent would.
    let mut output = a.output;
    for _ in 0..50 {
        if output.contains("42\ninput") {
            break;
        }
        output.push_str(&f.write(&id, "", 200).unwrap().output);
    }
    assert!(output.contains("42\ninput"), "{output:?}");
    let a = f.write(&id, "exit 3\n", 5000).unwrap();
    assert_eq!((a.exit_code, a.running), (Some(3), false), "{a:?}");
    let refused = f.write(&id, "", 10).unwrap_err();
    assert_eq!(refused.code(), code::SESSION_NOT_FOUND);
}

#[test]
fn session_ending_within_yield_answers_its_exit_code_output_and_files() {
    let f = Fixture::new();
    let a = f.exec(f.params(
        shell("echo hi; echo err >&2; printf made > made.txt; rm in.txt; exit 5"),
        5000,
    ));
    assert_eq!((a.exit_code, a.running), (Some(5), false), "{a:?}");
    assert!(
        a.output.contains("hi\n") && a.output.contains("err\n"),
        "{a:?}"
    );
    assert_eq!(f.core.file("made.txt").as_deref(), Some(&b"made"[..]));
    assert_eq!(f.core.file("in.txt"), None);
}

#[test]
fn session_running_longer_answers_running_then_its_exit() {
    let f = Fixture::new();
    let p = f.params(
        shell("echo start; printf step > step.txt; sleep 1; echo done"),
        300,
    );
    let id = p.session_id.clone();
    let a = f.exec(p);
    assert!(a.running, "{a:?}");
    assert_eq!(a.output, "start\n");
    assert_eq!(
        f.core.file("step.txt").as_deref(),
        Some(&b"step"[..]),
        "a running session's files reach the context"
    );
    let mut a = f.write(&id, "", 5000).unwrap();
    let mut output = a.output.clone();
    // The exit may come a moment after the last output: poll for it.
    for _ in 0..50 {
        if !a.running {
            break;
        }
        a = f.write(&id, "", 200).unwrap();
        output.push_str(&a.output);
    }
    assert_eq!((a.exit_code, a.running), (Some(0), false), "{a:?}");
    assert_eq!(output, "done\n");
}

#[test]
fn session_output_keeps_head_and_tail_and_counts_what_it_elided() {
    let f = Fixture::new();
    let mut p = f.params(shell("seq 1 20000"), 5000);
    p.limits.output_kept_bytes = 1000;
    let a = f.exec(p);
    assert_eq!(a.exit_code, Some(0), "{a:?}");
    assert!(a.elided_bytes > 100_000, "{}", a.elided_bytes);
    assert!(a.output.starts_with("1\n2\n3\n"), "{}", a.output);
    assert!(a.output.ends_with("19999\n20000\n"), "{}", a.output);
    assert!(a.output.contains(&format!(
        "[... {} bytes of output elided ...]",
        a.elided_bytes
    )));
}

#[test]
fn session_close_kills_every_process_of_the_session() {
    let f = Fixture::new();
    let p = f.params(shell("sleep 1000 & echo $!; wait"), 500);
    let id = p.session_id.clone();
    let a = f.exec(p);
    assert!(a.running, "{a:?}");
    let pid: u32 = a.output.trim().parse().unwrap();
    assert!(
        std::fs::metadata(format!("/proc/{pid}")).is_ok(),
        "{pid} is not running"
    );
    assert_eq!(f.close(&id), 1);
    assert!(gone(pid), "process {pid} survived its session's close");
    assert_eq!(
        f.write(&id, "", 10).unwrap_err().code(),
        code::SESSION_NOT_FOUND
    );
}

#[test]
fn session_idle_timeout_ends_it_and_the_next_write_says_why() {
    let f = Fixture::new();
    let mut p = f.params(shell("sleep 1000 & echo $!; wait"), 300);
    p.limits.idle_timeout_ms = 400;
    let id = p.session_id.clone();
    let a = f.exec(p);
    let pid: u32 = a.output.trim().parse().unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    assert!(
        gone(pid),
        "process {pid} survived its session's idle timeout"
    );
    let e = f.write(&id, "x", 10).unwrap_err();
    assert_eq!(e.code(), code::SESSION_NOT_FOUND);
    assert!(e.to_string().contains("idle_timeout_ms"), "{e}");
}

#[test]
fn session_write_to_an_unknown_id_is_refused() {
    let f = Fixture::new();
    let e = f.write("no-such-session", "x", 10).unwrap_err();
    assert_eq!(e.code(), code::SESSION_NOT_FOUND);
    assert!(
        e.to_string().contains("no session \"no-such-session\""),
        "{e}"
    );
    assert!(e.to_string().contains("executor restarted"), "{e}");
}

#[test]
fn session_with_tty_runs_on_a_terminal_and_without_on_pipes() {
    let f = Fixture::new();
    let check = "if test -t 0 && test -t 1; then echo on-a-tty; else echo no-tty; fi";
    let mut p = f.params(shell(check), 5000);
    p.tty = true;
    let a = f.exec(p);
    assert_eq!(a.exit_code, Some(0), "{a:?}");
    assert!(a.output.contains("on-a-tty"), "{a:?}");
    let a = f.exec(f.params(shell(check), 5000));
    assert_eq!(a.output, "no-tty\n", "{a:?}");
}

#[test]
fn session_python_interactive_on_a_tty_answers_what_is_typed() {
    let f = Fixture::new();
    let mut p = f.params(
        Command::Argv(vec!["python3".into(), "-i".into(), "-q".into()]),
        1000,
    );
    p.tty = true;
    let id = p.session_id.clone();
    let a = f.exec(p);
    assert!(a.running, "{a:?}");
    let mut out = f.write(&id, "print(6*7)\n", 5000).unwrap().output;
    // The answer may end at the terminal's echo when the machine is busy; the interpreter's
    // reply comes on a poll after it.
    for _ in 0..5 {
        if out.contains("42") {
            break;
        }
        out.push_str(&f.write(&id, "", 2000).unwrap().output);
    }
    assert!(out.contains("42"), "{out:?}");
    assert_eq!(f.close(&id), 1);
}
