//! `skillbox-executor serve`: the daemon the core talks to (docs/architecture.md). JSON-RPC over
//! mutual TLS with methods `tool.execute`, `tool.list`, `skill.reload`, `health`, and the
//! command sessions `session.exec`, `session.write`, `session.close` ([`crate::session`];
//! an unknown session id answers `SESSION_NOT_FOUND`, -32005);
//! bounded concurrency with a bounded queue (`unavailable` when full); a call whose
//! connection the core drops is cancelled (its processes killed, its scratch removed).
//! On SIGTERM the service drains ([`crate::drain`]): new calls are refused as draining,
//! `health` says `draining`, the calls it holds finish.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::Value;
use skillbox_channel::client::{ClientError, RpcClient, StreamClient};
use skillbox_channel::server::{RpcFuture, RpcHandler};
use skillbox_channel::stream::BoxedStream;
use skillbox_protocol::jsonrpc::{code, ErrorObject};
use skillbox_protocol::methods::{
    ExecutorMethod, HealthResult, SkillReloadResult, ToolListResult, HEALTH_DRAINING,
};
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::rpc::{
    DepsBuild, RpcMethod, SessionClose, SessionExec, SessionWrite, ToolExecute,
};
use tokio::sync::Semaphore;

use crate::broker::{core_request, CallInfo, CapabilityBroker};
use crate::call;
use crate::drain::{Drain, DrainOutcome};
use crate::egress::EgressError;
use crate::registry::Registry;
use crate::sandbox::Sandbox;
use crate::session::Sessions;
use crate::workdir::ContextLists;

/// Default calls waiting for a slot before new ones are refused.
pub const DEFAULT_MAX_QUEUE: usize = 64;
/// How long a capability callback to the core may take.
pub const CALLBACK_TIMEOUT: Duration = Duration::from_secs(150);

/// Forwards a tool's capability requests to the core with the call's id and token, and
/// carries network calls' connections to its egress proxy.
#[derive(Debug)]
pub struct CoreBroker {
    client: RpcClient,
    streams: Option<StreamClient>,
}

impl CoreBroker {
    /// A broker over a client of the core's callback listener.
    pub fn new(client: RpcClient) -> Self {
        Self {
            client,
            streams: None,
        }
    }

    /// Opens network calls' egress streams with `streams` (a client of the same listener).
    pub fn with_streams(mut self, streams: StreamClient) -> Self {
        self.streams = Some(streams);
        self
    }
}

impl CapabilityBroker for CoreBroker {
    async fn request(
        &self,
        call: &CallInfo,
        method_name: &str,
        params: Option<Value>,
    ) -> Result<Value, ErrorObject> {
        let (core_method, params) = core_request(call, method_name, params)?;
        self.forward(core_method, params).await
    }

    async fn forward(
        &self,
        core_method: &'static str,
        params: Value,
    ) -> Result<Value, ErrorObject> {
        match self
            .client
            .call(core_method, &params, CALLBACK_TIMEOUT)
            .await
        {
            Ok(v) => Ok(v),
            Err(ClientError::Rpc(e)) => Err(e),
            Err(e) => Err(ErrorObject::new(
                code::CAPABILITY_UNAVAILABLE,
                format!("the core is unreachable for {core_method}: {e}"),
            )),
        }
    }

    async fn egress(&self, call: &CallInfo) -> Result<BoxedStream, EgressError> {
        let streams = self.streams.as_ref().ok_or(EgressError::NoCore)?;
        let token = &call.capability_token.0;
        let stream = streams.open_egress(&call.call_id, token).await?;
        Ok(Box::new(stream))
    }

    async fn file_stream(&self, call: &CallInfo) -> Option<BoxedStream> {
        let streams = self.streams.as_ref()?;
        let token = &call.capability_token.0;
        match streams.open_file(&call.call_id, token).await {
            Ok(stream) => Some(Box::new(stream)),
            Err(e) => {
                tracing::debug!(call_id = %call.call_id, error = %e, "no file stream: chunks instead");
                None
            }
        }
    }
}

/// The executor's method handler.
#[derive(Debug)]
pub struct ExecutorService {
    sandbox: Sandbox,
    skills_roots: Vec<PathBuf>,
    registry: RwLock<Arc<Registry>>,
    broker: Arc<CoreBroker>,
    sessions: Sessions<CoreBroker>,
    slots: Semaphore,
    max_queue: usize,
    waiting: AtomicUsize,
    in_flight: AtomicUsize,
    drain: Drain,
    /// The last list of files of each context, by digest.
    lists: ContextLists,
}

impl ExecutorService {
    /// A service over `skills_roots` (highest precedence first) that runs at most `max_concurrent` calls and queues at
    /// most `max_queue` more.
    pub fn new(
        sandbox: Sandbox,
        skills_roots: Vec<PathBuf>,
        broker: CoreBroker,
        max_concurrent: usize,
        max_queue: usize,
    ) -> Self {
        let registry = Registry::load_roots(&skills_roots);
        log_registry(&registry);
        let broker = Arc::new(broker);
        Self {
            sessions: Sessions::new(sandbox.clone(), Arc::clone(&broker)),
            sandbox,
            registry: RwLock::new(Arc::new(registry)),
            skills_roots,
            broker,
            slots: Semaphore::new(max_concurrent),
            max_queue,
            waiting: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            drain: Drain::default(),
            lists: ContextLists::default(),
        }
    }

    /// Drains: refuses new calls as draining, reports `draining` in `health`, and returns
    /// once the calls it holds have ended and the core knows (or `linger` passed), at most
    /// after `grace` ([`crate::drain`]).
    pub async fn drain(&self, grace: Duration, linger: Duration) -> DrainOutcome {
        self.sessions.end_all().await;
        self.drain.run(grace, linger).await
    }

    /// Starts the prestarted processes of the skills that ask for them and keeps them
    /// topped up. Needs a tokio runtime.
    pub fn prestart(&self) {
        crate::registry::start_warm_pool(&self.sandbox, &self.registry());
    }

    /// Kills every prestarted process and releases the user ids and scratch dirs made
    /// ahead (the executor is stopping).
    pub fn stop_prestarted(&self) {
        self.registry().warm().clear();
        self.sandbox.stop_ready();
    }

    fn registry(&self) -> Arc<Registry> {
        self.registry
            .read()
            .map(|r| Arc::clone(&r))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    async fn execute(&self, params: Option<&RawValue>) -> Result<Value, ErrorObject> {
        let arrived = std::time::Instant::now();
        let mut params: <ToolExecute as RpcMethod>::Params = decode::<ToolExecute>(params)?;
        if let Some(work) = params.workdir.as_mut() {
            self.lists.resolve(work)?;
        }
        let call_id = params.call_id.clone();
        let _held = self.drain.admit(&call_id)?;
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.max_queue
            && self.slots.available_permits() == 0
        {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            let r = ToolResult::failed(
                call_id,
                ErrorKind::Unavailable,
                format!(
                    "the executor is busy (queue of {} full); retry later",
                    self.max_queue
                ),
                0,
            );
            return to_value(&r);
        }
        let permit = self.slots.acquire().await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        let Ok(_permit) = permit else {
            return Err(ErrorObject::new(
                code::INTERNAL_ERROR,
                "executor shutting down",
            ));
        };
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let registry = self.registry();
        let result = call::execute(&self.sandbox, &registry, &*self.broker, params, arrived).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        to_value(&result)
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, ErrorObject> {
    serde_json::to_value(v).map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))
}

fn log_registry(registry: &Registry) {
    tracing::info!(skills = registry.len(), roots = %registry.describe_roots(), "skills loaded");
    for s in &registry.skipped {
        tracing::warn!(dir = %s.dir.display(), reason = %s.reason(), "skill skipped");
    }
}

/// The params of `M`, read from their JSON text as the method's own type (no `Value` tree
/// first); a refusal names the method.
fn decode<M: RpcMethod>(params: Option<&RawValue>) -> Result<M::Params, ErrorObject> {
    serde_json::from_str(params.map_or("null", RawValue::get))
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("{} params: {e}", M::NAME)))
}

impl RpcHandler for ExecutorService {
    fn handle<'a>(&'a self, method_name: &'a str, params: Option<Value>) -> RpcFuture<'a> {
        Box::pin(async move {
            let raw = (params
                .map(|p| serde_json::value::to_raw_value(&p))
                .transpose())
            .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, e.to_string()))?;
            self.handle_raw(method_name, raw.as_deref()).await
        })
    }

    fn handle_raw<'a>(
        &'a self,
        method_name: &'a str,
        params: Option<&'a RawValue>,
    ) -> RpcFuture<'a> {
        Box::pin(async move {
            let Some(called) = ExecutorMethod::parse(method_name) else {
                return Err(ErrorObject::new(
                    code::METHOD_NOT_FOUND,
                    format!(
                        "unknown method {method_name:?}; the executor serves {}",
                        ExecutorMethod::names()
                    ),
                ));
            };
            match called {
                ExecutorMethod::ToolExecute => self.execute(params).await,
                ExecutorMethod::ToolList => to_value(&ToolListResult {
                    tools: self.registry().tools(),
                }),
                ExecutorMethod::SkillReload => {
                    let registry = Registry::load_roots(&self.skills_roots);
                    log_registry(&registry);
                    let result = SkillReloadResult {
                        loaded: registry.len(),
                        skipped: registry.skipped.iter().map(|s| s.reason()).collect(),
                    };
                    let new = Arc::new(registry);
                    let old = self.registry();
                    crate::registry::reload_warm_pool(&self.sandbox, &old, &new);
                    if let Ok(mut r) = self.registry.write() {
                        *r = new;
                    }
                    to_value(&result)
                }
                ExecutorMethod::SessionExec => {
                    let mut p = decode::<SessionExec>(params)?;
                    self.lists.resolve(&mut p.files)?;
                    let answer = self.sessions.exec(&self.registry(), p).await?;
                    to_value(&answer)
                }
                ExecutorMethod::SessionWrite => {
                    let p = decode::<SessionWrite>(params)?;
                    to_value(&self.sessions.write(p).await?)
                }
                ExecutorMethod::DepsBuild => {
                    let p = decode::<DepsBuild>(params)?;
                    let built = crate::deps::build(&self.sandbox, &*self.broker, p).await;
                    let built =
                        built.map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))?;
                    to_value(&built)
                }
                ExecutorMethod::SessionClose => {
                    let p = decode::<SessionClose>(params)?;
                    to_value(&self.sessions.close(p).await)
                }
                ExecutorMethod::Health => {
                    let k = self.sandbox.kernel();
                    let sandboxed = !self.sandbox.config().insecure_no_sandbox;
                    to_value(&HealthResult {
                        status: if self.drain.report() {
                            HEALTH_DRAINING.into()
                        } else if sandboxed {
                            "ok".into()
                        } else {
                            "degraded".into()
                        },
                        landlock_abi: if sandboxed { k.landlock_abi } else { 0 },
                        seccomp: sandboxed && k.seccomp,
                        in_flight: self.in_flight.load(Ordering::SeqCst),
                        sandbox: Some(crate::availability::sandbox_facts(
                            &self.registry(),
                            k.network_namespaces,
                            k.unix_sockets,
                            k.memory_limit,
                            &crate::deps::deps_root(&self.sandbox),
                        )),
                    })
                }
            }
        })
    }
}
