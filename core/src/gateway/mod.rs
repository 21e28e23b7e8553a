//! The gateway for bots, agents and the operator (docs/http-api.md): HTTP on
//! 127.0.0.1:7070 by default, bearer-token auth on every route but `/healthz` (the
//! operator's token compared in constant time, bot tokens by their SHA-256), three
//! protocols over one shared layer: [`rest`] (JSON, one file per resource), [`mcp`] (the
//! MCP server) and [`console`] (the operator console, with sessions of its own), over
//! [`web`] (a request within its bounds, the one mapping of an error to its status, the
//! server and its connection bounds). [`table`] lists the routes with the role each
//! needs.

pub mod console;
mod mcp;
mod parts;
pub mod rest;
mod table;
pub mod web;

pub use mcp::classify_message as classify_mcp_message;
pub use parts::{
    ApprovalParts, CallParts, ContextParts, CoreParts, RecordParts, SkillParts, TokenParts, Views,
};
pub use rest::api;
pub use web::error::ApiError;
pub use web::server::{serve, ServerLimits};

use std::sync::Arc;

use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use skillbox_protocol::methods::SecretValue;
use subtle::ConstantTimeEq;

use crate::auth::Caller;
use web::body::ReplyBody;

/// What the gateway serves. Each family of handlers reads its own view of the core
/// ([`parts`]).
#[derive(Debug)]
pub struct Gateway {
    /// The skill store's handlers' view.
    pub skills: SkillParts,
    /// Tool calls' and routing's view.
    pub calls: CallParts,
    /// Contexts' and their files' view.
    pub contexts: ContextParts,
    /// Approvals' view.
    pub approvals: ApprovalParts,
    /// Bot tokens' view.
    pub tokens: TokenParts,
    /// Metrics' and history's view.
    pub records: RecordParts,
    /// The operator's bearer token (`Debug` prints `***`; compared in constant time).
    pub token: SecretValue,
    /// The bots' tokens.
    pub bots: Arc<crate::auth::BotTokens>,
    /// Largest request body.
    pub max_request_bytes: usize,
    /// Timeouts and the connection cap of the server ([`web::server`]).
    pub server_limits: ServerLimits,
    /// The skills root (for reloads).
    pub skills_root: std::path::PathBuf,
    /// Where installs go and the trust policy reloads apply (docs/http-api.md, install).
    pub trust: crate::skills::install::TrustPolicy,
    /// The one reload of skills and trust (shared with SIGHUP and the trust-folder watch).
    pub reloader: Arc<crate::reload::Reloader>,
    /// The executor containers' supervisor, when the core has a Docker engine.
    pub supervisor: Option<Arc<crate::executors::docker::supervisor::Supervisor>>,
    /// The operator console's sessions and sign-in links.
    pub console: console::Console,
    /// MCP calls that sent their client an approval link and go on waiting.
    pub mcp_waiting: mcp::WaitingCalls,
}

impl Gateway {
    /// The workspace whose state folder no skill file may be (the parent of the install
    /// root, as [`crate::reload`] reads its configuration).
    pub fn workspace(&self) -> std::path::PathBuf {
        let root = &self.trust.skills_root;
        root.parent().unwrap_or(root).to_path_buf()
    }

    /// Who the request's bearer token says it is: the operator, a bot, or a 401.
    fn authenticate(&self, headers: &http::HeaderMap) -> Result<Caller, ApiError> {
        let presented = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let Some(presented) = presented else {
            return Err(ApiError::unauthorized());
        };
        if bool::from(presented.as_bytes().ct_eq(self.token.0.as_bytes())) {
            return Ok(Caller::Operator);
        }
        match self.bots.authenticate(presented) {
            Some(Ok(bot)) => Ok(Caller::Bot(bot)),
            Some(Err(e)) => Err(ApiError::unauthorized_because(e.to_string())),
            None => Err(ApiError::unauthorized()),
        }
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<ReplyBody> {
        let path = req.uri().path();
        // The console signs browsers in with a session cookie of its own (console/).
        if path == "/console" || path.starts_with("/console/") {
            let (parts, body) = req.into_parts();
            let body: web::request::Body = body
                .map_err(|e| web::request::BodyError(e.to_string()))
                .boxed();
            let query = parts.uri.query().map(str::to_string);
            return console::handle(
                &self,
                parts.method,
                parts.uri.path(),
                query,
                parts.headers,
                body,
            )
            .await
            .map(ReplyBody::from);
        }
        let caller = if path == "/healthz" {
            None
        } else {
            match self.authenticate(req.headers()) {
                Ok(caller) => Some(caller),
                Err(e) => return e.into_response().map(ReplyBody::from),
            }
        };
        let (parts, body) = req.into_parts();
        let body: web::request::Body = body
            .map_err(|e| web::request::BodyError(e.to_string()))
            .boxed();
        let query = parts.uri.query().map(str::to_string);
        let path = parts.uri.path();
        let asked = table::Asked {
            method: &parts.method,
            path,
            caller,
        };
        match table::dispatch(&self, asked, query, parts.headers, body).await {
            Ok(r) => r,
            Err(e) => e.into_response().map(ReplyBody::from),
        }
    }
}

#[cfg(test)]
mod one_path_tests;
#[cfg(test)]
mod roles_tests;
#[cfg(test)]
mod tests;

/// The parts of a test dispatcher, for a test gateway.
#[cfg(test)]
pub(crate) fn test_parts(d: crate::calls::Dispatcher) -> CoreParts {
    CoreParts {
        load: Arc::clone(d.load()),
        store: d.store().clone(),
        approvals: Arc::clone(d.approvals()),
        metrics: Arc::clone(d.metrics()),
        executors: Arc::clone(d.executor()),
        availability: d.availability().clone(),
        container_sandbox: false,
        files: crate::contexts::files::ContextFiles::new(
            &d.store()
                .path()
                .parent()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_default(),
            d.store().clone(),
            Default::default(),
        ),
        deps: Arc::new(crate::deps::DepsBuilder::new(
            Arc::clone(d.load()),
            d.availability().deps().cloned(),
            Arc::clone(d.executor()),
            Arc::clone(d.in_flight()),
        )),
        pipeline: Arc::new(d),
    }
}

#[cfg(test)]
impl Gateway {
    /// The views of `core` in place of the gateway's own (a test's other dispatcher).
    pub(crate) fn set_parts(&mut self, core: CoreParts) {
        let views = core.views();
        self.skills = views.skills;
        self.calls = views.calls;
        self.contexts = views.contexts;
        self.approvals = views.approvals;
        self.tokens = views.tokens;
        self.records = views.records;
    }
}

/// A gateway for handler tests: a dispatcher over `catalog` with its state in
/// `<ws>/.skillbox` and no executor listening, the install root `skills_root`, and this
/// token, body limit and console.
#[cfg(test)]
pub(crate) fn test_gateway(
    ws: &std::path::Path,
    catalog: skillbox_protocol::skill::Catalog,
    skills_root: std::path::PathBuf,
    token: &str,
    max_request_bytes: usize,
    console: console::Console,
) -> Gateway {
    let core = test_parts(crate::calls::test_dispatcher(ws, catalog));
    let workspace = crate::state::Workspace::new(ws);
    let trust = crate::skills::install::TrustPolicy::for_workspace(&workspace, false);
    let bots = Arc::new(crate::auth::BotTokens::load(core.store.clone()).expect("bot tokens load"));
    let views = core.views();
    Gateway {
        bots,
        reloader: Arc::new(crate::reload::Reloader::new(
            core.reload_parts(),
            trust.clone(),
        )),
        skills: views.skills,
        calls: views.calls,
        contexts: views.contexts,
        approvals: views.approvals,
        tokens: views.tokens,
        records: views.records,
        token: SecretValue(token.to_string()),
        max_request_bytes,
        server_limits: ServerLimits::default(),
        skills_root,
        trust,
        supervisor: None,
        mcp_waiting: Default::default(),
        console,
    }
}
