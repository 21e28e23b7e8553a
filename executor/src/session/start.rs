//! Starting a session: the skill's envelope, the command line, the sandbox prepared as
//! for a call (a work folder of the scratch dir as the working directory; under a skill
//! with network, its namespace and the relay of its connections for the session's life,
//! [`crate::egress`]), the context's files laid out, the process spawned on a merged pipe
//! or a pseudo-terminal, and its task.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skillbox_protocol::session::{Command, SessionExecParams};
use tokio::io::unix::AsyncFd;

use super::process::{self, EndReason, Input, Output, Shared};
use super::{sync, Files, Session, SessionError, Sessions};
use crate::broker::{CallInfo, CapabilityBroker};
use crate::egress;
use crate::registry::Registry;
use crate::sandbox::{self, ChildStdio, LaunchSpec, PreparedCall};
use crate::workdir;

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
        let sub = match p.workdir.as_deref().filter(|w| !w.is_empty()) {
            Some(w) => {
                let parts = workdir::path_segments(w).map_err(|why| {
                    SessionError::Invalid(format!("workdir {w:?} is refused: {why}"))
                })?;
                parts.iter().collect::<PathBuf>()
            }
            None => PathBuf::new(),
        };
        let argv = match &p.cmd {
            Command::Shell(text) => vec!["sh".to_string(), "-c".to_string(), text.clone()],
            Command::Argv(v) if !v.is_empty() => v.clone(),
            Command::Argv(_) => return Err(SessionError::Invalid("cmd is an empty list".into())),
        };
        let mut env = vec![("SKILLBOX_CALL_ID".to_string(), p.call_id.clone())];
        if let Some(skill) = skill {
            env.extend(crate::warm::call_env(skill, "exec_command", &p.call_id));
            for (name, value) in &p.env {
                if crate::call::may_receive(skill, &p.granted_env, name) {
                    env.push((name.clone(), value.0.clone()));
                }
            }
        }
        let (stdio, terminal) = if p.tty {
            let (master, slave) = process::open_terminal().map_err(SessionError::Spawn)?;
            env.push(("TERM".into(), "xterm".into()));
            (ChildStdio::Terminal(slave), Some(master))
        } else {
            (ChildStdio::Merged, None)
        };
        // A session under a skill that declares (or is granted) hosts has the network of a
        // call of that skill.
        let network =
            skill.is_some_and(|s| s.permissions.is_network()) || !p.granted_network.is_empty();
        let deps = match (&p.deps, skill) {
            (Some(digest), Some(skill)) => Some(
                crate::deps::DepsDir::for_call(&self.sandbox, &skill.name, digest)
                    .map_err(|e| SessionError::Invalid(e.to_string()))?,
            ),
            _ => None,
        };
        let (namespace, listener) = match network {
            true => match self.sandbox.call_network().await? {
                Some(net) => {
                    let listener = tokio::net::TcpListener::from_std(net.listener)
                        .map_err(SessionError::Spawn)?;
                    (Some(net.namespace), Some(listener))
                }
                None => (None, None),
            },
            false => (None, None),
        };
        let PreparedCall { launch, guard, .. } = self.sandbox.prepare(LaunchSpec {
            deps: deps.as_ref().map(|d| d.path.as_path()),
            skill_dir: skill.map(|s| s.dir.as_path()),
            work: Some(&sub),
            argv: &argv,
            env,
            memory_mb: p.limits.memory_mb,
            timeout_ms: p.limits.lifetime_ms,
            args_file: sandbox::ArgsFile::None,
            network: namespace,
            trust_pem: p.trust_pem.as_deref(),
        })?;
        let call = CallInfo {
            call_id: p.call_id.clone(),
            skill: p.skill.clone().unwrap_or_default(),
            tool: "exec_command".into(),
            capability_token: p.capability_token.clone(),
        };
        let work = guard.scratch().join(sandbox::WORK_DIR);
        let laid = workdir::lay_out(
            &*self.broker,
            &call,
            self.sandbox.blobs(),
            &work,
            guard.uid(),
            &p.files.files,
        )
        .await;
        let baseline = match laid {
            Ok(b) => b,
            Err(e) => {
                guard.finish(None);
                return Err(e.into());
            }
        };
        if !work.join(&sub).is_dir() {
            guard.finish(None);
            return Err(SessionError::Invalid(format!(
                "workdir {:?} is not a folder of the context",
                sub.display()
            )));
        }
        let mut child = match self.sandbox.spawn_async(launch.with_stdio(stdio)).await {
            Ok(c) => c,
            Err(e) => {
                guard.finish(None);
                return Err(SessionError::Spawn(e));
            }
        };
        let (input, output) = match terminal {
            Some(master) => {
                let interest = tokio::io::Interest::READABLE | tokio::io::Interest::WRITABLE;
                // SAFETY: the OwnedFd stays open and names the same terminal until it is
                // dropped with the AsyncFd.
                let fd = unsafe { AsyncFd::register_with_interest(master, interest) }
                    .map_err(|e| SessionError::Spawn(e.into_parts().1))?;
                let fd = Arc::new(fd);
                (Input::Terminal(Arc::clone(&fd)), Output::Terminal(fd))
            }
            None => {
                let stdin = child.stdin.take();
                let Some(stdout) = child.stdout.take() else {
                    return Err(SessionError::Spawn(std::io::Error::other(
                        "the session's output was not piped",
                    )));
                };
                (
                    Input::Pipe(tokio::sync::Mutex::new(stdin)),
                    Output::Pipe(stdout),
                )
            }
        };
        let shared = Arc::new(Shared::new(p.limits.output_kept_bytes));
        let files = Arc::new(Files {
            call,
            work,
            limits: p.files.clone(),
            baseline: tokio::sync::Mutex::new(baseline),
        });
        let (broker, task_files, task_shared) = (
            Arc::clone(&self.broker),
            Arc::clone(&files),
            Arc::clone(&shared),
        );
        let finish = move |_why: EndReason| async move {
            if let Some(note) = sync(&*broker, &task_files).await {
                if let Ok(mut out) = task_shared.out.lock() {
                    out.push(note.as_bytes());
                }
            }
        };
        let running = process::run(
            child,
            guard,
            output,
            Arc::clone(&shared),
            Duration::from_millis(p.limits.idle_timeout_ms),
            Duration::from_millis(p.limits.lifetime_ms),
            finish,
        );
        let (relay_broker, relay_call) = (Arc::clone(&self.broker), files.call.clone());
        // The relay lives exactly as long as the session's process task.
        let task = tokio::spawn(async move {
            let relay = async {
                match listener {
                    Some(l) => egress::relay(l, &*relay_broker, &relay_call).await,
                    None => std::future::pending::<std::convert::Infallible>().await,
                }
            };
            tokio::select! {
                () = running => {}
                never = relay => match never {},
            }
        });
        Ok(Arc::new(Session {
            shared,
            input,
            files,
            task: Mutex::new(Some(task)),
        }))
    }
}
