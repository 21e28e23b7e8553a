//! One executor endpoint: its address, its channel client, and what the core last saw of
//! it (healthy, draining, the sandbox facts of its last `health` answer).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use skillbox_channel::client::{ClientError, RpcClient};
use skillbox_channel::{TlsFiles, EXECUTOR_IDENTITY};
use skillbox_protocol::methods::{
    HealthParams, HealthResult, SandboxFacts, SkillReloadParams, HEALTH_DRAINING,
};
use skillbox_protocol::rpc::{Health, RpcMethod, SkillReload};

use super::{HEALTH_TIMEOUT, RELOAD_TIMEOUT};

/// One executor address and what the core last saw of it.
#[derive(Debug)]
pub struct Endpoint {
    pub(super) addr: SocketAddr,
    pub(super) source: String,
    pub(super) client: RpcClient,
    state: Mutex<EndpointState>,
}

#[derive(Debug, Clone)]
pub(super) struct EndpointState {
    pub(super) healthy: bool,
    pub(super) since: Instant,
    pub(super) error: Option<String>,
    pub(super) health: Option<Arc<Value>>,
    /// The `sandbox` part of `health`, parsed once per health round (read on every call).
    pub(super) facts: Option<Arc<SandboxFacts>>,
    pub(super) calls: u64,
    /// Said it is stopping (`health` status `draining`, or a call refused as draining):
    /// no call is routed to it until a `health` answer says otherwise.
    pub(super) draining: bool,
    /// Has answered `health` at least once: before that (start-up), not answering is
    /// expected and logged at debug level, not warned about.
    pub(super) answered: bool,
}

impl Endpoint {
    pub(super) fn new(
        addr: SocketAddr,
        source: &str,
        files: &TlsFiles,
    ) -> Result<Self, ClientError> {
        Ok(Self {
            addr,
            source: source.to_string(),
            client: RpcClient::new(&format!("https://{addr}"), EXECUTOR_IDENTITY, files)?,
            // Optimistic until the first health answer, which comes before any call
            // (`ExecutorPool::refresh` runs before the gateway serves).
            state: Mutex::new(EndpointState {
                healthy: true,
                since: Instant::now(),
                error: None,
                health: None,
                facts: None,
                calls: 0,
                draining: false,
                answered: false,
            }),
        })
    }

    /// The endpoint's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(super) fn state(&self) -> EndpointState {
        match self.state.lock() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    pub(super) fn mark(&self, healthy: bool, error: Option<String>, health: Option<Value>) {
        if let Ok(mut s) = self.state.lock() {
            // Its first answer too: an endpoint counts as healthy until first asked.
            let became_healthy = healthy && (!s.healthy || !s.answered);
            if s.healthy != healthy {
                s.since = Instant::now();
                if healthy {
                    // Logged below, with what its sandbox gives network calls.
                } else if s.answered {
                    tracing::warn!(executor = %self.addr, error = ?error, "executor unhealthy");
                } else {
                    tracing::debug!(executor = %self.addr, error = ?error, "executor not answering yet (starting)");
                }
            }
            s.answered |= healthy;
            s.healthy = healthy;
            s.error = error;
            if let Some(health) = health {
                let draining =
                    health.get("status").and_then(Value::as_str) == Some(HEALTH_DRAINING);
                if draining && !s.draining {
                    tracing::info!(executor = %self.addr, "executor draining: no more calls go to it");
                }
                s.draining = draining;
                s.facts = serde_json::from_value::<HealthResult>(health.clone())
                    .ok()
                    .and_then(|h| h.sandbox)
                    .map(Arc::new);
                s.health = Some(Arc::new(health));
            }
            if became_healthy {
                let network = s.facts.as_ref().map(|f| network_mode(f.network_namespaces));
                tracing::info!(executor = %self.addr, network = network.unwrap_or("not reported"), "executor healthy");
            }
        }
    }

    /// The sandbox facts of the last `health` answer, when the endpoint is healthy.
    pub(super) fn healthy_facts(&self) -> Option<Arc<SandboxFacts>> {
        let s = self.state.lock().ok()?;
        s.healthy.then(|| s.facts.clone()).flatten()
    }

    pub(super) fn mark_draining(&self) {
        if let Ok(mut s) = self.state.lock() {
            if !s.draining {
                tracing::info!(executor = %self.addr, "executor refused a call as draining: no more calls go to it");
            }
            s.draining = true;
        }
    }

    /// Has answered `health`, the last time too, and is not draining.
    pub(super) fn takes_calls(&self) -> bool {
        let s = self.state();
        s.answered && s.healthy && !s.draining
    }

    /// Takes calls: answered its last `health` question and is not draining.
    pub(super) fn routable(&self) -> bool {
        let s = self.state();
        s.healthy && !s.draining
    }

    pub(super) fn count_call(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.calls += 1;
        }
    }

    /// Asks `health`. An endpoint that comes back from unhealthy first gets a
    /// `skill.reload`, so it serves the skills as they are now even if it missed the
    /// reload broadcast while it did not answer; it stays unhealthy until that succeeds.
    pub(super) async fn check(&self) {
        let was_healthy = self.state().healthy;
        // The health answer is kept as the executor sent it (read field by field, not as
        // `HealthResult`, which refuses unknown fields): during a rolling upgrade an
        // executor one version ahead stays healthy, and `/healthz` shows what it said.
        let health = match self
            .client
            .call(Health::NAME, &HealthParams::default(), HEALTH_TIMEOUT)
            .await
        {
            Ok(v) => v,
            Err(e) => return self.mark(false, Some(e.to_string()), None),
        };
        if !was_healthy {
            if let Err(e) = self
                .client
                .call_method::<SkillReload>(&SkillReloadParams::default(), RELOAD_TIMEOUT)
                .await
            {
                return self.mark(
                    false,
                    Some(format!("skill.reload on its return: {e}")),
                    None,
                );
            }
        }
        self.mark(true, None, Some(health));
    }
}

/// What the programs of network skills get on an executor, in the words of the core's log
/// and `/healthz` (`network` there).
pub fn network_mode(namespaces: bool) -> &'static str {
    if namespaces {
        "namespaces: each network call in a network namespace of its own, out through the egress proxy only"
    } else {
        "none: no network namespaces, so skills with network are unavailable (the executor needs CAP_SYS_ADMIN and CAP_NET_ADMIN, or root)"
    }
}

/// What `/healthz` shows of one endpoint.
#[derive(Debug, Clone, Serialize)]
pub struct EndpointStatus {
    /// `ip:port`.
    pub address: String,
    /// The configured URL it was found from.
    pub url: String,
    /// Answered the last `health` question (or has not been asked yet).
    pub healthy: bool,
    /// Milliseconds in the current state.
    pub for_ms: u64,
    /// Why it is unhealthy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Calls sent to it.
    pub calls: u64,
    /// It is stopping: finishes what it holds, takes no new calls.
    pub draining: bool,
}
