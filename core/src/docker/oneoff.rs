//! One-off containers for the calls of skills with `execution.sandbox: container`. Each
//! call gets a fresh container of the executor image running
//! `skillbox-executor exec --stdio`: no network at all, read-only root, every capability
//! dropped but the five the per-call user needs (docker/README.md), `no-new-privileges`,
//! memory, pids and CPU limits, and only this skill's folder mounted (read-only). The
//! kernel sandbox of the executor applies inside it as everywhere.
//!
//! The request (with the call's env values and capability token) goes in on the
//! container's stdin, never on its command line or environment, where `docker inspect`
//! would show it. The tool's capability requests come back on stdout as JSON-RPC
//! `core.fetch`/`core.sign`/`core.readFile` requests and are answered by the same
//! callback handler the mutual-TLS channel uses, so they are judged by the call id and
//! token the core issued, like any other. The container is removed however the call ends.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, HealthConfig, HostConfig};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use futures_util::StreamExt;
use skillbox_protocol::channel::server::RpcHandler;
use skillbox_protocol::jsonrpc::{self, code, ErrorObject, Id, Message, Request, Response};
use skillbox_protocol::methods::{method, ToolExecuteParams};
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::skill::Skill;
use tokio::io::AsyncWriteExt;

use super::Engine;
use crate::config::DockerSection;

/// Label on every per-call container (value: the call id), so leftovers can be found.
pub const CALL_LABEL: &str = "dev.skillbox.call";
/// Label naming the core that made a per-call container (its own container id, or the
/// state folder of a core on the host), so a core sweeps only its own leftovers.
pub const OWNER_LABEL: &str = "dev.skillbox.owner";
/// Time a container gets on top of the tool's timeout: creating and starting it.
const START_GRACE: Duration = Duration::from_secs(20);
/// The capabilities the executor needs to switch a call to its own user (docker/README.md).
const EXECUTOR_CAPS: [&str; 5] = ["SETUID", "SETGID", "SETPCAP", "CHOWN", "DAC_OVERRIDE"];
/// Most stderr kept for an error message.
const STDERR_TAIL: usize = 4096;

/// Why a container call failed before it produced a result.
#[derive(Debug, thiserror::Error)]
pub enum OneOffError {
    /// The skill's folder has no path on the engine's host.
    #[error("the skill folder {0} is not on a mount the Docker engine can see; set [docker] skills_host_dir")]
    NoHostPath(PathBuf),
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
    #[error("the call's container did not finish within {0:?}; it was killed")]
    Timeout(Duration),
    /// The container ended without a result line.
    #[error("the call's container ended without a result: {stderr}")]
    NoResult {
        /// The tail of its stderr.
        stderr: String,
    },
    /// A line on stdout that is not the relay protocol.
    #[error("the call's container wrote something that is not JSON-RPC: {0}")]
    Protocol(String),
}

impl OneOffError {
    /// The `error_kind` of the call.
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            Self::Timeout(_) => ErrorKind::Timeout,
            Self::Protocol(_) => ErrorKind::Protocol,
            Self::NoResult { .. } => ErrorKind::Sandbox,
            Self::NoHostPath(_) | Self::Api { .. } | Self::Stdin(_) => ErrorKind::Unavailable,
        }
    }
}

/// Runs calls in one-off containers.
pub struct ContainerRunner {
    engine: Engine,
    image: String,
    skills_root: PathBuf,
    owner: String,
    skills_host_dir: Option<PathBuf>,
    overhead_mb: u64,
    pids: i64,
    nano_cpus: i64,
    callbacks: OnceLock<Arc<dyn RpcHandler>>,
}

impl std::fmt::Debug for ContainerRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainerRunner")
            .field("image", &self.image)
            .field("skills_root", &self.skills_root)
            .field("skills_host_dir", &self.skills_host_dir)
            .finish_non_exhaustive()
    }
}

impl ContainerRunner {
    /// A runner on `engine` for skills under `skills_root` (the core's path), for the
    /// core whose state is in `state_dir`.
    pub fn new(
        engine: Engine,
        skills_root: &Path,
        state_dir: &Path,
        config: &DockerSection,
    ) -> Self {
        let owner = match &engine.own {
            Some(own) => own.id.clone(),
            None => format!(
                "host:{}",
                std::fs::canonicalize(state_dir)
                    .unwrap_or_else(|_| state_dir.to_path_buf())
                    .display()
            ),
        };
        Self {
            owner,
            engine,
            image: config.executor_image.clone(),
            skills_root: skills_root.to_path_buf(),
            skills_host_dir: (!config.skills_host_dir.is_empty())
                .then(|| PathBuf::from(&config.skills_host_dir)),
            overhead_mb: config.container_memory_overhead_mb,
            pids: config.container_pids,
            nano_cpus: (config.container_cpus * 1e9) as i64,
            callbacks: OnceLock::new(),
        }
    }

    /// Where the capability requests of container calls go (set once, at start).
    pub fn set_callbacks(&self, callbacks: Arc<dyn RpcHandler>) {
        let _ = self.callbacks.set(callbacks);
    }

    /// Removes per-call containers a previous core left behind (it died mid-call).
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
        let Ok(left) = self.engine.docker.list_containers(Some(options)).await else {
            return;
        };
        for c in left.into_iter().filter_map(|c| c.id) {
            tracing::warn!(container = %c, "removing a per-call container left behind");
            self.remove(&c).await;
        }
    }

    fn host_dir(&self, skill: &Skill) -> Result<PathBuf, OneOffError> {
        let rel = skill
            .dir
            .strip_prefix(&self.skills_root)
            .map_err(|_| OneOffError::NoHostPath(skill.dir.clone()))?;
        match &self.skills_host_dir {
            Some(host) => Ok(host.join(rel)),
            None => self
                .engine
                .host_path(&skill.dir)
                .ok_or_else(|| OneOffError::NoHostPath(skill.dir.clone())),
        }
    }

    fn body(&self, skill: &Skill, host_dir: &Path, call_id: &str) -> ContainerCreateBody {
        let memory = i64::try_from((skill.execution.memory_mb + self.overhead_mb) * 1024 * 1024)
            .unwrap_or(i64::MAX);
        ContainerCreateBody {
            image: Some(self.image.clone()),
            entrypoint: Some(vec!["skillbox-executor".into()]),
            cmd: Some(vec![
                "exec".into(),
                "--stdio".into(),
                "--skills".into(),
                "/skills".into(),
            ]),
            user: Some("0:0".into()),
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            open_stdin: Some(true),
            stdin_once: Some(true),
            tty: Some(false),
            env: Some(vec!["RUST_LOG=warn".into()]),
            network_disabled: Some(true),
            healthcheck: Some(HealthConfig {
                test: Some(vec!["NONE".into()]),
                ..HealthConfig::default()
            }),
            labels: Some(HashMap::from([
                (CALL_LABEL.to_string(), call_id.to_string()),
                ("dev.skillbox.skill".to_string(), skill.name.clone()),
                (OWNER_LABEL.to_string(), self.owner.clone()),
            ])),
            host_config: Some(HostConfig {
                binds: Some(vec![format!(
                    "{}:/skills/{}:ro",
                    host_dir.display(),
                    skill.name
                )]),
                network_mode: Some("none".into()),
                readonly_rootfs: Some(true),
                cap_drop: Some(vec!["ALL".into()]),
                cap_add: Some(EXECUTOR_CAPS.iter().map(|c| c.to_string()).collect()),
                security_opt: Some(vec!["no-new-privileges:true".into()]),
                memory: Some(memory),
                memory_swap: Some(memory),
                pids_limit: Some(self.pids),
                nano_cpus: Some(self.nano_cpus),
                init: Some(true),
                tmpfs: Some(HashMap::from([
                    ("/tmp".to_string(), "size=64m,mode=1777".to_string()),
                    ("/run".to_string(), "size=1m,mode=0755".to_string()),
                ])),
                ..HostConfig::default()
            }),
            ..ContainerCreateBody::default()
        }
    }

    /// Runs one call in a fresh container and removes it.
    pub async fn run(
        &self,
        skill: &Skill,
        params: ToolExecuteParams,
        tool_timeout: Duration,
    ) -> Result<ToolResult, OneOffError> {
        let host_dir = self.host_dir(skill)?;
        let name = format!("skillbox-call-{}", params.call_id);
        let options = CreateContainerOptionsBuilder::new().name(&name).build();
        let created = self
            .engine
            .docker
            .create_container(Some(options), self.body(skill, &host_dir, &params.call_id))
            .await
            .map_err(|source| OneOffError::Api {
                step:
                    "creating the call's container (is the executor image built? docker/build.sh)",
                source,
            })?;
        let id = created.id;
        let limit = tool_timeout + START_GRACE;
        let outcome = tokio::time::timeout(limit, self.converse(&id, &params)).await;
        self.remove(&id).await;
        match outcome {
            Ok(r) => r,
            Err(_) => Err(OneOffError::Timeout(limit)),
        }
    }

    async fn remove(&self, id: &str) {
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        if let Err(e) = self.engine.docker.remove_container(id, Some(options)).await {
            tracing::warn!(container = %id, error = %e, "cannot remove a per-call container");
        }
    }

    /// Attaches, starts, sends the request, answers capability requests until the result.
    async fn converse(
        &self,
        id: &str,
        params: &ToolExecuteParams,
    ) -> Result<ToolResult, OneOffError> {
        let options = AttachContainerOptionsBuilder::new()
            .stream(true)
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .build();
        let mut attached = self
            .engine
            .docker
            .attach_container(id, Some(options))
            .await
            .map_err(|source| OneOffError::Api {
                step: "attaching to the call's container",
                source,
            })?;
        self.engine
            .docker
            .start_container(id, None)
            .await
            .map_err(|source| OneOffError::Api {
                step: "starting the call's container",
                source,
            })?;
        let request = Message::Request(Request {
            id: Id::Number(0),
            method: method::TOOL_EXECUTE.to_string(),
            params: Some(
                serde_json::to_value(params).map_err(|e| OneOffError::Protocol(e.to_string()))?,
            ),
        });
        write_line(&mut attached.input, &request).await?;

        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        while let Some(chunk) = attached.output.next().await {
            let chunk = chunk.map_err(|source| OneOffError::Api {
                step: "reading the call's container",
                source,
            })?;
            match chunk {
                LogOutput::StdErr { message } => {
                    stderr.extend_from_slice(&message);
                    if stderr.len() > 2 * STDERR_TAIL {
                        stderr.drain(..stderr.len() - STDERR_TAIL);
                    }
                }
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    stdout.extend_from_slice(&message);
                    if stdout.len() > jsonrpc::MAX_MESSAGE_BYTES + 1 {
                        return Err(OneOffError::Protocol("a line over the size limit".into()));
                    }
                    while let Some(end) = stdout.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = stdout.drain(..=end).collect();
                        if let Some(result) = self.on_line(&line, &mut attached.input).await? {
                            return Ok(result);
                        }
                    }
                }
                LogOutput::StdIn { .. } => {}
            }
        }
        let tail = String::from_utf8_lossy(&stderr);
        Err(OneOffError::NoResult {
            stderr: tail
                .chars()
                .rev()
                .take(STDERR_TAIL)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect(),
        })
    }

    /// One line from the container: a capability request (answered) or the result.
    async fn on_line(
        &self,
        line: &[u8],
        input: &mut (impl tokio::io::AsyncWrite + Unpin),
    ) -> Result<Option<ToolResult>, OneOffError> {
        let text = String::from_utf8_lossy(line);
        if text.trim().is_empty() {
            return Ok(None);
        }
        match jsonrpc::decode(text.trim().as_bytes()) {
            Ok(Message::Response(r)) if r.id == Some(Id::Number(0)) => {
                let value = r.outcome.map_err(|e| OneOffError::Protocol(e.message))?;
                serde_json::from_value(value)
                    .map(Some)
                    .map_err(|e| OneOffError::Protocol(format!("not a tool result: {e}")))
            }
            Ok(Message::Request(req)) => {
                let outcome = match self.callbacks.get() {
                    Some(h) => h.handle(&req.method, req.params).await,
                    None => Err(ErrorObject::new(
                        code::CAPABILITY_UNAVAILABLE,
                        "the core has no callback handler for container calls",
                    )),
                };
                let response = match outcome {
                    Ok(v) => Response::ok(req.id, v),
                    Err(e) => Response::error(Some(req.id), e),
                };
                write_line(input, &Message::Response(response)).await?;
                Ok(None)
            }
            Ok(_) => Err(OneOffError::Protocol(truncate(&text))),
            Err(e) => Err(OneOffError::Protocol(format!("{e}: {}", truncate(&text)))),
        }
    }
}

async fn write_line(
    input: &mut (impl tokio::io::AsyncWrite + Unpin),
    message: &Message,
) -> Result<(), OneOffError> {
    let mut line = message.to_line();
    line.push('\n');
    input
        .write_all(line.as_bytes())
        .await
        .map_err(OneOffError::Stdin)?;
    input.flush().await.map_err(OneOffError::Stdin)
}

fn truncate(s: &str) -> String {
    s.chars().take(200).collect()
}
