//! The core's side of the executor's capability callbacks (`core.fetch`, `core.sign`,
//! `core.readFile`): each names its call id and presents the call's token; the request is
//! judged by the permissions of the skill the core dispatched under that id, never by
//! what the executor claims.

use std::sync::{Arc, OnceLock, Weak};

use serde::de::DeserializeOwned;
use serde_json::Value;
use skillbox_channel::server::{RpcFuture, RpcHandler};
use skillbox_protocol::jsonrpc::{code, ErrorObject};
use skillbox_protocol::methods::{
    Capability, CoreCallbackParams, CoreMethod, FetchParams, ReadFileParams, RunSkillParams,
    SignParams,
};
use skillbox_protocol::skill::Security;

use crate::approvals::payload::duplicate_key;
use crate::approvals::{ApprovalError, ApprovalRequest, Approvals};
use crate::calls::{ActiveCall, Dispatcher, InFlight};
use crate::proxy::fetch::FetchProxy;
use crate::proxy::readfile::ReadFileProxy;
use crate::proxy::sign::Signer;
use crate::proxy::ProxyError;

/// Answers capability callbacks.
#[derive(Debug)]
pub struct Callbacks {
    in_flight: Arc<InFlight>,
    approvals: Arc<Approvals>,
    fetch: FetchProxy,
    read_file: ReadFileProxy,
    signer: Signer,
    /// The pipeline a delegated call (`runSkill`) goes through; set once it is built
    /// (it holds the transports that hold these callbacks).
    dispatcher: OnceLock<Weak<Dispatcher>>,
}

impl Callbacks {
    /// Lets `runSkill` reach the pipeline.
    pub fn set_dispatcher(&self, dispatcher: &Arc<Dispatcher>) {
        let _ = self.dispatcher.set(Arc::downgrade(dispatcher));
    }

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
            dispatcher: OnceLock::new(),
        }
    }

    /// The call in flight the callback names, when its token is that call's, and the
    /// capability request it carries.
    fn authorize<T: DeserializeOwned>(
        &self,
        capability: Capability,
        params: Option<Value>,
    ) -> Result<(Arc<ActiveCall>, T), ProxyError> {
        self.authorize_as(capability.as_str(), params)
    }

    /// [`Callbacks::authorize`] of a callback named `cap`.
    fn authorize_as<T: DeserializeOwned>(
        &self,
        cap: &'static str,
        params: Option<Value>,
    ) -> Result<(Arc<ActiveCall>, T), ProxyError> {
        let p: CoreCallbackParams<Value> = serde_json::from_value(params.unwrap_or(Value::Null))
            .map_err(|e| ProxyError::invalid(cap, format!("callback params: {e}")))?;
        let call = self
            .in_flight
            .authorize(&p.call_id, &p.capability_token)
            .map_err(|e| {
                tracing::warn!(call_id = %p.call_id, reason = %e, "capability callback refused");
                ProxyError::denied(cap, e.to_string())
            })?;
        let request = serde_json::from_value(p.request)
            .map_err(|e| ProxyError::invalid(cap, format!("capability params: {e}")))?;
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
            CoreMethod::ContextFileRead
            | CoreMethod::ContextFileWrite
            | CoreMethod::ContextFileDelete => self.context_file(called, params).await,
            _ => self
                .capability(called, params)
                .await
                .map_err(|e| e.to_error_object()),
        }
    }

    /// A file of the call's context, read, written or removed by the executor for the call
    /// (calls/workfiles.rs judges it).
    async fn context_file(
        &self,
        called: CoreMethod,
        params: Option<Value>,
    ) -> Result<Value, ErrorObject> {
        let name = called.as_str();
        let (call, request): (_, Value) = self
            .authorize_as(name, params)
            .map_err(|e| e.to_error_object())?;
        let Some(files) = call.files.clone() else {
            return Err(
                ProxyError::denied(name, "the call was not made in a context").to_error_object(),
            );
        };
        let bad = |e: serde_json::Error| {
            ProxyError::invalid(name, format!("request: {e}")).to_error_object()
        };
        let answer = match called {
            CoreMethod::ContextFileRead => to_value(
                &files
                    .read(serde_json::from_value(request).map_err(bad)?)
                    .await?,
            ),
            CoreMethod::ContextFileWrite => to_value(
                &files
                    .write(serde_json::from_value(request).map_err(bad)?)
                    .await?,
            ),
            _ => {
                files
                    .delete(serde_json::from_value(request).map_err(bad)?)
                    .await?;
                to_value(&skillbox_protocol::workdir::ContextFileDeleted {})
            }
        };
        answer.map_err(|e| e.to_error_object())
    }

    /// Performs one capability request; every refusal is a [`ProxyError`], turned into its
    /// JSON-RPC error in one place ([`ProxyError::to_error_object`]).
    async fn capability(
        &self,
        called: CoreMethod,
        params: Option<Value>,
    ) -> Result<Value, ProxyError> {
        match called {
            CoreMethod::Fetch => {
                let (call, req): (_, FetchParams) = self.authorize(Capability::Fetch, params)?;
                tracing::info!(skill = %call.skill.name, tool = %call.tool, url = %req.url, "fetch");
                let r = self
                    .fetch
                    .fetch_with(&call.skill.permissions.reachable(), req, &call.secrets)
                    .await?;
                to_value(&r)
            }
            CoreMethod::ReadFile => {
                let (call, req): (_, ReadFileParams) =
                    self.authorize(Capability::ReadFile, params)?;
                tracing::info!(skill = %call.skill.name, tool = %call.tool, path = %req.path, "readFile");
                let r = self
                    .read_file
                    .read(&call.skill.permissions.workspace.read, &req)?;
                to_value(&r)
            }
            CoreMethod::Sign => {
                let (call, req): (_, SignParams) = self.authorize(Capability::Sign, params)?;
                if call.security != Security::Sign {
                    return Err(ProxyError::denied(
                        Capability::Sign.as_str(),
                        format!(
                            "tool {}:{} is declared security {:?}; only tools with security: sign may sign",
                            call.skill.name, call.tool, call.security
                        ),
                    ));
                }
                if let Some(duplicate) = duplicate_key(&req.data) {
                    tracing::warn!(skill = %call.skill.name, tool = %call.tool, "sign refused: duplicate JSON key");
                    return Err(ProxyError::invalid(
                        Capability::Sign.as_str(),
                        format!(
                            "the data is JSON in which {duplicate}; it is not signed nor shown \
                             to the operator. Send JSON with each key once"
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
                        requested_by: call.origin.caller.name().to_owned(),
                        context_id: call.origin.context_id.clone(),
                    })
                    .await;
                if let Some(id) = match &asked {
                    Ok(grant) => grant.approval_id(),
                    Err(e) => e.approval_id(),
                } {
                    call.note_approval(id);
                }
                asked.map_err(|e| {
                    let Some(why) = signature_refusal(&e) else {
                        return ProxyError::Unavailable {
                            capability: Capability::Sign.as_str(),
                            reason: format!("the approval could not be asked for: {e}"),
                        };
                    };
                    call.note_refused_signature(why.clone());
                    ProxyError::ApprovalDenied {
                        capability: Capability::Sign.as_str(),
                        reason: format!(
                            "sign refused: {why}; nothing was signed. Ask the operator, or send \
                             the request again to ask for a new approval"
                        ),
                    }
                })?;
                to_value(&self.signer.sign(&call.skill.name, &req)?)
            }
            CoreMethod::RunSkill => {
                let (call, req): (_, RunSkillParams) =
                    self.authorize(Capability::RunSkill, params)?;
                let Some(dispatcher) = self.dispatcher.get().and_then(Weak::upgrade) else {
                    return Err(ProxyError::Unavailable {
                        capability: Capability::RunSkill.as_str(),
                        reason: "the core's pipeline is not running".into(),
                    });
                };
                to_value(&dispatcher.delegate(&call, req).await?)
            }
            CoreMethod::ContextFileRead
            | CoreMethod::ContextFileWrite
            | CoreMethod::ContextFileDelete => Err(ProxyError::invalid(
                called.as_str(),
                "not a capability of a tool",
            )),
        }
    }
}

/// How a signature request was refused for want of an approval, in the words of a
/// signature (the tool runs on; only the signature was refused), or `None` when the
/// approval could not be asked for at all (the database failed).
fn signature_refusal(e: &ApprovalError) -> Option<String> {
    Some(match e {
        ApprovalError::Denied { id, reason } => format!(
            "signature approval {id} was denied{}",
            reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ),
        ApprovalError::TimedOut { id, timeout_ms } => {
            format!("signature approval {id} got no decision within {timeout_ms} ms and expired")
        }
        ApprovalError::AlreadyUsed { id } => {
            format!("signature approval {id} was already used by an identical request")
        }
        _ => return None,
    })
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, ProxyError> {
    serde_json::to_value(v).map_err(|e| ProxyError::Unavailable {
        capability: "callback",
        reason: format!("the answer could not be encoded: {e}"),
    })
}

impl RpcHandler for Callbacks {
    fn handle<'a>(&'a self, method_name: &'a str, params: Option<Value>) -> RpcFuture<'a> {
        Box::pin(self.handle_inner(method_name, params))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_signature_says_nothing_was_signed_not_that_the_call_did_not_run() {
        let denied = ApprovalError::Denied {
            id: "ap_1".into(),
            reason: Some("not today".into()),
        };
        assert_eq!(
            signature_refusal(&denied).as_deref(),
            Some("signature approval ap_1 was denied (not today)")
        );
        let expired = ApprovalError::TimedOut {
            id: "ap_2".into(),
            timeout_ms: 1500,
        };
        assert_eq!(
            signature_refusal(&expired).as_deref(),
            Some("signature approval ap_2 got no decision within 1500 ms and expired")
        );
        // The approval could not even be asked for: not a refusal by an operator.
        assert_eq!(signature_refusal(&ApprovalError::RandomId), None);
    }
}
