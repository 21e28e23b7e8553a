//! The core's side of the executor's capability callbacks (`core.fetch`, `core.sign`,
//! `core.readFile`): each names its call id and presents the call's token; the request is
//! judged by the permissions of the skill the core dispatched under that id, never by
//! what the executor claims.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;
use skillbox_channel::server::{RpcFuture, RpcHandler};
use skillbox_protocol::jsonrpc::{code, ErrorObject};
use skillbox_protocol::methods::{
    CoreCallbackParams, CoreMethod, FetchParams, ReadFileParams, SignParams,
};
use skillbox_protocol::skill::Security;

use crate::approvals::{ApprovalRequest, Approvals};
use crate::calls::{ActiveCall, InFlight};
use crate::proxy::fetch::FetchProxy;
use crate::proxy::readfile::ReadFileProxy;
use crate::proxy::sign::Signer;

/// Answers capability callbacks.
#[derive(Debug)]
pub struct Callbacks {
    in_flight: Arc<InFlight>,
    approvals: Arc<Approvals>,
    fetch: FetchProxy,
    read_file: ReadFileProxy,
    signer: Signer,
}

impl Callbacks {
    /// Callbacks over the calls in flight, the approvals (a signature waits for one) and
    /// the proxies.
    pub fn new(
        in_flight: Arc<InFlight>,
        approvals: Arc<Approvals>,
        fetch: FetchProxy,
        read_file: ReadFileProxy,
        signer: Signer,
    ) -> Self {
        Self {
            in_flight,
            approvals,
            fetch,
            read_file,
            signer,
        }
    }

    fn authorize<T: DeserializeOwned>(
        &self,
        params: Option<Value>,
    ) -> Result<(Arc<ActiveCall>, T), ErrorObject> {
        let p: CoreCallbackParams<Value> = serde_json::from_value(params.unwrap_or(Value::Null))
            .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("callback params: {e}")))?;
        let call = self
            .in_flight
            .authorize(&p.call_id, &p.capability_token)
            .map_err(|e| {
                tracing::warn!(call_id = %p.call_id, reason = %e, "capability callback refused");
                ErrorObject::new(code::PERMISSION_DENIED, e.to_string())
            })?;
        let request = serde_json::from_value(p.request).map_err(|e| {
            ErrorObject::new(code::INVALID_PARAMS, format!("capability params: {e}"))
        })?;
        Ok((call, request))
    }

    async fn handle_inner(
        &self,
        method_name: &str,
        params: Option<Value>,
    ) -> Result<Value, ErrorObject> {
        let Some(called) = CoreMethod::parse(method_name) else {
            return Err(ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!(
                    "unknown method {method_name:?}; the core serves {}",
                    CoreMethod::names()
                ),
            ));
        };
        match called {
            CoreMethod::Fetch => {
                let (call, req): (_, FetchParams) = self.authorize(params)?;
                tracing::info!(skill = %call.skill.name, tool = %call.tool, url = %req.url, "fetch");
                let r = self
                    .fetch
                    .fetch(&call.skill.permissions.network, req)
                    .await
                    .map_err(|e| e.to_error_object())?;
                to_value(&r)
            }
            CoreMethod::ReadFile => {
                let (call, req): (_, ReadFileParams) = self.authorize(params)?;
                tracing::info!(skill = %call.skill.name, tool = %call.tool, path = %req.path, "readFile");
                let r = self
                    .read_file
                    .read(&call.skill.permissions.workspace.read, &req)
                    .map_err(|e| e.to_error_object())?;
                to_value(&r)
            }
            CoreMethod::Sign => {
                let (call, req): (_, SignParams) = self.authorize(params)?;
                if call.security != Security::Sign {
                    return Err(ErrorObject::new(
                        code::PERMISSION_DENIED,
                        format!(
                            "tool {}:{} is declared security {:?}; only tools with security: sign may sign",
                            call.skill.name, call.tool, call.security
                        ),
                    ));
                }
                let asked = self
                    .approvals
                    .request(ApprovalRequest {
                        skill: call.skill.name.clone(),
                        tool: call.tool.clone(),
                        args: serde_json::json!({"sign": {"type": req.kind, "data": req.data}}),
                        security: Security::Sign,
                    })
                    .await;
                if let Some(id) = match &asked {
                    Ok(grant) => grant.approval_id(),
                    Err(e) => e.approval_id(),
                } {
                    call.note_approval(id);
                }
                asked.map_err(|e| ErrorObject::new(code::APPROVAL_DENIED, e.to_string()))?;
                let r = self
                    .signer
                    .sign(&call.skill.name, &req)
                    .map_err(|e| e.to_error_object())?;
                to_value(&r)
            }
        }
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, ErrorObject> {
    serde_json::to_value(v).map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))
}

impl RpcHandler for Callbacks {
    fn handle<'a>(&'a self, method_name: &'a str, params: Option<Value>) -> RpcFuture<'a> {
        Box::pin(self.handle_inner(method_name, params))
    }
}
