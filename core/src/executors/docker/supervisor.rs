//! The executor supervisor: every round it lists the containers of the executor's compose
//! service and
//! - starts one that died (killed, crashed, out of memory: any exit but a clean stop, so a
//!   `docker stop` or `compose down` is left alone; Docker's own restart policy does not
//!   restart a container after `docker kill`);
//! - restarts one that runs but has not answered `health` for `restart_after_ms`
//!   (hung, stopped, its listener gone);
//!
//! and reports what it saw in `/healthz`. A container it acted on is left alone for
//! `restart_after_ms`, doubled after each action in a row (up to [`MAX_BACKOFF`]), so an
//! executor that cannot come up is not restarted in a tight loop; the count resets once
//! it answers. `compose run` containers of the service are not touched. Calls are spread over the healthy executors by
//! [`ExecutorPool`], which finds new containers through DNS.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bollard::models::ContainerSummaryStateEnum;
use bollard::query_parameters::{ListContainersOptionsBuilder, RestartContainerOptionsBuilder};
use serde::Serialize;

use super::{DockerError, Engine};
use crate::executors::ExecutorPool;
use crate::state::config::DockerSection;

/// Exit codes of a container that was stopped on purpose: a clean exit, or SIGTERM (what
/// `docker stop` and `compose down` send) passed through `init`.
const CLEAN_STOP_CODES: [i64; 2] = [0, 143];
/// The longest pause between two actions on one container.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// What `/healthz` shows of the supervisor.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SupervisorStatus {
    /// The compose project watched.
    pub project: String,
    /// The compose service watched.
    pub service: String,
    /// The containers of that service at the last round.
    pub containers: Vec<ContainerStatus>,
    /// Containers started or restarted so far.
    pub restarts: u64,
    /// The last thing the supervisor did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_action: Option<String>,
    /// Why the last round failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One executor container.
#[derive(Debug, Clone, Serialize)]
pub struct ContainerStatus {
    /// Short id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Docker's state (`running`, `exited`, ...).
    pub state: String,
    /// Its addresses.
    pub addresses: Vec<String>,
}

/// Watches the executor containers.
#[derive(Debug)]
pub struct Supervisor {
    engine: Engine,
    pool: Arc<ExecutorPool>,
    project: String,
    service: String,
    restart_after: Duration,
    interval: Duration,
    status: Mutex<SupervisorStatus>,
    /// Per container: when the supervisor last acted on it and how many actions in a row.
    actions: Mutex<HashMap<String, (Instant, u32)>>,
}

impl Supervisor {
    /// A supervisor of `[docker] service` in `[docker] project` (default: the core's own
    /// compose project). `None` when there is no project to watch.
    pub fn new(engine: Engine, pool: Arc<ExecutorPool>, config: &DockerSection) -> Option<Self> {
        let project = if config.project.is_empty() {
            engine.own_project()?.to_string()
        } else {
            config.project.clone()
        };
        Some(Self {
            status: Mutex::new(SupervisorStatus {
                project: project.clone(),
                service: config.service.clone(),
                ..SupervisorStatus::default()
            }),
            engine,
            pool,
            project,
            service: config.service.clone(),
            restart_after: Duration::from_millis(config.restart_after_ms),
            interval: Duration::from_millis(config.interval_ms.max(200)),
            actions: Mutex::new(HashMap::new()),
        })
    }

    /// What the last round saw.
    pub fn status(&self) -> SupervisorStatus {
        match self.status.lock() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Runs rounds forever.
    pub async fn run(self: Arc<Self>) {
        tracing::info!(project = %self.project, service = %self.service, "supervising the executor containers");
        loop {
            let error = self.round().await.err().map(|e| e.to_string());
            if let Some(e) = &error {
                tracing::warn!(error = %e, "supervisor round failed");
            }
            if let Ok(mut s) = self.status.lock() {
                s.error = error;
            }
            tokio::time::sleep(self.interval).await;
        }
    }

    /// One look at the containers, and the starts and restarts it calls for.
    pub async fn round(&self) -> Result<(), DockerError> {
        let filters = HashMap::from([(
            "label",
            vec![
                format!("com.docker.compose.project={}", self.project),
                format!("com.docker.compose.service={}", self.service),
                "com.docker.compose.oneoff=False".to_string(),
            ],
        )]);
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        let list = self
            .engine
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|source| DockerError::Api {
                step: "listing the executor containers",
                source,
            })?;
        let mut seen = Vec::new();
        for c in list {
            let id = c.id.clone().unwrap_or_default();
            let name = c
                .names
                .as_ref()
                .and_then(|n| n.first())
                .map(|n| n.trim_start_matches('/').to_string())
                .unwrap_or_else(|| id.clone());
            let addresses: Vec<IpAddr> = c
                .network_settings
                .as_ref()
                .and_then(|n| n.networks.as_ref())
                .map(|n| {
                    n.values()
                        .filter_map(|e| e.ip_address.as_deref()?.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            let state = c.state.unwrap_or(ContainerSummaryStateEnum::EMPTY);
            seen.push(ContainerStatus {
                id: id.chars().take(12).collect(),
                name: name.clone(),
                state: state.to_string(),
                addresses: addresses.iter().map(ToString::to_string).collect(),
            });
            let unhealthy = addresses
                .iter()
                .filter_map(|ip| self.pool.unhealthy_for(*ip))
                .max();
            if state == ContainerSummaryStateEnum::RUNNING && unhealthy.is_none() {
                self.forget(&id);
            }
            if self.backing_off(&id) {
                continue;
            }
            // One container's failure (e.g. Docker's restart policy got there first) does
            // not keep the round from the others.
            let acted = match state {
                // A dead container cannot be started; it stays in the status for the
                // operator.
                ContainerSummaryStateEnum::EXITED => self.start_if_died(&id, &name).await,
                ContainerSummaryStateEnum::RUNNING => {
                    match unhealthy.filter(|d| *d >= self.restart_after) {
                        Some(for_) => self.restart(&id, &name, for_).await,
                        None => Ok(()),
                    }
                }
                _ => Ok(()),
            };
            if let Err(e) = acted {
                tracing::warn!(container = %name, error = %e, "supervisor action failed");
            }
        }
        if let Ok(mut m) = self.actions.lock() {
            m.retain(|id, _| seen.iter().any(|c| id.starts_with(&c.id)));
        }
        if let Ok(mut s) = self.status.lock() {
            s.containers = seen;
        }
        Ok(())
    }

    /// Whether the last action on `id` is too recent to act again.
    fn backing_off(&self, id: &str) -> bool {
        let Ok(actions) = self.actions.lock() else {
            return false;
        };
        actions
            .get(id)
            .is_some_and(|(at, n)| at.elapsed() < backoff(self.restart_after, *n))
    }

    fn forget(&self, id: &str) {
        if let Ok(mut m) = self.actions.lock() {
            m.remove(id);
        }
    }

    fn record(&self, id: &str, action: String) {
        tracing::warn!(action = %action, "supervisor");
        if let Ok(mut m) = self.actions.lock() {
            let n = m.get(id).map_or(0, |(_, n)| *n);
            m.insert(id.to_string(), (Instant::now(), n + 1));
        }
        if let Ok(mut s) = self.status.lock() {
            s.restarts += 1;
            s.last_action = Some(action);
        }
    }

    async fn start_if_died(&self, id: &str, name: &str) -> Result<(), DockerError> {
        let inspect = self
            .engine
            .docker
            .inspect_container(id, None)
            .await
            .map_err(|source| DockerError::Api {
                step: "inspecting an exited executor",
                source,
            })?;
        let exit_code = inspect.state.and_then(|s| s.exit_code).unwrap_or(-1);
        if CLEAN_STOP_CODES.contains(&exit_code) {
            return Ok(());
        }
        self.engine
            .docker
            .start_container(id, None)
            .await
            .map_err(|source| DockerError::Api {
                step: "starting an executor that died",
                source,
            })?;
        self.record(
            id,
            format!("started {name}, which had exited with code {exit_code}"),
        );
        Ok(())
    }

    async fn restart(&self, id: &str, name: &str, unhealthy: Duration) -> Result<(), DockerError> {
        let options = RestartContainerOptionsBuilder::new().t(2).build();
        self.engine
            .docker
            .restart_container(id, Some(options))
            .await
            .map_err(|source| DockerError::Api {
                step: "restarting an executor that stopped answering",
                source,
            })?;
        self.record(
            id,
            format!(
                "restarted {name}, which had not answered health for {} ms",
                unhealthy.as_millis()
            ),
        );
        Ok(())
    }
}

/// The pause after the `n`th action in a row: `base`, doubled each time, at most
/// [`MAX_BACKOFF`].
fn backoff(base: Duration, n: u32) -> Duration {
    base.saturating_mul(1 << n.saturating_sub(1).min(16))
        .min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_action_in_a_row_up_to_the_cap() {
        let base = Duration::from_secs(10);
        assert_eq!(backoff(base, 1), base);
        assert_eq!(backoff(base, 2), Duration::from_secs(20));
        assert_eq!(backoff(base, 3), Duration::from_secs(40));
        assert_eq!(backoff(base, 30), MAX_BACKOFF);
    }
}
