//! Warm starts (`execution.prestart: N`, docs/sandbox.md "Warm starts"): for each tool of
//! a skill that asks for them, the executor keeps N processes already started, each in a
//! complete, fresh per-call sandbox (its own user id, its own scratch dir, every limit,
//! Landlock, seccomp), blocked reading their request on stdin. A call takes one
//! ([`WarmPool::take`]) and the pool starts its replacement on a blocking thread; a process
//! is never used twice. [`WarmPool::clear`] (a skill reload, the executor's stop, the
//! pool's drop) kills every waiting process and releases its user id and scratch dir.
//!
//! A prestarted process cannot know its call when it starts: its `SKILLBOX_CALL_ID` is
//! [`PRESTARTED_CALL_ID`], the real id comes in the `tool.invoke` request, and a `plain`
//! tool's `SKILLBOX_ARGS_FILE` names a file written only when the call arrives. A call
//! that carries values for the skill's declared env names never takes a prestarted process
//! (those values are per call; a process started earlier cannot have them), nor does a
//! network call (its namespace is made for it): a skill that declares network gets none.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use skillbox_protocol::skill::{Skill, Tool, ToolProtocol};

use crate::launch::{launch_argv, skill_env};
use crate::sandbox::{
    ArgsFile, CallGuard, LaunchSpec, PreparedCall, Sandbox, SandboxChild, SandboxError,
};

/// `SKILLBOX_CALL_ID` of a prestarted process.
pub const PRESTARTED_CALL_ID: &str = "prestarted";

/// A started process waiting for its call.
#[derive(Debug)]
pub struct WarmProcess {
    /// The process; stdin, stdout and stderr piped and untouched.
    pub child: SandboxChild,
    /// Its user id and scratch dir.
    pub guard: CallGuard,
}

impl WarmProcess {
    /// Kills the process and releases its user id and scratch dir.
    pub fn end(mut self) {
        let pid = self.child.id();
        let _ = self.child.start_kill();
        self.guard.finish(pid);
    }
}

/// The processes kept started, per (skill, tool). Shared by the calls of one registry.
#[derive(Debug, Default)]
pub struct WarmPool {
    ready: Mutex<HashMap<(String, String), VecDeque<WarmProcess>>>,
    /// Set by [`WarmPool::clear`]: nothing is added any more (a replacement started
    /// meanwhile is killed at once).
    closed: AtomicBool,
    /// Start a replacement after each take (off in the one-shot `exec`).
    refill: AtomicBool,
}

type Key = (String, String);

fn key(skill: &str, tool: &str) -> Key {
    (skill.to_string(), tool.to_string())
}

impl WarmPool {
    /// Starts a replacement after every take from now on (a long-running executor).
    pub fn enable_refill(&self) {
        self.refill.store(true, Ordering::SeqCst);
    }

    /// Starts processes until every tool of every skill of `skills` that asks for
    /// prestarted processes has its `prestart` count waiting. Needs a tokio runtime.
    pub fn fill<'a>(&self, sandbox: &Sandbox, skills: impl IntoIterator<Item = &'a Skill>) {
        for skill in skills {
            // A call in a namespace needs it made for it: its skill's calls start cold.
            let cold = skill.permissions.is_network()
                || skill.execution.loopback
                || skill.execution.unix_sockets;
            let want = match !cold {
                true => usize::try_from(skill.execution.prestart).unwrap_or(0),
                false => 0,
            };
            for tool in &skill.tools {
                for _ in self.waiting(&skill.name, &tool.name)..want {
                    if let Err(e) = self.start_one(sandbox, skill, tool) {
                        tracing::warn!(skill = %skill.name, tool = %tool.name, error = %e, "cannot prestart a tool process");
                        break;
                    }
                }
            }
        }
    }

    /// Starts one process of `tool` in a fresh sandbox and adds it to the pool.
    pub fn start_one(
        &self,
        sandbox: &Sandbox,
        skill: &Skill,
        tool: &Tool,
    ) -> Result<(), SandboxError> {
        let total = self.pids().len();
        if total >= sandbox.config().max_prestarted {
            return Err(SandboxError::TooManyPrestarted(total));
        }
        let argv = launch_argv(sandbox.node_runner(), skill, tool);
        let PreparedCall { launch, guard, .. } = sandbox.prepare(LaunchSpec {
            deps: None,
            skill_dir: Some(&skill.dir),
            work: None,
            argv: &argv,
            env: skill_env(skill, &tool.name, PRESTARTED_CALL_ID),
            memory_mb: skill.execution.memory_mb,
            max_file_mb: skill.execution.max_file_mb,
            timeout_ms: skill.timeout_ms(tool),
            args_file: if tool.protocol == ToolProtocol::Plain {
                ArgsFile::Later
            } else {
                ArgsFile::None
            },
            network: None,
            unix_sockets: false,
            trust_pem: None,
        })?;
        let child = match sandbox.spawn(launch) {
            Ok(child) => child,
            Err(e) => {
                guard.finish(None);
                return Err(SandboxError::Spawn(e));
            }
        };
        let process = WarmProcess { child, guard };
        if self.closed.load(Ordering::SeqCst) {
            process.end();
            return Ok(());
        }
        match self.ready.lock() {
            Ok(mut ready) => ready
                .entry(key(&skill.name, &tool.name))
                .or_default()
                .push_back(process),
            Err(_) => process.end(),
        }
        Ok(())
    }

    /// A waiting process of `tool`, never handed out before; processes that exited while
    /// waiting are ended and skipped. When refill is on, a replacement is started on a
    /// blocking thread. Needs a tokio runtime.
    pub fn take<S: AsRef<Skill> + Send + Sync + 'static>(
        self: &Arc<Self>,
        sandbox: &Sandbox,
        skill: &Arc<S>,
        tool: &Tool,
    ) -> Option<WarmProcess> {
        let name = &(**skill).as_ref().name;
        let taken = loop {
            let next = self
                .ready
                .lock()
                .ok()?
                .get_mut(&key(name, &tool.name))?
                .pop_front()?;
            let mut next = next;
            match next.child.try_wait() {
                Ok(None) => break next,
                _ => next.end(),
            }
        };
        if self.refill.load(Ordering::SeqCst) && !self.closed.load(Ordering::SeqCst) {
            let (pool, sandbox, skill) = (Arc::clone(self), sandbox.clone(), Arc::clone(skill));
            let tool_name = tool.name.clone();
            tokio::task::spawn_blocking(move || {
                let skill: &Skill = (*skill).as_ref();
                let Some(tool) = skill.tool(&tool_name) else {
                    return;
                };
                if let Err(e) = pool.start_one(&sandbox, skill, tool) {
                    tracing::warn!(skill = %skill.name, tool = %tool_name, error = %e, "cannot prestart a tool process");
                }
            });
        }
        Some(taken)
    }

    /// Waits until every waiting process is blocked reading its stdin (`read(0, ...)` in
    /// `/proc/<pid>/syscall`), at most `limit`; false when the limit passed first (a tool
    /// that waits for input some other way, e.g. through epoll, is never seen so).
    pub async fn settled(&self, limit: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if self.pids().into_iter().all(reading_stdin) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// How many processes of `tool` are waiting.
    pub fn waiting(&self, skill: &str, tool: &str) -> usize {
        self.ready
            .lock()
            .map(|r| r.get(&key(skill, tool)).map_or(0, VecDeque::len))
            .unwrap_or(0)
    }

    /// The process ids of every waiting process.
    pub fn pids(&self) -> Vec<u32> {
        self.ready
            .lock()
            .map(|r| r.values().flatten().filter_map(|p| p.child.id()).collect())
            .unwrap_or_default()
    }

    /// Kills every waiting process and releases its user id and scratch dir; the pool
    /// takes no new process after this.
    pub fn clear(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let drained: Vec<WarmProcess> = match self.ready.lock() {
            Ok(mut ready) => ready.drain().flat_map(|(_, v)| v).collect(),
            Err(_) => Vec::new(),
        };
        for process in drained {
            process.end();
        }
    }
}

impl Drop for WarmPool {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Whether `pid` sits in `read(0, ...)`.
fn reading_stdin(pid: u32) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/syscall")) else {
        return false;
    };
    let mut fields = text.split_whitespace();
    let nr = fields.next().and_then(|n| n.parse::<i64>().ok());
    let fd = fields.next();
    nr == Some(libc::SYS_read) && fd == Some("0x0")
}
