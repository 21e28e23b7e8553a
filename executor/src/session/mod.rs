//! Command sessions (`session.exec`, `session.write`, `session.close`; docs/sessions.md): a
//! command (`sh -c TEXT` or an argv) run in the sandbox of a call (its own user id from
//! the pool, scratch dir, Landlock, seccomp, rlimits: memory from `limits.memory_mb`, CPU
//! time from `limits.lifetime_ms`), in the context's folder laid out as for a call
//! ([`crate::workdir`]), under a skill's envelope when one is named (its folder readable
//! as `SKILLBOX_SKILL_DIR`, its declared env values) or with no skill folder at all.
//! stdout and stderr come interleaved on one pipe, or on a pseudo-terminal (`tty`).
//!
//! An answer waits up to `yield_ms` (for the end; after a write, for new output or the
//! end), then gives the output since the last answer ([`output::Kept`], head and tail
//! kept), syncs the folder back, and either the exit code (the session is gone) or
//! `running: true` (the session stays in the table by id). Idle timeout and lifetime end
//! a session on their own; a later write answers [`code::SESSION_NOT_FOUND`] saying why.
//! A session's end kills every process of its user.

mod output;
mod process;
mod start;
mod waiting;

use crate::launch::LaunchError;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skillbox_protocol::jsonrpc::{code, ErrorObject};
use skillbox_protocol::result::{ErrorKind, ExecutorStages};
use skillbox_protocol::session::{
    SessionAnswer, SessionCloseParams, SessionCloseResult, SessionExecParams, SessionWriteParams,
};
use skillbox_protocol::workdir::WorkDir;

use self::process::{EndReason, Input, Shared};
use crate::broker::{CallInfo, CapabilityBroker};
use crate::registry::Registry;
use crate::sandbox::{Sandbox, SandboxError};
use crate::workdir::{self, Baseline, WorkDirError};

/// Longest `yield_ms` honoured.
pub const MAX_YIELD_MS: u64 = 30_000;
/// Longest an answer after a write waits for quiet once output came.
const SETTLE_MAX: Duration = Duration::from_millis(50);
/// How many times an answer after a write looks, once output came, for the session
/// waiting with its output all read ([`Session::waits_with_output_read`]) before it falls
/// back to the quiet gap: a few tens of microseconds each.
const QUICK_LOOKS: usize = 16;
/// Most ended sessions whose end is remembered for a later write.
const REMEMBERED_ENDS: usize = 1024;

/// Why a session request was refused; [`SessionError::code`] is its JSON-RPC code.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No session by that id.
    #[error("no session {id:?} on this executor ({why})")]
    NotFound {
        /// The id.
        id: String,
        /// What is known of it.
        why: String,
    },
    /// The id is taken.
    #[error("session {0:?} is running already; the core names each session once")]
    Duplicate(String),
    /// The request is malformed.
    #[error("{0}")]
    Invalid(String),
    /// The skill named is not on this executor.
    #[error("no skill named {0:?} on this executor")]
    NoSkill(String),
    /// The sandbox could not be prepared (a busy pool among others).
    #[error("{0}")]
    Sandbox(#[from] SandboxError),
    /// The context's files could not be laid out.
    #[error("{0}")]
    Layout(#[from] WorkDirError),
    /// The process could not start.
    #[error("the command could not start in the sandbox: {0}")]
    Spawn(std::io::Error),
    /// The executor is stopping.
    #[error("the executor is draining; start the session on another executor")]
    Draining,
}

impl SessionError {
    /// The JSON-RPC code of the refusal.
    pub fn code(&self) -> i64 {
        match self {
            SessionError::NotFound { .. } => code::SESSION_NOT_FOUND,
            SessionError::Duplicate(_) | SessionError::Invalid(_) | SessionError::NoSkill(_) => {
                code::INVALID_PARAMS
            }
            SessionError::Sandbox(SandboxError::Busy(_) | SandboxError::NoNetworkNamespaces) => {
                code::CAPABILITY_UNAVAILABLE
            }
            SessionError::Sandbox(SandboxError::ProgramNotFound { .. }) => code::INVALID_PARAMS,
            SessionError::Sandbox(_) | SessionError::Spawn(_) => code::INTERNAL_ERROR,
            SessionError::Layout(e) => match e.kind() {
                ErrorKind::InvalidArgs => code::INVALID_PARAMS,
                ErrorKind::ResourceLimit => code::RESOURCE_LIMIT,
                ErrorKind::PermissionDenied => code::PERMISSION_DENIED,
                _ => code::CAPABILITY_UNAVAILABLE,
            },
            SessionError::Draining => code::EXECUTOR_DRAINING,
        }
    }
}

impl From<LaunchError> for SessionError {
    fn from(e: LaunchError) -> Self {
        match e {
            LaunchError::Sandbox(e) => SessionError::Sandbox(e),
            LaunchError::Layout(e) => SessionError::Layout(e),
            LaunchError::Spawn(e) => SessionError::Spawn(e),
            LaunchError::NotAFolder(_) => SessionError::Invalid(e.to_string()),
            other => SessionError::Spawn(std::io::Error::other(other.to_string())),
        }
    }
}

impl From<SessionError> for ErrorObject {
    fn from(e: SessionError) -> Self {
        ErrorObject::new(e.code(), e.to_string())
    }
}

/// A session's files: what the syncs need.
#[derive(Debug)]
struct Files {
    call: CallInfo,
    work: PathBuf,
    /// The folder's quotas and context (its list went to the launch).
    limits: WorkDir,
    baseline: tokio::sync::Mutex<Baseline>,
}

/// One running (or ended, not yet answered) session.
#[derive(Debug)]
struct Session {
    shared: Arc<Shared>,
    input: Input,
    /// The session's first process, whose tree [`waiting::all_waiting`] looks at.
    leader: Option<u32>,
    /// The output's read side, for the bytes not read yet ([`process::pending_bytes`]).
    watcher: Option<OwnedFd>,
    /// How long output must be quiet before an answer after a write goes, when the
    /// session is not seen waiting sooner (`SessionLimits::quiet_ms`).
    quiet: Duration,
    files: Arc<Files>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Session {
    /// Whether, within [`QUICK_LOOKS`] looks, every process of the session waits and its
    /// output is all read: then the answer after a write can go now. Looked twice in a
    /// row, a task switch apart, so that the reader has pushed what it read.
    async fn quickly_waiting(&self) -> bool {
        let (Some(leader), Some(watcher)) = (self.leader, self.watcher.as_ref()) else {
            return false;
        };
        let settled = || process::pending_bytes(watcher) == Some(0) && waiting::all_waiting(leader);
        let mut in_a_row = 0;
        for _ in 0..QUICK_LOOKS {
            in_a_row = if settled() { in_a_row + 1 } else { 0 };
            if in_a_row == 2 {
                return true;
            }
            tokio::task::yield_now().await;
        }
        false
    }
}

/// Microseconds of `d`, saturating.
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The sessions of an executor, by id.
#[derive(Debug)]
pub struct Sessions<B> {
    sandbox: Sandbox,
    broker: Arc<B>,
    table: Mutex<HashMap<String, Arc<Session>>>,
    ends: Mutex<std::collections::VecDeque<(String, String)>>,
    draining: AtomicBool,
}

impl<B: CapabilityBroker + 'static> Sessions<B> {
    /// No sessions yet; their file callbacks go through `broker`.
    pub fn new(sandbox: Sandbox, broker: Arc<B>) -> Self {
        Self {
            sandbox,
            broker,
            table: Mutex::default(),
            ends: Mutex::default(),
            draining: AtomicBool::new(false),
        }
    }

    /// Sessions running (or ended and not yet answered).
    pub fn len(&self) -> usize {
        self.table.lock().map(|t| t.len()).unwrap_or(0)
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a session may still be asked for: one running, or one whose end was not
    /// answered yet and that its caller wrote to or polled within `idle` (a session ended
    /// by its idle or lifetime limit is not: the core forgets it on the same limits).
    pub fn any_awaited(&self, idle: Duration) -> bool {
        let Ok(table) = self.table.lock() else {
            return false;
        };
        table.values().any(|s| match s.shared.ended() {
            None => true,
            Some(ended) => {
                matches!(ended.why, EndReason::Exited | EndReason::Closed)
                    && s.shared.touched.lock().is_ok_and(|t| t.elapsed() < idle)
            }
        })
    }

    /// `session.exec`: starts the command and answers as the module docs say.
    pub async fn exec(
        &self,
        registry: &Registry,
        p: SessionExecParams,
    ) -> Result<SessionAnswer, SessionError> {
        if self.draining.load(Ordering::SeqCst) {
            return Err(SessionError::Draining);
        }
        if self.get(&p.session_id).is_some() {
            return Err(SessionError::Duplicate(p.session_id));
        }
        let arrived = std::time::Instant::now();
        let session = self.start(registry, &p).await?;
        let started = ExecutorStages {
            start_us: micros(arrived.elapsed()),
            ..ExecutorStages::default()
        };
        self.table
            .lock()
            .map_err(|_| SessionError::Invalid("the session table is unusable".into()))?
            .insert(p.session_id.clone(), Arc::clone(&session));
        Ok(self
            .answer(
                &p.session_id,
                &session,
                (false, started),
                p.yield_ms,
                p.max_output_bytes,
            )
            .await)
    }

    /// `session.write`: writes `chars`, then answers.
    pub async fn write(&self, p: SessionWriteParams) -> Result<SessionAnswer, SessionError> {
        let Some(session) = self.get(&p.session_id) else {
            let why = self
                .end_of(&p.session_id)
                .unwrap_or_else(|| "it ended, was closed, or its executor restarted".to_string());
            return Err(SessionError::NotFound {
                id: p.session_id,
                why,
            });
        };
        session.shared.touch();
        if let Some(ended) = session.shared.ended() {
            if matches!(ended.why, EndReason::Idle(_) | EndReason::Lifetime(_)) {
                self.forget(&p.session_id, format!("it ended: {}", ended.why));
                return Err(SessionError::NotFound {
                    id: p.session_id,
                    why: format!("it ended: {}", ended.why),
                });
            }
        }
        let arrived = std::time::Instant::now();
        if !p.chars.is_empty() && session.shared.ended().is_none() {
            let limit = Duration::from_millis(p.yield_ms.clamp(100, MAX_YIELD_MS));
            if let Err(e) = session.input.write(p.chars.as_bytes(), limit).await {
                tracing::info!(session = %p.session_id, error = %e, "writing to a session failed");
            }
        }
        Ok(self
            .answer(
                &p.session_id,
                &session,
                (
                    true,
                    ExecutorStages {
                        start_us: micros(arrived.elapsed()),
                        ..ExecutorStages::default()
                    },
                ),
                p.yield_ms,
                p.max_output_bytes,
            )
            .await)
    }

    /// `session.close`: ends each session named and every process in it.
    pub async fn close(&self, p: SessionCloseParams) -> SessionCloseResult {
        let mut closed = 0;
        for id in p.session_ids {
            let Some(session) = self.get(&id) else {
                continue;
            };
            self.forget(&id, "it was closed".into());
            if session.shared.ended().is_none() {
                closed += 1;
            }
            end(&session).await;
        }
        SessionCloseResult { closed }
    }

    /// Ends every session (the executor is stopping) and refuses new ones.
    pub async fn end_all(&self) {
        self.draining.store(true, Ordering::SeqCst);
        let all: Vec<(String, Arc<Session>)> = self
            .table
            .lock()
            .map(|mut t| t.drain().collect())
            .unwrap_or_default();
        for (_, session) in all {
            end(&session).await;
        }
    }

    fn get(&self, id: &str) -> Option<Arc<Session>> {
        self.table.lock().ok()?.get(id).cloned()
    }

    fn forget(&self, id: &str, why: String) {
        if let Ok(mut t) = self.table.lock() {
            t.remove(id);
        }
        if let Ok(mut ends) = self.ends.lock() {
            if ends.len() >= REMEMBERED_ENDS {
                ends.pop_front();
            }
            ends.push_back((id.to_string(), why));
        }
    }

    fn end_of(&self, id: &str) -> Option<String> {
        let ends = self.ends.lock().ok()?;
        ends.iter()
            .rev()
            .find(|(i, _)| i == id)
            .map(|(_, w)| w.clone())
    }

    /// Waits as the answer rule says, takes the output, syncs, answers; `stages` so far
    /// (its start) are completed with the wait and the end.
    async fn answer(
        &self,
        id: &str,
        session: &Arc<Session>,
        (after_write, mut stages): (bool, ExecutorStages),
        yield_ms: u64,
        max_output_bytes: u64,
    ) -> SessionAnswer {
        let waiting = std::time::Instant::now();
        let shared = &session.shared;
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(yield_ms.min(MAX_YIELD_MS));
        loop {
            let notified = shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let has_output = shared.out.lock().map(|o| !o.is_empty()).unwrap_or(false);
            if shared.ended().is_some() || (after_write && has_output) {
                break;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break;
            }
        }
        if after_write && shared.ended().is_none() && !session.quickly_waiting().await {
            // Let the rest of a burst of output (and an exit right after it) join this
            // answer: it goes once the output has been quiet for the session's quiet_ms,
            // at most SETTLE_MAX after it came. An echo the session answered and then waits
            // for more input skips this ([`Session::quickly_waiting`]).
            let settle = (tokio::time::Instant::now() + SETTLE_MAX).min(deadline);
            let _ = tokio::time::timeout_at(settle, async {
                while shared.ended().is_none() {
                    let notified = shared.changed.notified();
                    if tokio::time::timeout(session.quiet, notified).await.is_err() {
                        break;
                    }
                }
            })
            .await;
        }
        stages.tool_us = micros(waiting.elapsed());
        let ending = std::time::Instant::now();
        shared.touch();
        let ended = shared.ended();
        let mut note = None;
        if ended.is_none() {
            note = sync(&*self.broker, &session.files).await.0;
        }
        let (mut output, elided_bytes) = shared
            .out
            .lock()
            .map(|mut o| o.take(max_output_bytes))
            .unwrap_or_default();
        if let Some(note) = note {
            output.push_str(&note);
        }
        stages.end_us = micros(ending.elapsed());
        match ended {
            Some(ended) => {
                self.forget(id, format!("it ended: {}", ended.why));
                SessionAnswer {
                    output,
                    exit_code: Some(ended.exit_code),
                    running: false,
                    elided_bytes,
                    stages: Some(stages),
                }
            }
            None => SessionAnswer {
                output,
                exit_code: None,
                running: true,
                elided_bytes,
                stages: Some(stages),
            },
        }
    }
}

/// Syncs a session's folder back; a marker line for the output when not all was kept,
/// and whether the folder may be kept for the context's next call (all was, and no
/// process of the session's user was left: [`workdir::SyncReport::quiet`]).
async fn sync<B: CapabilityBroker>(broker: &B, files: &Files) -> (Option<String>, bool) {
    let mut baseline = files.baseline.lock().await;
    let report = workdir::sync_back(
        broker,
        &files.call,
        &files.work,
        &files.limits,
        &mut baseline,
    )
    .await;
    let note = (report.failure()).map(|(_, message)| format!("\n[skillbox: {message}]\n"));
    let keep = note.is_none() && report.quiet;
    (note, keep)
}

/// Asks the session's task to end it and waits (bounded) until it has.
async fn end(session: &Session) {
    session.shared.kill.notify_one();
    let task = session.task.lock().ok().and_then(|mut t| t.take());
    if let Some(task) = task {
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
}
