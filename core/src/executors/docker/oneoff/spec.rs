//! What a per-call container is: its create body (no network, read-only root, the
//! executor's five capabilities, limits, no logs kept, only the skill mounted), the host
//! path of the skill folder, and which core owns it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bollard::models::{
    ContainerCreateBody, HealthConfig, HostConfig, HostConfigLogConfig, Mount, MountType,
};
use skillbox_protocol::skill::{Skill, LOCK_FILE};

use super::{OneOffError, CALL_LABEL, OWNER_LABEL};
use crate::executors::docker::Engine;
use crate::state::config::DockerSection;

/// The capabilities the executor needs to switch a call to its own user (docker/README.md).
const EXECUTOR_CAPS: [&str; 5] = ["SETUID", "SETGID", "SETPCAP", "CHOWN", "DAC_OVERRIDE"];

/// Limits and image of the per-call containers (from `[docker]`).
#[derive(Debug, Clone)]
pub struct Spec {
    /// Executor image.
    pub image: String,
    /// Added to the skill's `memory_mb`.
    pub overhead_mb: u64,
    /// Pids limit.
    pub pids: i64,
    /// CPU limit in billionths of a CPU.
    pub nano_cpus: i64,
}

impl Spec {
    /// The spec `[docker]` describes.
    pub fn from_config(config: &DockerSection) -> Self {
        Self {
            image: config.executor_image.clone(),
            overhead_mb: config.container_memory_overhead_mb,
            pids: config.container_pids,
            // In range by the config check (0.01..=256 CPUs): at most 2.56e11, far inside
            // i64 and never negative, so the cast neither truncates nor wraps.
            #[allow(clippy::cast_possible_truncation)]
            nano_cpus: (config.container_cpus * 1e9) as i64,
        }
    }

    /// The container's memory limit for `skill`, in MiB.
    pub fn memory_mb(&self, skill: &Skill) -> u64 {
        skill.execution.memory_mb + self.overhead_mb
    }

    /// The create body of one call's container, whose executor takes its per-call user
    /// ids from `uid_base` up ([`super::slots`]).
    pub fn body(
        &self,
        skill: &Skill,
        mounts: Vec<Mount>,
        call_id: &str,
        owner: &str,
        uid_base: u32,
    ) -> ContainerCreateBody {
        let memory = i64::try_from(self.memory_mb(skill) * 1024 * 1024).unwrap_or(i64::MAX);
        ContainerCreateBody {
            image: Some(self.image.clone()),
            entrypoint: Some(vec!["skillbox-executor".into()]),
            cmd: Some(vec![
                "exec".into(),
                "--stdio".into(),
                "--skills".into(),
                "/skills".into(),
                "--uid-base".into(),
                uid_base.to_string(),
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
                (OWNER_LABEL.to_string(), owner.to_string()),
                ("dev.skillbox.skill".to_string(), skill.name.clone()),
            ])),
            host_config: Some(HostConfig {
                mounts: Some(mounts),
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
                // stdout carries capability tokens, fetched data and the result: the
                // engine must not keep (or ship) a log of it.
                log_config: Some(HostConfigLogConfig {
                    typ: Some("none".into()),
                    config: None,
                }),
                tmpfs: Some(HashMap::from([
                    ("/tmp".to_string(), "size=64m,mode=1777".to_string()),
                    ("/run".to_string(), "size=1m,mode=0755".to_string()),
                ])),
                ..HostConfig::default()
            }),
            ..ContainerCreateBody::default()
        }
    }
}

/// Where the skills root is on the engine's host.
#[derive(Debug, Clone)]
pub struct HostSkills {
    /// The skills root as the core sees it.
    pub root: PathBuf,
    /// `[docker] skills_host_dir`, when set.
    pub configured: Option<PathBuf>,
}

impl HostSkills {
    /// The skill folder (read-only) and, when skills were installed, the install lock (so
    /// the executor in the container checks the folder's digest as it does everywhere).
    /// Bind mounts of type `bind` fail on a missing source instead of creating it. A skill
    /// of another root (`[skills] roots`, e.g. compose.yaml's read-only `local-skills`) is
    /// found on the engine's host through the mount that holds it, and gets no lock (the
    /// lock covers the install root only).
    pub fn mounts(&self, engine: &Engine, skill: &Skill) -> Result<Vec<Mount>, OneOffError> {
        let bind = |source: PathBuf, target: String| Mount {
            target: Some(target),
            source: Some(source.display().to_string()),
            typ: Some(MountType::BIND),
            read_only: Some(true),
            ..Mount::default()
        };
        let target = format!("/skills/{}", skill.name);
        let Ok(rel) = skill.dir.strip_prefix(&self.root) else {
            let source = engine
                .host_path(&skill.dir)
                .ok_or_else(|| OneOffError::NoHostPath(skill.dir.clone()))?;
            return Ok(vec![bind(source, target)]);
        };
        let host_root = self.host_root(engine)?;
        let mut mounts = vec![bind(host_root.join(rel), target)];
        if self.root.join(LOCK_FILE).is_file() {
            mounts.push(bind(
                host_root.join(LOCK_FILE),
                format!("/skills/{LOCK_FILE}"),
            ));
        }
        Ok(mounts)
    }

    fn host_root(&self, engine: &Engine) -> Result<PathBuf, OneOffError> {
        match &self.configured {
            Some(dir) if dir.is_absolute() => Ok(dir.clone()),
            Some(dir) => Err(OneOffError::HostDirNotAbsolute(dir.clone())),
            None => engine
                .host_path(&self.root)
                .ok_or_else(|| OneOffError::NoHostPath(self.root.clone())),
        }
    }
}

/// The owner label of this core's containers: its compose project (stable across a
/// recreated core container), else its container id, else its state folder on the host.
pub fn owner(engine: &Engine, state_dir: &Path) -> String {
    if let Some(project) = engine.own_project() {
        return format!("compose:{project}");
    }
    match &engine.own {
        Some(own) => format!("container:{}", own.id),
        None => format!(
            "host:{}",
            std::fs::canonicalize(state_dir)
                .unwrap_or_else(|_| state_dir.to_path_buf())
                .display()
        ),
    }
}
