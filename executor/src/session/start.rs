//! Starting a session: the skill's envelope, the command line and the stdio (a merged
//! pipe or a pseudo-terminal) make its plan ([`Plan::session`]), launched as every process
//! is ([`launch::launch`]: a work folder of the scratch dir as the working directory, the
//! context's files laid out; under a skill with network its namespace, whose connections
//! are relayed for the session's life); then its task.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skillbox_protocol::session::{Command, SessionExecParams};
use tokio::io::unix::AsyncFd;

use super::process::{self, EndReason, Input, Output, Shared};
use super::{sync, Files, Session, SessionError, Sessions};
use crate::broker::CapabilityBroker;
use crate::launch::{self, Launched, Plan};
use crate::registry::Registry;
use crate::sandbox::{ChildStdio, SandboxChild};
use crate::workdir;

/// The line a session's output ends with when the kernel killed one of its processes for
/// passing the memory limit: the limit, and where it is raised.
fn oom_note(memory_mb: u64, under_skill: bool) -> String {
    let raise = match under_skill {
        true => "raise execution.memory_mb in the skill's manifest",
        false => "raise [exec] memory_mb in skillbox.toml",
    };
    format!(
        "\n[skillbox: resource_limit: memory limit of {memory_mb} MiB reached (memory_mb: {raise}); the kernel killed a process of the session that passed it]\n"
    )
}

impl<B: CapabilityBroker + 'static> Sessions<B> {
    /// Prepares the sandbox, lays out the files, spawns, and starts the session's task.
    pub(super) async fn start(
        &self,
        registry: &Registry,
        p: &SessionExecParams,
    ) -> Result<Arc<Session>, SessionError> {
        let registered = match &p.skill {
            Some(name) => Some(
                registry
                    .skill(name)
                    .ok_or_else(|| SessionError::NoSkill(name.clone()))?,
            ),
            None => None,
        };
        let skill = registered.as_ref().map(|r| &r.skill);
        let sub = work_subdir(p)?;
        let argv = command_argv(p)?;
        let (stdio, terminal) = if p.tty {
            let (master, slave) = process::open_terminal().map_err(SessionError::Spawn)?;
            (ChildStdio::Terminal(slave), Some(master))
        } else {
            (ChildStdio::Merged, None)
        };
        let deps = match (&p.envelope.deps, skill) {
            (Some(digest), Some(skill)) => Some(
                crate::deps::DepsDir::for_call(&self.sandbox, &skill.name, digest)
                    .map_err(|e| SessionError::Invalid(e.to_string()))?,
            ),
            _ => None,
        };
        let plan = Plan::session(p, skill, argv, sub, stdio, deps.map(|d| d.path));
        let call = plan.call.clone();
        let Launched {
            mut child,
            guard,
            listener,
            baseline,
            work,
        } = launch::launch(&self.sandbox, &*self.broker, plan).await?;
        let (baseline, work) = (baseline.unwrap_or_default(), work.unwrap_or_default());
        let (input, output) = session_io(terminal, &mut child)?;
        let (leader, watcher) = (child.id(), output.watcher());
        let shared = Arc::new(Shared::new(p.limits.output_kept_bytes));
        let files = Arc::new(Files {
            call,
            work,
            limits: p.files.without_files(),
            baseline: tokio::sync::Mutex::new(baseline),
        });
        let (broker, task_files, task_shared) = (
            Arc::clone(&self.broker),
            Arc::clone(&files),
            Arc::clone(&shared),
        );
        // A folder synced whole at the end is kept for the context's next call, when the
        // session had a user of its own (its end kills every process of that user first).
        let uid = guard.uid();
        let shelf = workdir::WorkShelf::of(self.sandbox.blobs());
        let finish = move |_why: EndReason| async move {
            let (note, synced) = sync(&*broker, &task_files).await;
            if let Some(note) = note {
                if let Ok(mut out) = task_shared.out.lock() {
                    out.push(note.as_bytes());
                }
            }
            let context =
                (task_files.limits.context_id.clone()).filter(|_| uid.is_some() && synced);
            let (context, shelf) = (context?, shelf?);
            // The session ended: no sync needs its baseline again.
            let baseline = std::mem::take(&mut *task_files.baseline.lock().await);
            let work = task_files.work.clone();
            let keep: process::Keep = Box::new(move |_| shelf.put(&context, &work, baseline, uid));
            Some(keep)
        };
        let running = process::run(
            child,
            guard,
            output,
            Arc::clone(&shared),
            Duration::from_millis(p.limits.idle_timeout_ms),
            Duration::from_millis(p.limits.lifetime_ms),
            oom_note(p.limits.memory_mb, skill.is_some()),
            finish,
        );
        let (relay_broker, relay_call) = (Arc::clone(&self.broker), files.call.clone());
        // The relay lives exactly as long as the session's process task.
        let task = tokio::spawn(async move {
            launch::relay_while(listener, &*relay_broker, &relay_call, running).await;
        });
        Ok(Arc::new(Session {
            shared,
            input,
            leader,
            watcher,
            quiet: Duration::from_millis(p.limits.quiet_ms.clamp(1, 1000)),
            files,
            task: Mutex::new(Some(task)),
        }))
    }
}

/// The folder under the work folder the command starts in, from the params' `workdir`
/// (empty: the work folder itself); a path that could leave it is refused.
fn work_subdir(p: &SessionExecParams) -> Result<PathBuf, SessionError> {
    match p.workdir.as_deref().filter(|w| !w.is_empty()) {
        Some(w) => {
            let parts = workdir::path_segments(w)
                .map_err(|why| SessionError::Invalid(format!("workdir {w:?} is refused: {why}")))?;
            Ok(parts.iter().collect::<PathBuf>())
        }
        None => Ok(PathBuf::new()),
    }
}

/// The command line: a shell line runs under `sh -c`, a list as given (never empty).
fn command_argv(p: &SessionExecParams) -> Result<Vec<String>, SessionError> {
    match &p.cmd {
        Command::Shell(text) => Ok(vec!["sh".to_string(), "-c".to_string(), text.clone()]),
        Command::Argv(v) if !v.is_empty() => Ok(v.clone()),
        Command::Argv(_) => Err(SessionError::Invalid("cmd is an empty list".into())),
    }
}

/// The session's input and output: the terminal's master side when it has one, else the
/// child's stdin and merged stdout pipes.
fn session_io(
    terminal: Option<OwnedFd>,
    child: &mut SandboxChild,
) -> Result<(Input, Output), SessionError> {
    match terminal {
        Some(master) => {
            let interest = tokio::io::Interest::READABLE | tokio::io::Interest::WRITABLE;
            // SAFETY: the OwnedFd stays open and names the same terminal until it is
            // dropped with the AsyncFd.
            let fd = unsafe { AsyncFd::register_with_interest(master, interest) }
                .map_err(|e| SessionError::Spawn(e.into_parts().1))?;
            let fd = Arc::new(fd);
            Ok((Input::Terminal(Arc::clone(&fd)), Output::Terminal(fd)))
        }
        None => {
            let stdin = child.stdin.take();
            let Some(stdout) = child.stdout.take() else {
                return Err(SessionError::Spawn(std::io::Error::other(
                    "the session's output was not piped",
                )));
            };
            Ok((
                Input::Pipe(tokio::sync::Mutex::new(stdin)),
                Output::Pipe(stdout),
            ))
        }
    }
}
