//! `GET /healthz`: the core's health, without authentication.

use skillbox_protocol::methods::HealthResult;

use super::api::Health;
use crate::executors::pool::network_mode;
use crate::gateway::web::request::{ok_of, Reply, Req};
use crate::gateway::Gateway;

/// The executors as of the pool's last health round (`[executor] health_interval_ms`):
/// asking one here would shift the round robin and count as a call.
pub async fn healthz(gw: &Gateway, _req: Req) -> Reply {
    let pool = &gw.skills.executors;
    let health = pool
        .health()
        .and_then(|v| serde_json::from_value::<HealthResult>(v).ok());
    let executor = if health.is_some() { "ok" } else { "down" };
    Ok(ok_of(&Health {
        status: "ok",
        executor,
        sandbox: health,
        network: (pool.sandbox_facts()).map(|f| network_mode(f.network_namespaces)),
        executors: pool.status(),
        supervisor: gw.supervisor.as_ref().map(|s| s.status()),
        container_sandbox: gw.skills.container_sandbox,
    }))
}
