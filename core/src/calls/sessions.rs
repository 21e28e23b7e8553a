//! The command-session built-ins (`exec_command`, `write_stdin`, `close_context`;
//! docs/sessions.md), on the one pipeline: the gate has let the caller into the call's
//! context; here the envelope is chosen (a skill's, or none), the approval asked when
//! `[exec] approval` or the skill's tools want one, and the command handed to an executor.
//! A command still running when its answer is due becomes a session: its id, made here,
//! names the context and the executor that holds it, so `write_stdin` reaches that
//! executor and no other context can name it. While it lives, its call stays registered
//! for its callbacks (its files going back to the context).

use crate::contexts::builtins::{CloseArgs, ExecArgs, WriteArgs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use skillbox_channel::client::ClientError;
use skillbox_protocol::methods::SecretValue;
use skillbox_protocol::result::ToolResult;
use skillbox_protocol::session::{
    Command, SessionAnswer, SessionCloseParams, SessionExecParams, SessionLimits,
    SessionWriteParams,
};
use skillbox_protocol::skill::{SandboxKind, Security, Skill};
use skillbox_protocol::workdir::WorkDir;
use skillbox_protocol::{Target, ToolRef};

use super::inflight::ActiveCall;
use super::pipeline::{Admitted, Run};
use super::session_table::Held;
use super::transport::{ExecutorTransport, Placement};
use super::{CallError, Dispatcher, Loaded};
use crate::auth::Caller;
use crate::contexts::ContextTools;
use crate::random;
use crate::state::config::exec::{ExecApproval, ExecSection, DEFAULT_YIELD_MS, MAX_YIELD_MS};

/// The skill name a command without a skill is recorded under.
pub const NO_SKILL: &str = "-";

/// Extra wait for an executor's answer beyond the call's `yield_ms`.
const ANSWER_SLACK: Duration = Duration::from_secs(30);

fn parse<T: serde::de::DeserializeOwned>(target: &Target, args: Value) -> Result<T, CallError> {
    serde_json::from_value(args).map_err(|e| CallError::Builtin {
        kind: skillbox_protocol::result::ErrorKind::InvalidArgs,
        message: format!("{target}: {e}"),
    })
}

fn invalid(message: String) -> CallError {
    CallError::Builtin {
        kind: skillbox_protocol::result::ErrorKind::InvalidArgs,
        message,
    }
}

impl Dispatcher {
    /// One call of a command-session built-in.
    pub(super) async fn session_call(
        &self,
        loaded: &Loaded,
        run: Run<'_>,
        target: &Target,
        args: Value,
        (context, listed): (Option<ContextTools>, Option<WorkDir>),
        recorded: &mut Option<ToolRef>,
    ) -> Result<ToolResult, CallError> {
        let exec = &loaded.config.exec;
        if !exec.enabled {
            return Err(CallError::Builtin {
                kind: skillbox_protocol::result::ErrorKind::PermissionDenied,
                message: format!("{target} is turned off on this core ([exec] enabled = false)"),
            });
        }
        let Some(context) = context else {
            return Err(invalid(format!(
                "{target} needs a context: call it with \"context_id\" (or on /mcp/{{context_id}})"
            )));
        };
        self.sweep_sessions(exec);
        match target {
            Target::ExecCommand => {
                let shown = args.clone();
                let args: ExecArgs = parse(target, args)?;
                self.exec_command(loaded, run, (context, listed), (args, shown), recorded)
                    .await
            }
            Target::WriteStdin => {
                let args: WriteArgs = parse(target, args)?;
                *recorded = Some(ToolRef::new(NO_SKILL, Target::WRITE_STDIN));
                self.write_stdin(&run, &context, args, exec).await
            }
            _ => {
                let args: CloseArgs = parse(target, args)?;
                *recorded = Some(ToolRef::new(NO_SKILL, Target::CLOSE_CONTEXT));
                let closed = self
                    .close_sessions(&context.context_id, args.session_id.as_deref())
                    .await?;
                Ok(ToolResult::ok(run.call_id, json!({"closed": closed}), 0))
            }
        }
    }

    async fn exec_command(
        &self,
        loaded: &Loaded,
        run: Run<'_>,
        (context, listed): (ContextTools, Option<WorkDir>),
        (args, shown): (ExecArgs, Value),
        recorded: &mut Option<ToolRef>,
    ) -> Result<ToolResult, CallError> {
        let exec = &loaded.config.exec;
        check_cmd(&args.cmd)?;
        // The skill named, else the context's one pinned skill.
        let only_pin = || (context.pinned.len() == 1).then(|| context.pinned[0].name.clone());
        let skill_name = args.skill.clone().or_else(only_pin);
        *recorded = Some(ToolRef::new(
            skill_name.as_deref().unwrap_or(NO_SKILL),
            Target::EXEC_COMMAND,
        ));
        super::envelope::in_context(Some(&context), &Target::ExecCommand, skill_name.as_deref())?;
        let admitted = self.admit_exec(
            loaded,
            &run.origin.caller,
            &context,
            skill_name.as_deref(),
            args.skill.is_none(),
        )?;
        let transport = self.session_transport(&admitted.skill)?;
        self.approve(run.origin, &admitted, &shown, run.trail)
            .await?;
        let session_id = format!("sess_{}", random::hex(self.rng.as_ref(), 16, "session id")?);
        let token = SecretValue(random::token(self.rng.as_ref(), "capability token")?);
        let (work, files) =
            (self.work_dir(&context.context_id, run.call_id, listed, &admitted)).await?;
        let skill = Arc::clone(&admitted.skill);
        let envelope = match &skill_name {
            Some(_) => self.envelope_of(&skill)?,
            None => super::envelope::CallEnvelope::none(),
        };
        let params = SessionExecParams {
            session_id: session_id.clone(),
            call_id: run.call_id.to_string(),
            capability_token: token.clone(),
            skill: skill_name.clone(),
            cmd: args.cmd,
            workdir: args.workdir,
            files: work,
            envelope: envelope.wire,
            yield_ms: yield_of(args.yield_ms),
            max_output_bytes: args.max_output_bytes.unwrap_or(exec.max_output_bytes),
            tty: args.tty,
            limits: limits_of(exec, skill_name.as_ref().map(|_| &*skill)),
            traceparent: run.trace.as_ref().map(|t| t.to_string()),
        };
        let active = Arc::new(
            ActiveCall::new(
                Arc::clone(&skill),
                admitted.tool.clone(),
                admitted.security,
                run.origin.clone(),
                token,
            )
            .in_run(run.trail.clone(), run.egress.clone())
            .with_files(Some(Arc::clone(&files)))
            .with_secrets(envelope.secrets),
        );
        let sent = self
            .send_exec(
                &run,
                Arc::clone(&transport),
                (Arc::clone(&skill), params),
                active,
            )
            .await;
        let (answer, at) = sent?;
        if answer.running {
            self.sessions.hold(
                session_id.clone(),
                Held {
                    context_id: context.context_id.clone(),
                    skill: skill_name.clone(),
                    caller: run.origin.caller.name().to_owned(),
                    transport,
                    at,
                    call_id: run.call_id.to_string(),
                    files: Arc::clone(&files),
                    started: Instant::now(),
                    last_used: Instant::now(),
                },
            );
        } else {
            self.in_flight.remove(run.call_id);
        }
        let mut data = answer_data(&answer);
        if answer.running {
            data["session_id"] = json!(session_id);
        }
        let mut result = ToolResult::ok(run.call_id, data, 0);
        result.files = Some(files.take_written());
        Ok(result)
    }

    /// Where a session under `skill` runs: the executors' process sandbox, or a container
    /// of its own for an `execution.sandbox: container` skill.
    fn session_transport(&self, skill: &Skill) -> Result<Arc<dyn ExecutorTransport>, CallError> {
        if skill.execution.sandbox != SandboxKind::Container {
            return Ok(Arc::clone(&self.transports.process));
        }
        self.transports
            .containers
            .clone()
            .ok_or_else(|| CallError::NoContainerEngine(skill.name.clone()))
    }

    /// Registers the command's call for its callbacks and hands it to `transport`; the
    /// call is forgotten again when nothing took it.
    async fn send_exec(
        &self,
        run: &Run<'_>,
        transport: Arc<dyn ExecutorTransport>,
        (skill, params): (Arc<Skill>, SessionExecParams),
        active: Arc<ActiveCall>,
    ) -> Result<(SessionAnswer, Placement), CallError> {
        self.in_flight.insert(run.call_id, active);
        let timeout = Duration::from_millis(params.yield_ms) + ANSWER_SLACK;
        let sent = Instant::now();
        let mut answer = transport.session_exec(skill, params, timeout).await;
        if let Some(stages) = answer.as_mut().ok().and_then(|(a, _)| a.stages.take()) {
            self.observe_executor_stages(sent.elapsed(), stages);
        }
        super::pipeline::Waits::add(&run.waits.transport_us, sent);
        answer.map_err(|e| {
            self.in_flight.remove(run.call_id);
            CallError::from_session(e)
        })
    }

    /// What `exec_command` runs under, admitted: the named or only pinned skill's envelope
    /// (in a container of its own when that skill's tools run in containers), or none; `[exec] approval =
    /// "always"` makes it a write; refused past the context's session limit.
    fn admit_exec(
        &self,
        loaded: &Loaded,
        caller: &Caller,
        context: &ContextTools,
        skill_name: Option<&str>,
        unnamed: bool,
    ) -> Result<Admitted, CallError> {
        let exec = &loaded.config.exec;
        let mut admitted = match skill_name {
            Some(name) => self.admit_envelope(loaded, caller, name, Target::EXEC_COMMAND)?,
            None => Admitted {
                skill: Arc::new(no_skill()),
                tool: Target::EXEC_COMMAND.to_string(),
                security: Security::Read,
                timeout_ms: exec.lifetime_ms,
            },
        };
        if context.pinned.is_empty() && unnamed {
            tracing::debug!(context = %context.context_id, "exec_command without a skill: no secrets");
        }
        if exec.approval == ExecApproval::Always && admitted.security == Security::Read {
            admitted.security = Security::Write;
        }
        if self.sessions.count_in(&context.context_id) >= exec.max_sessions_per_context {
            return Err(CallError::Builtin {
                kind: skillbox_protocol::result::ErrorKind::ResourceLimit,
                message: format!(
                    "context {:?} has {} sessions running ([exec] max_sessions_per_context); end one with close_context",
                    context.context_id, exec.max_sessions_per_context
                ),
            });
        }
        Ok(admitted)
    }

    /// Writes to a session of `context`, which it inherits the envelope of: the envelope's
    /// skill must still be one the context lends (the rule of [`super::envelope::in_context`]),
    /// so a skill unpinned since the session started lends it nothing more.
    async fn write_stdin(
        &self,
        run: &Run<'_>,
        context: &ContextTools,
        args: WriteArgs,
        exec: &ExecSection,
    ) -> Result<ToolResult, CallError> {
        let context_id = context.context_id.as_str();
        let found = self.sessions.held.lock().ok().and_then(|mut h| {
            let s = h.get_mut(&args.session_id)?;
            if s.context_id != context_id {
                return None;
            }
            s.last_used = Instant::now();
            Some((
                (Arc::clone(&s.transport), s.at.clone()),
                Arc::clone(&s.files),
                s.call_id.clone(),
                s.skill.clone(),
            ))
        });
        let Some(((transport, at), files, session_call, skill)) = found else {
            return Err(CallError::Builtin {
                kind: skillbox_protocol::result::ErrorKind::NotFound,
                message: format!(
                    "no session {:?} in context {context_id:?} (it ended, was closed, or belongs to another context)",
                    args.session_id
                ),
            });
        };
        super::envelope::in_context(Some(context), &Target::WriteStdin, skill.as_deref())?;
        let params = SessionWriteParams {
            session_id: args.session_id.clone(),
            chars: args.chars,
            yield_ms: yield_of(args.yield_ms),
            max_output_bytes: args.max_output_bytes.unwrap_or(exec.max_output_bytes),
        };
        let timeout = Duration::from_millis(params.yield_ms) + ANSWER_SLACK;
        let sent = Instant::now();
        let mut answer = transport.session_write(at.clone(), params, timeout).await;
        if let Some(stages) = answer.as_mut().ok().and_then(|a| a.stages.take()) {
            self.observe_executor_stages(sent.elapsed(), stages);
        }
        super::pipeline::Waits::add(&run.waits.transport_us, sent);
        let answer = match answer {
            Ok(a) => a,
            Err(e @ ClientError::Rpc(_)) => {
                self.forget_session(&args.session_id, &session_call);
                release(transport, at);
                return Err(CallError::from_session(e));
            }
            Err(e) => {
                self.forget_session(&args.session_id, &session_call);
                release(transport, at);
                return Err(CallError::Builtin {
                    kind: skillbox_protocol::result::ErrorKind::Unavailable,
                    message: session_gone(&args.session_id, &e),
                });
            }
        };
        if !answer.running {
            self.forget_session(&args.session_id, &session_call);
            release(transport, at);
        }
        let mut result = ToolResult::ok(run.call_id, answer_data(&answer), 0);
        result.files = Some(files.take_written());
        Ok(result)
    }

    /// Ends session `only` of `context_id` (or all of them), and every process in them;
    /// how many were running.
    pub(crate) async fn close_sessions(
        &self,
        context_id: &str,
        only: Option<&str>,
    ) -> Result<usize, CallError> {
        let taken = self
            .sessions
            .take(|id, s| s.context_id == context_id && only.is_none_or(|o| o == id));
        if let (Some(id), true) = (only, taken.is_empty()) {
            return Err(CallError::Builtin {
                kind: skillbox_protocol::result::ErrorKind::NotFound,
                message: format!("no session {id:?} in context {context_id:?}"),
            });
        }
        Ok(self.end_sessions(taken).await)
    }

    /// Ends every session `caller` (a bot, by name) started, in any context, and every
    /// process in them: its token was revoked. How many were running.
    pub(crate) async fn close_sessions_of(&self, caller: &str) -> usize {
        let taken = self.sessions.take(|_, s| s.caller == caller);
        self.end_sessions(taken).await
    }

    /// Ends sessions taken out of the table on the executors holding them.
    async fn end_sessions(&self, taken: Vec<(String, Held)>) -> usize {
        let mut closed = 0;
        for (id, held) in taken {
            self.in_flight.remove(&held.call_id);
            let params = SessionCloseParams {
                session_ids: vec![id.clone()],
            };
            match held
                .transport
                .session_close(held.at, params, ANSWER_SLACK)
                .await
            {
                Ok(r) => closed += r.closed.max(1),
                Err(e) => {
                    tracing::warn!(session = %id, error = %e, "the executor holding a session did not answer its close; its processes end with it");
                    closed += 1;
                }
            }
        }
        closed
    }

    fn forget_session(&self, session_id: &str, call_id: &str) {
        self.sessions.take(|id, _| id == session_id);
        self.in_flight.remove(call_id);
    }

    /// Forgets sessions past their lifetime or idle limit (their executor has ended them;
    /// a late `write_stdin` then hears that they ended).
    fn sweep_sessions(&self, exec: &ExecSection) {
        let idle = Duration::from_millis(exec.idle_timeout_ms);
        let life = Duration::from_millis(exec.lifetime_ms);
        for (_, held) in self
            .sessions
            .take(|_, s| s.last_used.elapsed() > idle || s.started.elapsed() > life)
        {
            self.in_flight.remove(&held.call_id);
            release(held.transport, held.at);
        }
    }
}

/// Lets the holder of a session the core forgot free what it keeps for it: a session's
/// container is removed (an executor of the pool has ended the session on its own).
fn release(transport: Arc<dyn ExecutorTransport>, at: Placement) {
    if let Placement::Container(session_id) = &at {
        let params = SessionCloseParams {
            session_ids: vec![session_id.clone()],
        };
        tokio::spawn(async move {
            let _ = transport.session_close(at, params, ANSWER_SLACK).await;
        });
    }
}

/// A session's limits from `[exec]`; its memory is its skill's when it runs under one.
fn limits_of(exec: &ExecSection, skill: Option<&Skill>) -> SessionLimits {
    SessionLimits {
        idle_timeout_ms: exec.idle_timeout_ms,
        lifetime_ms: exec.lifetime_ms,
        output_kept_bytes: exec.output_kept_bytes,
        memory_mb: skill.map_or(exec.memory_mb, |s| s.execution.memory_mb),
        quiet_ms: exec.quiet_ms,
    }
}

/// Refuses an empty command before anything is admitted.
fn check_cmd(cmd: &Command) -> Result<(), CallError> {
    match cmd {
        Command::Shell(s) if s.trim().is_empty() => {
            Err(invalid("exec_command: \"cmd\" is empty".into()))
        }
        Command::Argv(v) if v.is_empty() => {
            Err(invalid("exec_command: \"cmd\" is an empty list".into()))
        }
        _ => Ok(()),
    }
}

fn yield_of(asked: Option<u64>) -> u64 {
    asked.unwrap_or(DEFAULT_YIELD_MS).min(MAX_YIELD_MS)
}

fn answer_data(answer: &SessionAnswer) -> Value {
    let mut data = json!({"output": answer.output});
    if let Some(code) = answer.exit_code {
        data["exit_code"] = json!(code);
    }
    if answer.elided_bytes > 0 {
        data["elided_bytes"] = json!(answer.elided_bytes);
    }
    data
}

fn session_gone(session_id: &str, e: &ClientError) -> String {
    format!(
        "session {session_id:?} ended: the executor holding it did not answer ({e}); its processes are gone with it, and the context's files are intact up to its last answer"
    )
}

/// The envelope of a command run without a skill: no folder, no env, no network, no
/// tools; the `[exec]` limits.
fn no_skill() -> Skill {
    Skill {
        name: NO_SKILL.to_string(),
        version: None,
        description: String::new(),
        dir: std::path::PathBuf::new(),
        formats: Vec::new(),
        license: None,
        compatibility: None,
        allowed_tools: Vec::new(),
        routing: Default::default(),
        prerequisites: Default::default(),
        permissions: Default::default(),
        execution: Default::default(),
        tools: Vec::new(),
        body: None,
        dependencies: Default::default(),
        warnings: Vec::new(),
    }
}
