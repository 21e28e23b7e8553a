//! The conversation with a started tool over its stdio, by the tool's protocol: a
//! JSON-RPC exchange ([`jsonrpc`]), or the plain arguments in and the output out. Both run
//! under the call's output budget, and both say which limit or rule ended a tool that
//! gave no answer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use skillbox_protocol::skill::ToolProtocol;
use tokio::net::unix::pipe;
use tokio::task::JoinHandle;

use crate::broker::{CallInfo, CapabilityBroker};
use crate::call_error::CallError;
use crate::exit_cause::{
    exit_failure, last_line, memory_exhausted, memory_line, CallLimits, FILE_TOO_LARGE,
};
use crate::sandbox::SandboxChild;
use crate::script;
use crate::stdio::output::{self, Budget, StderrLog};
use crate::stdio::{jsonrpc, StdioFailure};

/// The tool's stderr, read into a log (its tail kept) while the call runs.
pub(super) struct Stderr {
    /// What the tool wrote, its tail kept.
    pub(super) log: Arc<Mutex<StderrLog>>,
    /// The reader, stopped when the call ends.
    pub(super) task: Option<JoinHandle<()>>,
}

impl Stderr {
    /// Starts reading `child`'s stderr, counted against `budget`.
    pub(super) fn drain(child: &mut SandboxChild, budget: &Arc<Budget>) -> Self {
        let log = Arc::new(Mutex::new(StderrLog::default()));
        let task = child.stderr.take().map(|s| {
            tokio::spawn(output::drain_stderr(
                s,
                Arc::clone(budget),
                Arc::clone(&log),
            ))
        });
        Self { log, task }
    }
}

/// One conversation with a started tool: its process, its stderr, the output budget and
/// the limits its end is judged against.
pub(super) struct Talk<'a> {
    /// The tool's process, waited for when its output ends.
    pub(super) child: &'a mut SandboxChild,
    /// Its stderr, waited for (bounded) after it exited.
    pub(super) stderr: &'a mut Stderr,
    /// The call's output budget.
    pub(super) budget: &'a Budget,
    /// The limits a tool that ended without an answer is judged against.
    pub(super) limits: CallLimits,
}

/// What the tool is told: the call, its arguments, and for a plain tool the text on its
/// stdin.
pub(super) struct Request<'a> {
    /// The tool's protocol.
    pub(super) protocol: ToolProtocol,
    /// The call the tool's callbacks belong to.
    pub(super) call: &'a CallInfo,
    /// The arguments (JSON-RPC).
    pub(super) args: &'a Value,
    /// The arguments as written to a plain tool's stdin.
    pub(super) plain_args: Option<String>,
    /// A `run_skill_script` call, whose failure message carries its output.
    pub(super) is_script: bool,
}

impl Talk<'_> {
    /// Converses with the tool on `stdin` and `stdout` by its protocol, until it answers,
    /// fails or goes past the output budget.
    pub(super) async fn converse<B: CapabilityBroker>(
        mut self,
        stdin: Option<pipe::Sender>,
        stdout: Option<pipe::Receiver>,
        request: Request<'_>,
        broker: &B,
    ) -> Result<Value, CallError> {
        let budget = self.budget;
        let conversation = async {
            let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
                return Err(CallError::Sandbox("tool stdio was not piped".into()));
            };
            match request.protocol {
                ToolProtocol::Jsonrpc => {
                    let (call, args) = (request.call, request.args);
                    self.jsonrpc(stdin, stdout, call, args, broker).await
                }
                ToolProtocol::Plain => {
                    let input = request.plain_args.unwrap_or_default();
                    self.plain(stdin, stdout, input, request.is_script).await
                }
            }
        };
        tokio::select! {
            r = conversation => r,
            _ = budget.exceeded.notified() => Err(CallError::Output(budget.max())),
        }
    }

    /// The JSON-RPC exchange ([`jsonrpc::converse`]) and what its end means.
    async fn jsonrpc<B: CapabilityBroker>(
        &mut self,
        stdin: pipe::Sender,
        stdout: pipe::Receiver,
        call: &CallInfo,
        args: &Value,
        broker: &B,
    ) -> Result<Value, CallError> {
        let budget = self.budget;
        match jsonrpc::converse(stdin, stdout, call, args, broker, budget).await {
            Ok(Ok(v)) => Ok(v),
            // A tool that caught its allocation failure and reported it was
            // stopped by the memory limit all the same.
            Ok(Err(e)) if memory_exhausted(&e.message) => Err(CallError::Memory(
                self.limits.memory_mb,
                format!(
                    "; the tool reported error {}: {}",
                    e.code,
                    last_line(&e.message)
                ),
            )),
            Ok(Err(e)) => Err(CallError::Tool(format!(
                "the tool reported error {}: {}",
                e.code, e.message
            ))),
            Err(StdioFailure::OutputLimit) => Err(CallError::Output(budget.max())),
            Err(StdioFailure::Protocol(m)) => Err(CallError::Protocol(m)),
            Err(StdioFailure::Eof) => {
                let status = self.child.wait().await.ok();
                wait_for_stderr(self.stderr.task.as_mut(), budget).await;
                let peak = self.child.peak_rss_bytes();
                Err(exit_failure(
                    status,
                    peak,
                    &self.stderr.log,
                    self.limits,
                    true,
                ))
            }
        }
    }

    /// A plain tool: `input` on its stdin, its stdout and exit code as the result.
    async fn plain(
        &mut self,
        stdin: pipe::Sender,
        stdout: pipe::Receiver,
        input: String,
        is_script: bool,
    ) -> Result<Value, CallError> {
        let budget = self.budget;
        // Written while stdout is read: a tool may answer before it has read all of
        // a large argument (or never read it), and neither side may block the other.
        // Arguments that fit the pipe's buffer (most) go in at once with one
        // non-blocking write, straight to the fd (the runtime does not know the new
        // pipe is writable yet), and stdin closes with the unused closure below;
        // only the rest of a larger one needs a task of its own.
        let written = nix::unistd::write(&stdin, input.as_bytes()).unwrap_or(0);
        let writer = (written < input.len()).then(|| {
            let mut stdin = stdin;
            tokio::spawn(async move {
                let rest = &input.as_bytes()[written..];
                let _ = tokio::io::AsyncWriteExt::write_all(&mut stdin, rest).await;
            })
        });
        let out = output::read_all(stdout, budget)
            .await
            .ok_or(CallError::Output(budget.max()))?;
        if let Some(writer) = writer {
            writer.abort();
        }
        let status = self.child.wait().await.ok();
        wait_for_stderr(self.stderr.task.as_mut(), budget).await;
        if budget.is_exceeded() {
            return Err(CallError::Output(budget.max()));
        }
        let Some(code) = status.and_then(|s| s.code()) else {
            let peak = self.child.peak_rss_bytes();
            return Err(exit_failure(
                status,
                peak,
                &self.stderr.log,
                self.limits,
                false,
            ));
        };
        let stderr = (self.stderr.log.lock())
            .map(|l| l.tail())
            .unwrap_or_default();
        plain_answer(code, &out, &stderr, self.limits, is_script)
    }
}

/// A plain tool's result from its exit `code`, its stdout and the tail of its stderr: the
/// three of them when it exited 0, else which limit or failure its exit means.
fn plain_answer(
    code: i32,
    out: &[u8],
    stderr: &str,
    limits: CallLimits,
    is_script: bool,
) -> Result<Value, CallError> {
    if code == 0 {
        Ok(json!({
            "stdout": String::from_utf8_lossy(out),
            "stderr": stderr,
            "exit_code": code,
        }))
    } else if stderr.contains(FILE_TOO_LARGE) {
        // Python, for one, ignores SIGXFSZ and exits 1 on the EFBIG.
        Err(CallError::FileSize(limits.max_file_mb))
    } else if memory_exhausted(stderr) {
        // Python, for one, exits 1 on an uncaught MemoryError.
        Err(CallError::Memory(
            limits.memory_mb,
            format!("; stderr: {}", memory_line(stderr)),
        ))
    } else if is_script {
        Err(CallError::Tool(script::failure_message(code, out, stderr)))
    } else {
        Err(CallError::Tool(format!(
            "exited with code {code}: {}",
            last_line(stderr)
        )))
    }
}

/// Longest wait for the stderr reader after the tool exited (a grandchild may keep the
/// pipe open; it dies with the call anyway).
const STDERR_DRAIN_WAIT: Duration = Duration::from_millis(200);

/// Waits, bounded, until the stderr reader has seen the end of the stream (or stopped at
/// the output budget). Awaits the reader itself: no polling, so a tool that exits with its
/// stderr closed is reported as soon as the reader sees the end.
async fn wait_for_stderr(task: Option<&mut JoinHandle<()>>, budget: &Budget) {
    let Some(task) = task else { return };
    if budget.is_exceeded() || task.is_finished() {
        return;
    }
    let _ = tokio::time::timeout(STDERR_DRAIN_WAIT, task).await;
}
