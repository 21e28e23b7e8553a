//! Command sessions (`exec_command`, `write_stdin`, `close_context`; docs/sessions.md) as
//! the core asks the executor for them: `session.exec` starts a command in the sandbox of
//! a call and answers with its output when it ends within `yield_ms`, or with what it
//! printed so far while it keeps running; `session.write` writes to it and answers the
//! same way; `session.close` ends sessions and every process in them. The core names each
//! session with an id it made and remembers which executor holds it.

use serde::{Deserialize, Serialize};

use crate::envelope::{Envelope, SecretValue};
use crate::workdir::WorkDir;

/// What to run: shell text (`sh -c`) or an argv list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Command {
    /// `sh -c TEXT`.
    Shell(String),
    /// The program and its arguments, no shell.
    Argv(Vec<String>),
}

/// Limits of one session, from the core's `[exec]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionLimits {
    /// A session nobody wrote to or polled for this long ends.
    pub idle_timeout_ms: u64,
    /// A session ends this long after it started, whatever it is doing.
    pub lifetime_ms: u64,
    /// Most output kept between two answers: the head and the tail, the middle elided.
    pub output_kept_bytes: u64,
    /// Memory of the session's processes, in MiB.
    pub memory_mb: u64,
    /// After a write, once output came: how long it must stay quiet before the answer
    /// goes, when the session is not seen waiting for input sooner (the executor answers
    /// as soon as every process of it waits). Absent from cores that predate it: 2 ms.
    #[serde(default = "default_quiet_ms")]
    pub quiet_ms: u64,
}

/// [`SessionLimits::quiet_ms`] when the core does not say.
pub const DEFAULT_QUIET_MS: u64 = 2;

fn default_quiet_ms() -> u64 {
    DEFAULT_QUIET_MS
}

/// `session.exec` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionExecParams {
    /// The id the core gave the session.
    pub session_id: String,
    /// The call that starts it; its token authorizes the session's callbacks while it runs.
    pub call_id: String,
    /// Per-session token for capability and file callbacks.
    pub capability_token: SecretValue,
    /// The skill whose envelope it runs under (declared env, folder), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// The command.
    pub cmd: Command,
    /// Working directory relative to the context's folder (default: the folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// The context's files.
    pub files: WorkDir,
    /// What the session carries of its skill's envelope (absent: nothing, as a session
    /// under no skill).
    #[serde(default, skip_serializing_if = "Envelope::is_empty")]
    pub envelope: Envelope,
    /// How long to wait for the command to end before answering with a session.
    pub yield_ms: u64,
    /// Most output bytes in this answer.
    pub max_output_bytes: u64,
    /// Run on a pseudo-terminal.
    #[serde(default)]
    pub tty: bool,
    /// The session's limits.
    pub limits: SessionLimits,
    /// The bot's W3C `traceparent`, for the log lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// `session.write` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionWriteParams {
    /// The session.
    pub session_id: String,
    /// What to write to its stdin (empty: only poll).
    #[serde(default)]
    pub chars: String,
    /// How long to wait for output or the end.
    pub yield_ms: u64,
    /// Most output bytes in this answer.
    pub max_output_bytes: u64,
}

/// The answer of `session.exec` and `session.write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionAnswer {
    /// Output since the last answer, stdout and stderr interleaved.
    pub output: String,
    /// The exit code once the command ended (128 + signal when a signal ended it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Whether the session is still running (then the core keeps its id).
    pub running: bool,
    /// Bytes of output elided between the head and the tail kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub elided_bytes: u64,
    /// Where the executor's time went, for the core's stage metrics (never shown to the
    /// caller): `start_us` the command's start (or the write of its input), `tool_us` the
    /// wait for its output, `end_us` the files synced and the output taken. Absent from
    /// executors that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<crate::result::ExecutorStages>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `session.close` params: the sessions to end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionCloseParams {
    /// Their ids.
    pub session_ids: Vec<String>,
}

/// `session.close` answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionCloseResult {
    /// How many were running and were ended.
    pub closed: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_command_is_shell_text_or_an_argv_list() {
        let c: Command = serde_json::from_value(json!("ls -l")).unwrap();
        assert_eq!(c, Command::Shell("ls -l".into()));
        let c: Command = serde_json::from_value(json!(["ls", "-l"])).unwrap();
        assert_eq!(c, Command::Argv(vec!["ls".into(), "-l".into()]));
        assert!(serde_json::from_value::<Command>(json!(3)).is_err());
    }
}
