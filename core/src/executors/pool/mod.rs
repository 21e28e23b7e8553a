//! The executors the core sends calls to. `[executor] url` and `urls` name them; each URL's
//! host is resolved again on every health round ([`discovery`]), so the compose service
//! name `executor` scaled to N containers gives N endpoints, and an endpoint whose address
//! is gone is dropped. Every endpoint is asked `health` on a timer; calls go round-robin to
//! the healthy ones that are not draining, `skill.reload` goes to all of them.
//!
//! An executor that is stopping (an orchestrator scaling down or rolling an update) answers
//! `health` with `draining` and refuses new calls with `EXECUTOR_DRAINING` before running
//! anything; the pool stops routing to it and sends such a call elsewhere, as it does a
//! call whose connection could not be made. A call whose request may have reached an
//! executor is sent again only under [`Resend::AlsoDelivered`] (`read` tools): a `write`
//! or `sign` tool never runs twice ([`ExecutorPool::call_with`]).

pub mod discovery;
mod endpoint;
mod listed;
mod merged_facts;
mod resend;

pub use endpoint::{network_mode, Endpoint, EndpointStatus};
pub use listed::Whole;
use resend::Failure;
pub use resend::Resend;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use skillbox_channel::client::{decode_result, encode_params, ClientError};
use skillbox_channel::TlsFiles;
use skillbox_protocol::jsonrpc::code;
use skillbox_protocol::methods::SandboxFacts;
use skillbox_protocol::rpc::RpcMethod;

use discovery::ExecutorUrl;
pub use discovery::UrlError;

/// How long one `health` question may take before the endpoint counts as unhealthy.
pub const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);
/// How long an executor coming back may take to reload its skills.
pub const RELOAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Default pause between health rounds (`[executor] health_interval_ms`).
pub const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(2);
/// Most executors one call is offered to (the first and up to three others).
pub const MAX_ATTEMPTS: usize = 4;

/// The executor endpoints and the round-robin over the healthy ones.
#[derive(Debug)]
pub struct ExecutorPool {
    urls: Vec<ExecutorUrl>,
    files: TlsFiles,
    endpoints: RwLock<Vec<Arc<Endpoint>>>,
    next: AtomicUsize,
    /// Counts the health rounds after which an executor takes calls that did not before
    /// (new, back from down, or a new process in a restarted one's place).
    arrivals: tokio::sync::watch::Sender<u64>,
    /// The healthy executors' sandbox facts, merged once per change.
    merged_facts: merged_facts::MergedFacts,
}

impl ExecutorPool {
    /// A pool over `urls` (`https://host:port` each); nothing is resolved until
    /// [`refresh`](Self::refresh).
    pub fn new(urls: &[String], files: TlsFiles) -> Result<Self, UrlError> {
        if urls.is_empty() {
            return Err(UrlError::None);
        }
        let urls = urls
            .iter()
            .map(|u| ExecutorUrl::parse(u))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            urls,
            files,
            endpoints: RwLock::new(Vec::new()),
            next: AtomicUsize::new(0),
            arrivals: tokio::sync::watch::Sender::new(0),
            merged_facts: merged_facts::MergedFacts::default(),
        })
    }

    /// The configured URLs, for messages.
    pub fn describe(&self) -> String {
        self.urls
            .iter()
            .map(|u| u.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn snapshot(&self) -> Vec<Arc<Endpoint>> {
        match self.endpoints.read() {
            Ok(e) => e.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Resolves every URL again (keeping the endpoints whose address is still there) and
    /// asks each endpoint `health`. A URL that does not resolve keeps its old endpoints,
    /// which then fail their health question.
    pub async fn refresh(&self) {
        let old = self.snapshot();
        let mut fresh: Vec<Arc<Endpoint>> = Vec::new();
        for url in &self.urls {
            let addrs = match url.resolve().await {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!(url = %url, error = %e, "executor URL does not resolve");
                    old.iter()
                        .filter(|ep| ep.source == url.to_string())
                        .map(|ep| ep.addr)
                        .collect()
                }
            };
            for addr in addrs {
                if fresh.iter().any(|ep| ep.addr == addr) {
                    continue;
                }
                match old.iter().find(|ep| ep.addr == addr) {
                    Some(ep) => fresh.push(Arc::clone(ep)),
                    None => match Endpoint::new(addr, &url.to_string(), &self.files) {
                        Ok(ep) => {
                            tracing::info!(executor = %addr, url = %url, "executor endpoint found");
                            fresh.push(Arc::new(ep));
                        }
                        Err(e) => {
                            tracing::error!(executor = %addr, error = %e, "cannot make a client")
                        }
                    },
                }
            }
        }
        for gone in old
            .iter()
            .filter(|o| !fresh.iter().any(|f| f.addr == o.addr))
        {
            tracing::info!(executor = %gone.addr, "executor endpoint gone");
        }
        let took_calls: Vec<SocketAddr> = (old.iter())
            .filter(|ep| ep.takes_calls())
            .map(|ep| ep.addr)
            .collect();
        futures_util::future::join_all(fresh.iter().map(|ep| ep.check())).await;
        let arrived = (fresh.iter()).any(|ep| ep.takes_calls() && !took_calls.contains(&ep.addr));
        if let Ok(mut e) = self.endpoints.write() {
            *e = fresh;
        }
        if arrived {
            self.arrivals.send_modify(|n| *n += 1);
        }
    }

    /// Changes after each health round in which an executor started taking calls that did
    /// not before: a new one, one back from down, a restarted one. What an executor holds
    /// for itself (built dependency environments) may be missing on it.
    pub fn arrivals(&self) -> tokio::sync::watch::Receiver<u64> {
        self.arrivals.subscribe()
    }

    /// Refreshes every `interval`, forever.
    pub async fn monitor(self: Arc<Self>, interval: Duration) {
        loop {
            tokio::time::sleep(interval).await;
            self.refresh().await;
        }
    }

    /// The next endpoint round-robin among the routable ones (healthy, not draining) not
    /// in `tried`; when none is routable and nothing was tried yet, among all that are not
    /// draining (the call then fails as `unavailable` with the reason).
    fn pick(&self, tried: &[SocketAddr]) -> Option<Arc<Endpoint>> {
        let all = self.snapshot();
        let fresh: Vec<&Arc<Endpoint>> = all.iter().filter(|e| !tried.contains(&e.addr)).collect();
        let routable: Vec<&Arc<Endpoint>> =
            fresh.iter().copied().filter(|e| e.routable()).collect();
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        if !routable.is_empty() {
            return routable.get(n % routable.len()).map(|e| Arc::clone(e));
        }
        if !tried.is_empty() {
            return None;
        }
        let standing: Vec<&Arc<Endpoint>> = fresh
            .iter()
            .copied()
            .filter(|e| !e.state().draining)
            .collect();
        standing
            .get(n % standing.len().max(1))
            .map(|e| Arc::clone(e))
    }

    /// Calls `method` on one executor, sending it to another only when it surely did not
    /// reach the first ([`Resend::OnlyUndelivered`]).
    pub async fn call(
        &self,
        method_name: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        self.call_with(method_name, &params, timeout, Resend::OnlyUndelivered)
            .await
    }

    /// [`ExecutorPool::call_with`] of `M`: its params written and its answer read as its
    /// types.
    pub async fn call_method<M: RpcMethod>(
        &self,
        params: &M::Params,
        timeout: Duration,
        resend: Resend,
    ) -> Result<M::Result, ClientError> {
        let params = encode_params::<M>(params)?;
        let answer = (self.call_with(M::NAME, &*params, timeout, resend)).await?;
        decode_result::<M>(answer)
    }

    /// [`ExecutorPool::call_method`] that also says which executor answered (a command
    /// session stays on the executor that holds it). Sent again only when surely
    /// undelivered.
    pub async fn call_method_placed<M: RpcMethod>(
        &self,
        params: &M::Params,
        whole: Whole<'_>,
        timeout: Duration,
    ) -> Result<(M::Result, SocketAddr), ClientError> {
        let params = encode_params::<M>(params)?;
        let mut tried: Vec<SocketAddr> = Vec::new();
        let mut last: Option<ClientError> = None;
        while tried.len() < MAX_ATTEMPTS {
            let Some(endpoint) = self.pick(&tried) else {
                break;
            };
            tried.push(endpoint.addr);
            let answer = self.call_on_listed(&endpoint, M::NAME, &*params, whole, timeout);
            match answer.await {
                Ok(v) => return Ok((decode_result::<M>(v)?, endpoint.addr)),
                Err(e) if Failure::of(&e).may_resend(Resend::OnlyUndelivered) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| ClientError::Connect {
            url: self.describe(),
            reason: "no executor takes calls now".into(),
        }))
    }

    /// The addresses of the executors that answer now (each builds a skill's
    /// dependencies for itself).
    pub fn healthy_addrs(&self) -> Vec<SocketAddr> {
        (self.snapshot().into_iter())
            .filter(|e| e.state().healthy)
            .map(|e| e.addr)
            .collect()
    }

    /// Calls `M` on the executor at `addr` only (the one holding a session); `Connect`
    /// when the pool no longer has it.
    pub async fn call_method_at<M: RpcMethod>(
        &self,
        addr: SocketAddr,
        params: &M::Params,
        timeout: Duration,
    ) -> Result<M::Result, ClientError> {
        let params = encode_params::<M>(params)?;
        let endpoint = self
            .snapshot()
            .into_iter()
            .find(|e| e.addr == addr)
            .ok_or_else(|| ClientError::Connect {
                url: addr.to_string(),
                reason: "that executor is gone from the pool".into(),
            })?;
        let answer = self.call_on(&endpoint, M::NAME, &*params, timeout).await?;
        decode_result::<M>(answer)
    }

    /// Calls `method` on an executor picked round-robin among the routable ones. When the
    /// attempt fails in a way `resend` allows (no connection, refused as draining; with
    /// [`Resend::AlsoDelivered`] also a connection that broke after sending), the call goes
    /// to another routable executor, at most [`MAX_ATTEMPTS`] in all. An executor that
    /// cannot be reached is marked unhealthy at once, one that refuses as draining is
    /// marked draining. A timeout is never sent again.
    pub async fn call_with<P: Serialize + ?Sized + Sync>(
        &self,
        method_name: &str,
        params: &P,
        timeout: Duration,
        resend: Resend,
    ) -> Result<Value, ClientError> {
        (self.call_with_whole(method_name, params, None, timeout, resend)).await
    }

    /// [`ExecutorPool::call_with`] of params that may name lists of files by digest:
    /// `whole` the same params with the lists whole ([`listed`]).
    pub async fn call_with_whole<P: Serialize + ?Sized + Sync>(
        &self,
        method_name: &str,
        params: &P,
        whole: Whole<'_>,
        timeout: Duration,
        resend: Resend,
    ) -> Result<Value, ClientError> {
        let mut tried: Vec<SocketAddr> = Vec::new();
        let mut last: Option<ClientError> = None;
        while tried.len() < MAX_ATTEMPTS {
            let Some(endpoint) = self.pick(&tried) else {
                break;
            };
            tried.push(endpoint.addr);
            let answer = self.call_on_listed(&endpoint, method_name, params, whole, timeout);
            let error = match answer.await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let failure = Failure::of(&error);
            if !failure.may_resend(resend) {
                return Err(error);
            }
            tracing::warn!(executor = %endpoint.addr, error = %error, "the call goes to another executor ({failure:?})");
            last = Some(error);
        }
        // Nothing was sent: `Connect`, which callers read as "never delivered".
        Err(last.unwrap_or_else(|| ClientError::Connect {
            url: self.describe(),
            reason: if self.snapshot().is_empty() {
                "no executor address resolved (is an executor running?)".into()
            } else {
                "every executor is draining (stopping); retry once a new one answers".into()
            },
        }))
    }

    async fn call_on<P: Serialize + ?Sized + Sync>(
        &self,
        endpoint: &Endpoint,
        method_name: &str,
        params: &P,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        endpoint.count_call();
        let result = endpoint.client.call(method_name, params, timeout).await;
        match &result {
            Err(e @ (ClientError::Unreachable { .. } | ClientError::Connect { .. })) => {
                endpoint.mark(false, Some(e.to_string()), None);
            }
            Err(ClientError::Rpc(o)) if o.code == code::EXECUTOR_DRAINING => {
                endpoint.mark_draining();
            }
            _ => {}
        }
        result
    }

    /// Calls `method` on every healthy endpoint (one that is down loads the skills afresh
    /// when it comes back); the first error, if any.
    pub async fn broadcast(
        &self,
        method_name: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let healthy: Vec<Arc<Endpoint>> = self
            .snapshot()
            .into_iter()
            .filter(|e| e.state().healthy)
            .collect();
        let answers = futures_util::future::join_all(
            healthy
                .iter()
                .map(|ep| ep.client.call(method_name, &params, timeout)),
        )
        .await;
        let mut first = None;
        let mut error = None;
        for (endpoint, answer) in healthy.iter().zip(answers) {
            match answer {
                Ok(v) => {
                    first.get_or_insert(v);
                }
                Err(e) => {
                    // Unhealthy until it answers again, and then it gets this method
                    // again (a missed `skill.reload` is made up, see `Endpoint::check`).
                    endpoint.mark(false, Some(e.to_string()), None);
                    error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = error {
            return Err(e);
        }
        first.ok_or_else(|| ClientError::Unreachable {
            url: self.describe(),
            reason: "no executor answers health".into(),
        })
    }

    /// The last `health` answer of an endpoint that takes calls (healthy, not draining), if
    /// any: with every executor draining, `/healthz` says the executor is down.
    pub fn health(&self) -> Option<Value> {
        self.snapshot().iter().find_map(|e| {
            let s = e.state();
            (s.healthy && !s.draining)
                .then_some(s.health)
                .flatten()
                .map(|h| (*h).clone())
        })
    }

    /// What the healthy executors' sandboxes can start, merged so that a program counts as
    /// present only when every healthy executor that reported has it (a call may go to any
    /// of them). `None` until a healthy executor has reported.
    pub fn sandbox_facts(&self) -> Option<Arc<SandboxFacts>> {
        let parts = self
            .snapshot()
            .iter()
            .filter_map(|e| e.healthy_facts())
            .collect();
        self.merged_facts.of(parts)
    }

    /// Every endpoint as `/healthz` shows it.
    pub fn status(&self) -> Vec<EndpointStatus> {
        self.snapshot()
            .iter()
            .map(|e| {
                let s = e.state();
                EndpointStatus {
                    address: e.addr.to_string(),
                    url: e.source.clone(),
                    healthy: s.healthy,
                    for_ms: u64::try_from(s.since.elapsed().as_millis()).unwrap_or(u64::MAX),
                    error: s.error,
                    calls: s.calls,
                    draining: s.draining,
                }
            })
            .collect()
    }

    /// Takes every endpoint for healthy, as between a death and the next health round.
    #[cfg(test)]
    pub(crate) fn assume_all_healthy(&self) {
        for e in self.snapshot() {
            e.mark(true, None, None);
        }
    }

    /// How long the endpoint at `ip` has been unhealthy; `None` when it is healthy or
    /// unknown (for the supervisor).
    pub fn unhealthy_for(&self, ip: IpAddr) -> Option<Duration> {
        self.snapshot()
            .iter()
            .filter(|e| e.addr.ip() == ip)
            .map(|e| e.state())
            .find(|s| !s.healthy)
            .map(|s| s.since.elapsed())
    }
}

#[cfg(test)]
mod drain_tests;
#[cfg(test)]
mod list_tests;
#[cfg(test)]
mod tests;
