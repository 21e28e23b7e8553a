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

mod admission;
mod call;
pub mod callbacks;
mod delegate;
mod envelope;
mod error;
pub mod file_stream;
mod gate;
mod inflight;
mod load;
mod pipeline;
mod session_table;
mod sessions;
pub mod transport;
pub mod workfiles;

use std::sync::Arc;
use std::time::Duration;

pub use self::call::ToolCall;
pub use self::delegate::Delegation;
pub use self::error::CallError;
pub use self::inflight::{ActiveCall, InFlight};
pub use self::load::{LoadCell, Loaded};
pub use self::transport::ExecutorTransport;
use crate::approvals::Approvals;
use crate::contexts::files::ContextFiles;
use crate::executors::availability::SkillAvailability;
use crate::executors::ExecutorPool;
use crate::observe::Metrics;
pub use crate::proxy::CallbackAuthError;
use crate::random::{self, BufferedSource, RandomSource, SystemSource};
use crate::state::store::Store;
use skillbox_protocol::skill::Skill;

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

/// The call pipeline: [`Dispatcher::call`] is its one entry (and [`Dispatcher::context_view`]
/// what a context shows its caller). It holds the parts a call needs, handed in by whoever
/// builds the core ([`crate::app`]); the gateway and the reload get those parts too, never
/// through the pipeline.
///
/// Beyond those two, the crate (not the library's users) reaches two more: ending command
/// sessions the pipeline keeps, when their context's files are reset
/// (`Dispatcher::close_sessions`) or a bot's token is revoked
/// (`Dispatcher::close_sessions_of`). A delegated call (`runSkill`) enters from the
/// callbacks, inside this module; dependency builds are [`crate::deps`]'s.
#[derive(Debug)]
pub struct Dispatcher {
    load: Arc<LoadCell>,
    availability: SkillAvailability,
    transports: Transports,
    approvals: Arc<Approvals>,
    store: Store,
    in_flight: Arc<InFlight>,
    call_timeout: Duration,
    rng: Arc<dyn RandomSource>,
    metrics: Arc<Metrics>,
    files: ContextFiles,
    sessions: session_table::Sessions,
    /// The egress proxy's certificates (the PEM a network call's sandbox trusts).
    egress_trust: Option<Arc<crate::proxy::egress::EgressTrust>>,
}

/// What a [`Dispatcher`] is built from.
#[derive(Debug)]
pub struct DispatcherParts {
    /// The current load of the skills (swapped by the reload).
    pub load: Arc<LoadCell>,
    /// Whether a skill can run now (the executors' sandbox facts and the core's secrets).
    pub availability: SkillAvailability,
    /// Where calls run.
    pub transports: Transports,
    /// The operator's approvals.
    pub approvals: Arc<Approvals>,
    /// Where outcomes are recorded.
    pub store: Store,
    /// The calls in flight (shared with the callbacks).
    pub in_flight: Arc<InFlight>,
    /// Longest wait for the executor's answer.
    pub call_timeout: Duration,
    /// Where calls are counted.
    pub metrics: Arc<Metrics>,
    /// The contexts' working folders (a call made in a context works in its files).
    pub files: ContextFiles,
}

impl Dispatcher {
    /// A dispatcher from its parts; ids and tokens come from the operating system.
    pub fn new(parts: DispatcherParts) -> Self {
        Self {
            load: parts.load,
            availability: parts.availability,
            transports: parts.transports,
            approvals: parts.approvals,
            store: parts.store,
            in_flight: parts.in_flight,
            call_timeout: parts.call_timeout,
            rng: Arc::new(BufferedSource::<SystemSource>::default()),
            metrics: parts.metrics,
            files: parts.files,
            sessions: session_table::Sessions::default(),
            egress_trust: None,
        }
    }

    /// Sends network calls the certificates of `trust` to trust (the egress CA for a
    /// skill with bound secrets, `[egress] extra_roots`).
    pub fn with_egress_trust(mut self, trust: Arc<crate::proxy::egress::EgressTrust>) -> Self {
        self.egress_trust = Some(trust);
        self
    }

    /// The envelope of a call of `skill` (see [`envelope::CallEnvelope`]).
    fn envelope_of(&self, skill: &Skill) -> Result<envelope::CallEnvelope, random::RandomError> {
        envelope::CallEnvelope::for_call(
            &self.load.current(),
            self.availability.secrets(),
            self.egress_trust.as_deref(),
            self.rng.as_ref(),
            skill,
        )
    }

    /// Draws call ids and capability tokens from `rng` instead of the operating system
    /// (a seam for tests of a failing source).
    pub fn with_random(mut self, rng: Arc<dyn RandomSource>) -> Self {
        self.rng = rng;
        self
    }

    /// Context `id` as `caller` sees it, once it is let in ([`crate::contexts::enter`]: a
    /// bot's own contexts only): pins, active tools and prompt. Blocking (SQLite and the
    /// pinned skills' bodies).
    pub fn context_view(
        &self,
        caller: &crate::auth::Caller,
        id: &str,
    ) -> Result<crate::contexts::ContextView, crate::contexts::ContextError> {
        let loaded = self.load.current();
        crate::contexts::enter(&self.store, caller, id)?;
        crate::contexts::view(
            &self.store,
            &loaded.catalog,
            &|s| self.availability.of(s).is_ready(),
            id,
            loaded.config.routing.catalogue_budget_chars,
        )
    }

    /// A fresh call id, 24 hex digits: the microseconds since the Unix epoch (12 digits)
    /// and 48 random bits. Ids of later calls sort after earlier ones, so the store adds
    /// each to the end of its index instead of to a random page of it (a 4 KiB page
    /// written per call under load, where a batch of time-ordered ids shares its pages).
    fn new_call_id(&self) -> Result<String, random::RandomError> {
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
pub(crate) fn test_dispatcher(
    ws: &std::path::Path,
    catalog: skillbox_protocol::skill::Catalog,
) -> Dispatcher {
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
    catalog: skillbox_protocol::skill::Catalog,
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
    let files = ContextFiles::new(&state, store.clone(), Default::default());
    let load = Arc::new(LoadCell::new(Loaded::new(
        catalog,
        Arc::new(crate::state::config::Config::default()),
    )));
    let secrets = crate::state::secrets::Secrets::default();
    Dispatcher::new(DispatcherParts {
        load,
        availability: SkillAvailability::new(Arc::clone(&pool), secrets),
        transports: Transports::new(pool, None),
        approvals,
        store,
        in_flight: Arc::new(InFlight::default()),
        call_timeout: Duration::from_secs(5),
        metrics: Arc::new(Metrics::default()),
        files,
    })
}

/// Test calls by name, as the operator outside any context, and the parts a test reads.
#[cfg(test)]
impl Dispatcher {
    /// The current load.
    pub(crate) fn load(&self) -> &Arc<LoadCell> {
        &self.load
    }

    /// The state store.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The call metrics.
    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The approvals.
    pub(crate) fn approvals(&self) -> &Arc<Approvals> {
        &self.approvals
    }

    /// Whether a skill can run now.
    pub(crate) fn availability(&self) -> &SkillAvailability {
        &self.availability
    }

    /// The calls in flight.
    pub(crate) fn in_flight(&self) -> &Arc<InFlight> {
        &self.in_flight
    }

    /// The executors.
    pub(crate) fn executor(&self) -> &Arc<ExecutorPool> {
        &self.transports.pool
    }

    /// The same dispatcher with all process-sandbox work sent through `transport`.
    #[cfg(test)]
    pub(crate) fn with_transport(mut self, transport: Arc<dyn ExecutorTransport>) -> Self {
        self.transports.process = transport;
        self
    }

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
mod session_tests;
#[cfg(test)]
mod tests;
