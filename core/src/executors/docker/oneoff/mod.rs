//! One-off containers for the calls of skills with `execution.sandbox: container`. Each
//! call gets a fresh container of the executor image running
//! `skillbox-executor exec --stdio` ([`spec`]: no network at all, read-only root, every
//! capability dropped but the five the per-call user needs, `no-new-privileges`, memory,
//! pids and CPU limits, no log kept, only this skill's folder mounted). The kernel sandbox
//! of the executor applies inside it as everywhere.
//!
//! The request (with the call's env values and capability token) goes in on the
//! container's stdin, never on its command line or environment, where `docker inspect`
//! would show it. The tool's capability requests come back on stdout as JSON-RPC
//! `core.fetch`/`core.sign`/`core.readFile` requests and are answered by the same
//! callback handler the mutual-TLS channel uses ([`relay`]), so they are judged by the
//! call id and token the core issued, like any other. The container is removed however
//! the call ends, the caller hanging up included; at most `[docker] max_containers` run
//! at once. A command session of such a skill gets a container the same way, kept while
//! the session runs ([`session`]).

pub mod relay;
mod session;
pub mod slots;
pub mod spec;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use skillbox_channel::server::RpcHandler;
use skillbox_protocol::methods::ToolExecuteParams;
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::skill::Skill;

use super::Engine;
use crate::state::config::DockerSection;
use slots::{Slot, Slots};
use spec::{HostSkills, Spec};

/// Label on every per-call container (value: the call id), so leftovers can be found.
pub const CALL_LABEL: &str = "dev.skillbox.call";
/// Label naming the core that made a per-call container ([`spec::owner`]), so a core
/// sweeps only its own leftovers.
pub const OWNER_LABEL: &str = "dev.skillbox.owner";
/// Time a container gets on top of the tool's timeout: creating and starting it.
const START_GRACE: Duration = Duration::from_secs(20);

/// Why a container call failed before it produced a result.
#[derive(Debug, thiserror::Error)]
pub enum OneOffError {
    /// `[docker] max_containers` calls already run in containers.
    #[error("{0} calls already run in per-call containers ([docker] max_containers); retry later")]
    Busy(usize),
    /// The skill's folder has no path on the engine's host.
    #[error("{0} is not on a mount the Docker engine can see; set [docker] skills_host_dir to the skills root's path on the host")]
    NoHostPath(PathBuf),
    /// `[docker] skills_host_dir` is relative (Docker would take it for a volume name).
    #[error("[docker] skills_host_dir = {0:?} must be an absolute path on the Docker host")]
    HostDirNotAbsolute(PathBuf),
    /// An engine request failed.
    #[error("Docker {step}: {source}")]
    Api {
        /// What the core asked the engine.
        step: &'static str,
        /// bollard's error.
        source: bollard::errors::Error,
    },
    /// Writing to the container's stdin failed.
    #[error("writing to the call's container: {0}")]
    Stdin(std::io::Error),
    /// The tool's time (plus the container's start) ran out.
    #[error("the call's container did not finish within {0:?} (execution.timeout_ms plus 20 s to start); it was removed")]
    Timeout(Duration),
    /// The engine's OOM killer ended the container.
    #[error("the call's container ran out of its {0} MiB of memory; raise execution.memory_mb or [docker] container_memory_overhead_mb")]
    OutOfMemory(u64),
    /// The container ended without a result line.
    #[error(
        "the call's container exited (code {exit_code}) without a result; its stderr: {stderr}"
    )]
    NoResult {
        /// The container's exit code (-1 when unknown).
        exit_code: i64,
        /// The tail of its stderr.
        stderr: String,
    },
    /// A line on stdout that is not the relay protocol.
    #[error("the call's container wrote something that is not the relay protocol: {0}")]
    Protocol(String),
    /// The task running the call failed.
    #[error("the call's container task failed: {0}")]
    Task(String),
}

impl OneOffError {
    /// The `error_kind` of the call.
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            Self::Timeout(_) => ErrorKind::Timeout,
            Self::OutOfMemory(_) => ErrorKind::ResourceLimit,
            Self::Protocol(_) => ErrorKind::Protocol,
            Self::NoResult { .. } => ErrorKind::Sandbox,
            Self::Busy(_)
            | Self::NoHostPath(_)
            | Self::HostDirNotAbsolute(_)
            | Self::Api { .. }
            | Self::Stdin(_)
            | Self::Task(_) => ErrorKind::Unavailable,
        }
    }
}

/// Runs calls in one-off containers.
pub struct ContainerRunner {
    engine: Engine,
    spec: Spec,
    skills: HostSkills,
    owner: String,
    /// The `[docker] max_containers` slots, each with user ids of its own ([`slots`]).
    slots: Arc<Slots>,
    max_containers: usize,
    callbacks: Arc<dyn RpcHandler>,
    /// The containers of running sessions, by session id.
    sessions: std::sync::Mutex<HashMap<String, Arc<session::SessionContainer>>>,
}

impl std::fmt::Debug for ContainerRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerRunner")
            .field("spec", &self.spec)
            .field("skills", &self.skills)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

impl ContainerRunner {
    /// A runner on `engine` for skills under `skills_root` (the core's path), for the
    /// core whose state is in `state_dir`; the calls' capability requests go to
    /// `callbacks`.
    pub fn new(
        engine: Engine,
        skills_root: &Path,
        state_dir: &Path,
        config: &DockerSection,
        callbacks: Arc<dyn RpcHandler>,
    ) -> Self {
        Self {
            owner: spec::owner(&engine, state_dir),
            engine,
            spec: Spec::from_config(config),
            skills: HostSkills {
                root: skills_root.to_path_buf(),
                configured: (!config.skills_host_dir.is_empty())
                    .then(|| PathBuf::from(&config.skills_host_dir)),
            },
            slots: Slots::new(config.max_containers),
            max_containers: config.max_containers,
            callbacks,
            sessions: std::sync::Mutex::default(),
        }
    }

    /// Removes per-call containers this core left behind (it died mid-call).
    pub async fn sweep(&self) {
        let filters = HashMap::from([(
            "label",
            vec![
                CALL_LABEL.to_string(),
                format!("{OWNER_LABEL}={}", self.owner),
            ],
        )]);
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        match self.engine.docker.list_containers(Some(options)).await {
            Ok(left) => {
                for c in left.into_iter().filter_map(|c| c.id) {
                    tracing::warn!(container = %c, "removing a per-call container left behind");
                    self.remove(&c).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot list per-call containers left behind"),
        }
    }

    /// Runs one call in a fresh container and removes it. The call runs in a task of its
    /// own, so the container is removed even when the caller stops waiting.
    pub async fn run(
        self: &Arc<Self>,
        skill: Arc<Skill>,
        params: ToolExecuteParams,
        tool_timeout: Duration,
    ) -> Result<ToolResult, OneOffError> {
        let slot = self
            .slots
            .take()
            .ok_or(OneOffError::Busy(self.max_containers))?;
        let runner = Arc::clone(self);
        tokio::spawn(async move { runner.run_owned(&skill, params, tool_timeout, &slot).await })
            .await
            .map_err(|e| OneOffError::Task(e.to_string()))?
    }

    async fn run_owned(
        &self,
        skill: &Skill,
        params: ToolExecuteParams,
        tool_timeout: Duration,
        slot: &Slot,
    ) -> Result<ToolResult, OneOffError> {
        let name = format!("skillbox-call-{}", params.call_id);
        let id = self.create(skill, &name, &params.call_id, slot).await?;
        let limit = tool_timeout + START_GRACE;
        let outcome = match tokio::time::timeout(limit, self.converse(&id, &params)).await {
            Ok(Err(OneOffError::NoResult { stderr, .. })) => {
                Err(self.why_no_result(&id, skill, stderr).await)
            }
            Ok(r) => r,
            Err(_) => Err(OneOffError::Timeout(limit)),
        };
        self.remove(&id).await;
        outcome
    }

    /// Creates the container `name` for call `call_id` of `skill` in `slot` (not started
    /// yet).
    async fn create(
        &self,
        skill: &Skill,
        name: &str,
        call_id: &str,
        slot: &Slot,
    ) -> Result<String, OneOffError> {
        let mounts = self.skills.mounts(&self.engine, skill)?;
        let options = CreateContainerOptionsBuilder::new().name(name).build();
        let body = self
            .spec
            .body(skill, mounts, call_id, &self.owner, slot.uid_base());
        Ok(self
            .engine
            .docker
            .create_container(Some(options), body)
            .await
            .map_err(|source| OneOffError::Api {
                step: "creating the call's container (is the executor image built? docker/build.sh; [docker] executor_image)",
                source,
            })?
            .id)
    }

    /// A container that ended without a result: the OOM killer, or its exit code.
    async fn why_no_result(&self, id: &str, skill: &Skill, stderr: String) -> OneOffError {
        let state = match self.engine.docker.inspect_container(id, None).await {
            Ok(c) => c.state,
            Err(_) => None,
        };
        if state.as_ref().and_then(|s| s.oom_killed) == Some(true) {
            return OneOffError::OutOfMemory(self.spec.memory_mb(skill));
        }
        OneOffError::NoResult {
            exit_code: state.and_then(|s| s.exit_code).unwrap_or(-1),
            stderr,
        }
    }

    async fn remove(&self, id: &str) {
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        match self.engine.docker.remove_container(id, Some(options)).await {
            Ok(()) => {}
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {}
            Err(e) => {
                tracing::warn!(container = %id, error = %e, "cannot remove a per-call container")
            }
        }
    }
}
