//! The dispatcher: one gateway tool call to the executor and back. It checks the skill is
//! available, waits for an approval where the tool's security asks for one, issues the
//! call id and a per-call capability token, hands the executor the declared env values,
//! records the outcome, and keeps the call's permissions for its capability callbacks
//! until the call ends (the token dies with it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use skillbox_protocol::channel::client::ClientError;
use skillbox_protocol::methods::{method, SecretValue, ToolExecuteParams};
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::skill::{Catalog, SandboxKind, Security, Skill};
use subtle::ConstantTimeEq;

use crate::approvals::{ApprovalRequest, Approvals};
use crate::availability::SandboxReadiness;
use crate::docker::oneoff::ContainerRunner;
use crate::executors::ExecutorPool;
use crate::random::{self, RandomSource, SystemSource};
use crate::router::context_readiness;
use crate::secrets::Secrets;
use crate::store::{unix_ms_now, CallRecord, Store};

/// A call in flight, as its capability callbacks see it.
#[derive(Debug)]
pub struct ActiveCall {
    /// The skill the call was dispatched under (its permissions decide callbacks).
    pub skill: Arc<Skill>,
    /// The tool.
    pub tool: String,
    /// The tool's security level.
    pub security: Security,
    token: SecretValue,
    approvals: ApprovalTrail,
}

impl ActiveCall {
    /// Notes an approval this call waited on (its result names the last one).
    pub fn note_approval(&self, id: &str) {
        self.approvals.note(id);
    }
}

/// The approvals one call waited on, in order (shared by the call and its callbacks).
#[derive(Debug, Clone, Default)]
struct ApprovalTrail(Arc<Mutex<Vec<String>>>);

impl ApprovalTrail {
    fn note(&self, id: &str) {
        if let Ok(mut ids) = self.0.lock() {
            ids.push(id.to_string());
        }
    }

    fn last(&self) -> Option<String> {
        self.0.lock().ok().and_then(|ids| ids.last().cloned())
    }
}

/// Why a callback is refused before its request is looked at.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CallbackAuthError {
    /// No call in flight has this id (never issued, or already ended).
    #[error("no call {0:?} is in flight; capabilities exist only during their call")]
    UnknownCall(String),
    /// The token is not the one issued with the call.
    #[error("the capability token does not belong to call {0:?}")]
    BadToken(String),
}

/// Routes tool calls to the executor.
#[derive(Debug)]
pub struct Dispatcher {
    catalog: RwLock<Arc<Catalog>>,
    executor: Arc<ExecutorPool>,
    containers: OnceLock<Arc<ContainerRunner>>,
    secrets: Secrets,
    approvals: Arc<Approvals>,
    store: Store,
    active: Mutex<HashMap<String, Arc<ActiveCall>>>,
    call_timeout: Duration,
    rng: Arc<dyn RandomSource>,
}

impl Dispatcher {
    /// A dispatcher over a catalog and the executors.
    pub fn new(
        catalog: Catalog,
        executor: Arc<ExecutorPool>,
        secrets: Secrets,
        approvals: Arc<Approvals>,
        store: Store,
        call_timeout: Duration,
    ) -> Self {
        Self {
            catalog: RwLock::new(Arc::new(catalog)),
            executor,
            containers: OnceLock::new(),
            secrets,
            approvals,
            store,
            active: Mutex::new(HashMap::new()),
            call_timeout,
            rng: Arc::new(SystemSource::default()),
        }
    }

    /// Draws call ids and capability tokens from `rng` instead of the operating system
    /// (a seam for tests of a failing source).
    pub fn with_random(mut self, rng: Arc<dyn RandomSource>) -> Self {
        self.rng = rng;
        self
    }

    /// The skills the core knows.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .map(|c| Arc::clone(&c))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    /// Replaces the catalog (after a reload).
    pub fn set_catalog(&self, catalog: Catalog) {
        if let Ok(mut c) = self.catalog.write() {
            *c = Arc::new(catalog);
        }
    }

    /// The executors.
    pub fn executor(&self) -> &Arc<ExecutorPool> {
        &self.executor
    }

    /// Runs the calls of `execution.sandbox: container` skills from now on (set once).
    pub fn set_container_runner(&self, runner: Arc<ContainerRunner>) {
        let _ = self.containers.set(runner);
    }

    /// The runner of `execution.sandbox: container` calls, when the core has a Docker engine.
    pub fn container_runner(&self) -> Option<&Arc<ContainerRunner>> {
        self.containers.get()
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

    /// What the executors' sandboxes can start and the env values the core holds: the
    /// readiness every availability question is answered from.
    pub fn readiness(&self) -> SandboxReadiness<'_> {
        SandboxReadiness::new(self.executor.sandbox_facts(), &self.secrets)
    }

    /// Why a skill cannot be used now, if it cannot: a program its tools need that the
    /// executors' sandboxes lack, an OS they do not run, an env value the core does not
    /// hold ([`crate::router::context_readiness`], the one verdict).
    pub fn unavailable_reason(&self, skill: &Skill) -> Option<String> {
        context_readiness(skill, &self.readiness()).1
    }

    /// A fresh call id (24 hex digits), for results the gateway answers itself (built-in
    /// tools, refusals before dispatch).
    pub fn new_call_id(&self) -> Result<String, random::RandomError> {
        random::hex(self.rng.as_ref(), 12, "call id")
    }

    /// Runs `skill:tool` with `args`.
    pub async fn call(&self, full_name: &str, args: Value) -> ToolResult {
        let started = Instant::now();
        let started_at = unix_ms_now();
        let call_id = match random::hex(self.rng.as_ref(), 12, "call id") {
            Ok(id) => id,
            Err(e) => {
                tracing::error!(tool = %full_name, error = %e, "call refused");
                return ToolResult::failed(String::new(), ErrorKind::Unavailable, e.to_string(), 0);
            }
        };
        let trail = ApprovalTrail::default();
        let result = self.run(&call_id, full_name, args, &trail).await;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut result = match result {
            Ok(r) => r,
            Err((kind, msg)) => ToolResult::failed(call_id.clone(), kind, msg, duration_ms),
        };
        result.call_id = call_id.clone();
        result.approval_id = trail.last();
        if let Some((skill, tool)) = full_name.split_once(':') {
            let record = CallRecord {
                call_id,
                skill: skill.to_string(),
                tool: tool.to_string(),
                started_at,
                duration_ms,
                success: result.success,
                error_kind: result.error_kind,
            };
            let store = self.store.clone();
            let _ = tokio::task::spawn_blocking(move || {
                if let Err(e) = store.record_call(&record) {
                    tracing::error!(error = %e, "cannot record the call");
                }
            })
            .await;
        }
        result
    }

    async fn run(
        &self,
        call_id: &str,
        full_name: &str,
        args: Value,
        trail: &ApprovalTrail,
    ) -> Result<ToolResult, (ErrorKind, String)> {
        let (skill_name, tool_name) = full_name.split_once(':').ok_or((
            ErrorKind::NotFound,
            format!("{full_name:?} is not a tool name; use \"skill:tool\""),
        ))?;
        let catalog = self.catalog();
        let skill = catalog
            .get(skill_name)
            .cloned()
            .map(Arc::new)
            .ok_or_else(
                || match crate::install::disabled::reason(&catalog, skill_name) {
                    Some(why) => (
                        ErrorKind::PermissionDenied,
                        format!("skill {skill_name:?} is disabled by the trust policy: {why}"),
                    ),
                    None => (
                        ErrorKind::NotFound,
                        format!("no skill named {skill_name:?}"),
                    ),
                },
            )?;
        let tool = skill.tool(tool_name).cloned().ok_or((
            ErrorKind::NotFound,
            format!("skill {skill_name:?} has no tool {tool_name:?}"),
        ))?;
        if let Some(reason) = self.unavailable_reason(&skill) {
            return Err((
                ErrorKind::Unavailable,
                format!("skill {skill_name:?} is unavailable: {reason}"),
            ));
        }
        // A `write` tool waits for an approval of the call. A `sign` tool waits at each
        // signature instead, where the operator sees what is being signed (callbacks.rs):
        // asking twice for one signature would only train operators to click through.
        if tool.security == Security::Write {
            let asked = self
                .approvals
                .request(ApprovalRequest {
                    skill: skill.name.clone(),
                    tool: tool.name.clone(),
                    args: args.clone(),
                    security: tool.security,
                })
                .await;
            if let Some(id) = match &asked {
                Ok(grant) => grant.approval_id(),
                Err(e) => e.approval_id(),
            } {
                trail.note(id);
            }
            asked.map_err(|e| (e.error_kind(), e.to_string()))?;
        }
        let token = random::token(self.rng.as_ref(), "capability token")
            .map(SecretValue)
            .map_err(|e| (ErrorKind::Unavailable, e.to_string()))?;
        let params = ToolExecuteParams {
            call_id: call_id.to_string(),
            capability_token: token.clone(),
            skill: skill.name.clone(),
            tool: tool.name.clone(),
            args,
            env: self.secrets.for_names(&skill.permissions.env),
        };
        let active = Arc::new(ActiveCall {
            skill: Arc::clone(&skill),
            tool: tool.name.clone(),
            security: tool.security,
            token,
            approvals: trail.clone(),
        });
        let _guard = self.register(call_id, active);
        if skill.execution.sandbox == SandboxKind::Container {
            let runner = self.containers.get().ok_or_else(|| {
                (
                    ErrorKind::Unavailable,
                    format!(
                        "skill {skill_name:?} asks for execution.sandbox: container and the core has no Docker engine; \
                         give the core the Docker socket ([docker] socket) or change the skill's sandbox"
                    ),
                )
            })?;
            let timeout = Duration::from_millis(skill.timeout_ms(&tool));
            return runner
                .run(Arc::clone(&skill), params, timeout)
                .await
                .map_err(|e| (e.error_kind(), e.to_string()));
        }
        let params =
            serde_json::to_value(params).map_err(|e| (ErrorKind::Protocol, e.to_string()))?;
        match self.executor.call(method::TOOL_EXECUTE, params, self.call_timeout).await {
            Ok(v) => serde_json::from_value::<ToolResult>(v)
                .map_err(|e| (ErrorKind::Protocol, format!("the executor's answer is not a tool result: {e}"))),
            Err(ClientError::Rpc(e)) => Err((ErrorKind::Protocol, format!("the executor refused the call: {}", e.message))),
            Err(e @ ClientError::Timeout { .. }) => Err((ErrorKind::Timeout, e.to_string())),
            Err(e) => Err((
                ErrorKind::Unavailable,
                format!("the executor is unavailable ({e}); the call did not complete, retry once it is back"),
            )),
        }
    }

    fn register(&self, call_id: &str, call: Arc<ActiveCall>) -> ActiveGuard<'_> {
        if let Ok(mut a) = self.active.lock() {
            a.insert(call_id.to_string(), call);
        }
        ActiveGuard {
            dispatcher: self,
            call_id: call_id.to_string(),
        }
    }

    /// The call a callback belongs to, when its id is in flight and its token matches
    /// (compared in constant time).
    pub fn authorize(
        &self,
        call_id: &str,
        token: &SecretValue,
    ) -> Result<Arc<ActiveCall>, CallbackAuthError> {
        let call = self
            .active
            .lock()
            .ok()
            .and_then(|a| a.get(call_id).cloned())
            .ok_or_else(|| CallbackAuthError::UnknownCall(call_id.to_string()))?;
        if bool::from(call.token.0.as_bytes().ct_eq(token.0.as_bytes())) {
            Ok(call)
        } else {
            Err(CallbackAuthError::BadToken(call_id.to_string()))
        }
    }
}

/// Removes a call from the in-flight table when it ends, however it ends.
struct ActiveGuard<'a> {
    dispatcher: &'a Dispatcher,
    call_id: String,
}

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut a) = self.dispatcher.active.lock() {
            a.remove(&self.call_id);
        }
    }
}

/// A dispatcher over `catalog` with its state in `<ws>/.skillbox` and no executor
/// listening (for tests here and in the gateway).
#[cfg(test)]
pub(crate) fn test_dispatcher(ws: &std::path::Path, catalog: Catalog) -> Dispatcher {
    let state = crate::state::ensure_dir(ws).unwrap();
    crate::pki::ensure(&state).unwrap();
    let executor = Arc::new(
        ExecutorPool::new(
            &["https://127.0.0.1:9".to_string()],
            crate::pki::core_files(&state),
        )
        .unwrap(),
    );
    let store = Store::open(&Store::db_path(&state)).unwrap();
    let approvals = Arc::new(Approvals::new(
        store.clone(),
        crate::approvals::ApprovalPolicy {
            auto_approve: Vec::new(),
            timeout_ms: 1000,
        },
    ));
    Dispatcher::new(
        catalog,
        executor,
        Secrets::default(),
        approvals,
        store,
        Duration::from_secs(5),
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use skillbox_protocol::skill::{discover, DiscoveryOptions};

    use super::*;
    use crate::random::fake::FailingAfter;

    /// A dispatcher over the skill `s` (tool `t`) in `ws`, no executor listening, whose
    /// random source gives `ok_draws` draws and then fails.
    fn dispatcher(ws: &Path, ok_draws: usize) -> Dispatcher {
        let skills = ws.join("skills");
        std::fs::create_dir_all(skills.join("s")).unwrap();
        std::fs::write(
            skills.join("s/skill.yaml"),
            "name: s\nversion: 0.1.0\ndescription: test skill\ntools:\n  - name: t\n    \
             description: test tool\n    command: [\"true\"]\n",
        )
        .unwrap();
        let catalog = discover(&[skills], DiscoveryOptions::default());
        assert!(catalog.get("s").is_some(), "{:?}", catalog.skipped);
        test_dispatcher(ws, catalog).with_random(Arc::new(FailingAfter::new(ok_draws)))
    }

    #[tokio::test]
    async fn call_fails_unavailable_when_no_call_id_can_be_drawn() {
        let ws = tempfile::tempdir().unwrap();
        let r = dispatcher(ws.path(), 0).call("s:t", Value::Null).await;
        assert!(!r.success);
        assert_eq!(r.error_kind, Some(ErrorKind::Unavailable));
        let error = r.error.unwrap_or_default();
        assert!(error.contains("no call id could be made"), "{error}");
        assert!(r.call_id.is_empty(), "an id of zeros: {}", r.call_id);
    }

    #[tokio::test]
    async fn call_fails_unavailable_when_no_capability_token_can_be_drawn() {
        let ws = tempfile::tempdir().unwrap();
        let d = dispatcher(ws.path(), 1);
        let r = d.call("s:t", serde_json::json!({})).await;
        assert!(!r.success);
        assert_eq!(r.error_kind, Some(ErrorKind::Unavailable));
        let error = r.error.unwrap_or_default();
        assert!(
            error.contains("no capability token could be made"),
            "{error}"
        );
        // Nothing was registered for callbacks: no call holds a token of zeros.
        assert!(d.active.lock().unwrap().is_empty());
        let zeros = SecretValue(base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            [0u8; 32],
        ));
        assert_eq!(
            d.authorize(&r.call_id, &zeros).unwrap_err(),
            CallbackAuthError::UnknownCall(r.call_id.clone())
        );
    }
}
