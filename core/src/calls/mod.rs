//! The call pipeline: one gateway (or MCP, or CLI) tool call to the tool and back, in four
//! steps, each decided in exactly one place ([`pipeline`]):
//!
//! 1. **admit**: the tool exists, its skill is not disabled by the trust policy, and it is
//!    available where tools run ([`crate::executors::readiness::context_readiness`] over the executors'
//!    sandbox facts);
//! 2. **approve**: a `write` tool waits for the operator (a `sign` tool waits at each
//!    signature, in the callbacks);
//! 3. **dispatch**: a call id and a capability token, the declared env values, the call
//!    registered in [`InFlight`] for its callbacks, and the [`ExecutorTransport`] of the
//!    skill's sandbox (the executor pool, or per-call containers);
//! 4. **record**: the outcome in the state store and the call metrics.
//!
//! Failures are [`CallError`]s, whose kind is the call's `error_kind`.

mod call;
pub mod callbacks;
mod error;
mod inflight;
mod pipeline;
pub mod transport;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use skillbox_protocol::skill::{Catalog, Skill};

pub use self::call::ToolCall;
pub use self::error::CallError;
pub use self::inflight::{ActiveCall, CallbackAuthError, InFlight};
pub use self::transport::ExecutorTransport;
use crate::approvals::Approvals;
use crate::executors::availability::SandboxReadiness;
use crate::executors::readiness::{context_readiness, Availability};
use crate::executors::ExecutorPool;
use crate::observe::Metrics;
use crate::random::{self, RandomSource, SystemSource};
use crate::router::Router;
use crate::skills::stamp::InstalledStamps;
use crate::state::config::Config;
use crate::state::secrets::Secrets;
use crate::state::store::Store;

/// Where the pipeline sends calls: the executor pool (whose health also tells what the
/// sandboxes can start) and, when the core has a Docker engine, per-call containers.
#[derive(Debug, Clone)]
pub struct Transports {
    /// The executors.
    pub pool: Arc<ExecutorPool>,
    /// How calls of process-sandbox skills run (the pool, or a fake in tests).
    pub process: Arc<dyn ExecutorTransport>,
    /// How calls of `execution.sandbox: container` skills run, when there is an engine.
    pub containers: Option<Arc<dyn ExecutorTransport>>,
}

impl Transports {
    /// Calls go to `pool`; container-sandbox calls to `containers` when given.
    pub fn new(pool: Arc<ExecutorPool>, containers: Option<Arc<dyn ExecutorTransport>>) -> Self {
        Self {
            process: Arc::clone(&pool) as Arc<dyn ExecutorTransport>,
            pool,
            containers,
        }
    }
}

/// What a load or reload produced, swapped as one: the catalogue, the configuration read
/// with it (once per load, never per request) and the router over both (built at its
/// first use and kept with them: no global cache).
#[derive(Debug)]
pub struct Loaded {
    /// The skills.
    pub catalog: Arc<Catalog>,
    /// `skillbox.toml` as it was at that load.
    pub config: Arc<Config>,
    /// Each skill of the catalogue, shared, by name: a call takes a reference to its skill
    /// instead of copying it.
    skills: std::collections::HashMap<String, Arc<Skill>>,
    /// The installed skills' files as they were verified (admission refuses a change).
    pub stamps: Arc<InstalledStamps>,
    /// The router over this catalogue with this `[routing]`.
    router: std::sync::OnceLock<Arc<Router>>,
}

impl Loaded {
    /// The catalogue and the configuration of one load.
    pub fn new(catalog: Catalog, config: Arc<Config>) -> Self {
        let skills = (catalog.skills.iter())
            .map(|s| (s.name.clone(), Arc::new(s.clone())))
            .collect();
        Self {
            catalog: Arc::new(catalog),
            config,
            skills,
            stamps: Arc::default(),
            router: std::sync::OnceLock::new(),
        }
    }

    /// The router of this load.
    pub fn router(&self) -> Arc<Router> {
        Arc::clone(self.router.get_or_init(|| {
            Arc::new(Router::new(
                Arc::clone(&self.catalog),
                self.config.routing.clone(),
            ))
        }))
    }

    /// The same load with the installed skills' stamps taken before they were verified.
    pub fn with_stamps(mut self, stamps: InstalledStamps) -> Self {
        self.stamps = Arc::new(stamps);
        self
    }

    /// The skill `name`, shared.
    pub fn skill(&self, name: &str) -> Option<Arc<Skill>> {
        self.skills.get(name).map(Arc::clone)
    }
}

/// Runs tool calls through the pipeline; holds the catalogue they are admitted against.
#[derive(Debug)]
pub struct Dispatcher {
    loaded: RwLock<Arc<Loaded>>,
    transports: Transports,
    secrets: Secrets,
    approvals: Arc<Approvals>,
    store: Store,
    in_flight: Arc<InFlight>,
    call_timeout: Duration,
    rng: Arc<dyn RandomSource>,
    metrics: Arc<Metrics>,
}

/// What a [`Dispatcher`] is built from.
#[derive(Debug)]
pub struct DispatcherParts {
    /// The skills calls are admitted against.
    pub catalog: Catalog,
    /// The installed skills' files as they were verified ([`InstalledStamps::read`]).
    pub stamps: InstalledStamps,
    /// The configuration read with them.
    pub config: Config,
    /// Where calls run.
    pub transports: Transports,
    /// The env values the core holds.
    pub secrets: Secrets,
    /// The operator's approvals.
    pub approvals: Arc<Approvals>,
    /// Where outcomes are recorded.
    pub store: Store,
    /// The calls in flight (shared with the callbacks).
    pub in_flight: Arc<InFlight>,
    /// Longest wait for the executor's answer.
    pub call_timeout: Duration,
}

impl Dispatcher {
    /// A dispatcher from its parts; ids and tokens come from the operating system.
    pub fn new(parts: DispatcherParts) -> Self {
        Self {
            loaded: RwLock::new(Arc::new(
                Loaded::new(parts.catalog, Arc::new(parts.config)).with_stamps(parts.stamps),
            )),
            transports: parts.transports,
            secrets: parts.secrets,
            approvals: parts.approvals,
            store: parts.store,
            in_flight: parts.in_flight,
            call_timeout: parts.call_timeout,
            rng: Arc::new(SystemSource::default()),
            metrics: Arc::new(Metrics::default()),
        }
    }

    /// Counts calls and routes into `metrics` (the registry `GET /metrics` serves).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The metrics calls and routes are counted in.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Draws call ids and capability tokens from `rng` instead of the operating system
    /// (a seam for tests of a failing source).
    pub fn with_random(mut self, rng: Arc<dyn RandomSource>) -> Self {
        self.rng = rng;
        self
    }

    /// The latest load: catalogue and configuration.
    pub fn loaded(&self) -> Arc<Loaded> {
        self.loaded
            .read()
            .map(|l| Arc::clone(&l))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    /// The skills the core knows.
    pub fn catalog(&self) -> Arc<Catalog> {
        Arc::clone(&self.loaded().catalog)
    }

    /// The configuration of the latest load.
    pub fn config(&self) -> Arc<Config> {
        Arc::clone(&self.loaded().config)
    }

    /// Replaces the catalogue, and the configuration when a new one was read (a reload).
    pub fn set_catalog(&self, catalog: Catalog, config: Option<Config>) {
        self.set_load(catalog, config, InstalledStamps::default());
    }

    /// Replaces the catalogue with the stamps of its installed skills, and the
    /// configuration when a new one was read (a reload).
    pub fn set_load(&self, catalog: Catalog, config: Option<Config>, stamps: InstalledStamps) {
        let config = config.map_or_else(|| self.config(), Arc::new);
        if let Ok(mut l) = self.loaded.write() {
            *l = Arc::new(Loaded::new(catalog, config).with_stamps(stamps));
        }
    }

    /// The executors.
    pub fn executor(&self) -> &Arc<ExecutorPool> {
        &self.transports.pool
    }

    /// Whether `execution.sandbox: container` calls can run (the core has a Docker engine).
    pub fn has_container_sandbox(&self) -> bool {
        self.transports.containers.is_some()
    }

    /// The approvals.
    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.approvals
    }

    /// The secrets.
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// The state store (call records, skill stats).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The calls in flight.
    pub fn in_flight(&self) -> &Arc<InFlight> {
        &self.in_flight
    }

    /// What the executors' sandboxes can start and the env values the core holds: the
    /// readiness every availability question is answered from.
    pub fn readiness(&self) -> SandboxReadiness<'_> {
        SandboxReadiness::new(self.transports.pool.sandbox_facts(), &self.secrets)
    }

    /// Context `id` as `caller` sees it, once it is let in ([`crate::contexts::enter`]: a
    /// bot's own contexts only): pins, active tools and prompt. Blocking (SQLite and the
    /// pinned skills' bodies).
    pub fn context_view(
        &self,
        caller: &crate::auth::Caller,
        id: &str,
    ) -> Result<crate::contexts::ContextView, crate::contexts::ContextError> {
        let catalog = self.catalog();
        crate::contexts::enter(&self.store, caller, id)?;
        crate::contexts::view(
            &self.store,
            &catalog,
            &|s| self.availability(s).is_ready(),
            id,
        )
    }

    /// Whether a skill can be used now: a program its tools need that the executors'
    /// sandboxes lack, an OS they do not run, an env value the core does not hold make it
    /// unavailable ([`crate::executors::readiness::context_readiness`], the one verdict).
    pub fn availability(&self, skill: &Skill) -> Availability {
        context_readiness(skill, &self.readiness()).1
    }

    /// A fresh call id, 24 hex digits: the microseconds since the Unix epoch (12 digits)
    /// and 48 random bits. Ids of later calls sort after earlier ones, so the store adds
    /// each to the end of its index instead of to a random page of it (a 4 KiB page
    /// written per call under load, where a batch of time-ordered ids shares its pages).
    pub fn new_call_id(&self) -> Result<String, random::RandomError> {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        let random = random::hex(self.rng.as_ref(), 6, "call id")?;
        Ok(format!("{:012x}{random}", micros & 0xffff_ffff_ffff))
    }
}

/// A dispatcher over `catalog` with its state in `<ws>/.skillbox` and no executor
/// listening (for tests here and in the gateway).
#[cfg(test)]
pub(crate) fn test_dispatcher(ws: &std::path::Path, catalog: Catalog) -> Dispatcher {
    let state = crate::state::Workspace::new(ws).ensure_state_dir().unwrap();
    let store = Store::open(&Store::db_path(&state)).unwrap();
    let approvals = Arc::new(Approvals::new(
        store,
        crate::approvals::ApprovalPolicy {
            auto_approve: Vec::new(),
            timeout_ms: 1000,
            ..crate::approvals::ApprovalPolicy::default()
        },
    ));
    test_dispatcher_over(ws, catalog, approvals)
}

/// [`test_dispatcher`] over the skills of `<ws>/skills`, with `approvals`.
#[cfg(test)]
pub(crate) fn test_dispatcher_with_approvals(
    ws: &std::path::Path,
    approvals: Arc<Approvals>,
) -> Dispatcher {
    let skills = ws.join("skills");
    let catalog = skillbox_protocol::skill::discover(
        std::slice::from_ref(&skills),
        skillbox_protocol::skill::DiscoveryOptions::default(),
    );
    test_dispatcher_over(ws, catalog, approvals)
}

#[cfg(test)]
fn test_dispatcher_over(
    ws: &std::path::Path,
    catalog: Catalog,
    approvals: Arc<Approvals>,
) -> Dispatcher {
    let ws = crate::state::Workspace::new(ws);
    let state = ws.ensure_state_dir().unwrap();
    crate::state::pki::ensure(&state).unwrap();
    let pool = Arc::new(
        ExecutorPool::new(
            &["https://127.0.0.1:9".to_string()],
            crate::state::pki::core_files(&state),
        )
        .unwrap(),
    );
    let store = Store::open(&ws.db_file()).unwrap();
    Dispatcher::new(DispatcherParts {
        catalog,
        stamps: InstalledStamps::default(),
        config: Config::default(),
        transports: Transports::new(pool, None),
        secrets: Secrets::default(),
        approvals,
        store,
        in_flight: Arc::new(InFlight::default()),
        call_timeout: Duration::from_secs(5),
    })
}

/// Test calls by name, as the operator outside any context.
#[cfg(test)]
impl Dispatcher {
    /// The same dispatcher with process-sandbox calls answered by `fake`.
    pub(crate) fn with_fake_transport<F>(mut self, fake: F) -> Self
    where
        F: Fn(
                &skillbox_protocol::methods::ToolExecuteParams,
            ) -> Result<skillbox_protocol::result::ToolResult, CallError>
            + Send
            + Sync
            + 'static,
    {
        self.transports.process = Arc::new(transport::Fake(fake));
        self
    }

    pub(crate) async fn call_named(
        &self,
        name: &str,
        args: serde_json::Value,
    ) -> skillbox_protocol::result::ToolResult {
        let target = skillbox_protocol::Target::parse(name).expect("a tool name");
        self.call(ToolCall::new(
            target,
            args,
            crate::auth::CallOrigin::operator(),
        ))
        .await
    }
}

#[cfg(test)]
mod tests;
