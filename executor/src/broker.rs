//! Where a tool's capability requests (`fetch`, `sign`, `readFile`) go. The core's channel
//! (`server::CoreBroker`, over mutual TLS) and the stdio relay (`relay::RelayBroker`, over
//! the executor's own stdin/stdout) implement [`CapabilityBroker`] and forward each request
//! as [`core_request`] says; in one-shot mode ([`OneShotBroker`]) there is no core and every
//! request answers -32003. The executor's own callbacks for a call's context files
//! (`core.contextFileRead/Write/Delete`) go the same way ([`core_call`]), and so do a
//! network call's connections ([`CapabilityBroker::egress`], [`crate::egress`]).

use std::future::Future;

use skillbox_channel::client::ClientError;
use skillbox_channel::stream::BoxedStream;

use serde_json::Value;
use skillbox_protocol::jsonrpc::{code, ErrorObject};
use skillbox_protocol::methods::{Capability, CoreCallbackParams, SecretValue};
use skillbox_protocol::rpc::RpcMethod;

/// The call a capability request belongs to.
#[derive(Debug, Clone)]
pub struct CallInfo {
    /// Call id from the core.
    pub call_id: String,
    /// Skill name.
    pub skill: String,
    /// Tool name.
    pub tool: String,
    /// Token the core issued for this call; presented back on every callback.
    pub capability_token: SecretValue,
}

/// Answers capability requests of tool processes.
pub trait CapabilityBroker: Send + Sync {
    /// Handles one request (`method` is `fetch`, `sign` or `readFile`).
    fn request(
        &self,
        call: &CallInfo,
        method: &str,
        params: Option<Value>,
    ) -> impl Future<Output = Result<Value, ErrorObject>> + Send;

    /// Sends one core method with its params as they are (they carry the call id and
    /// token already): the path of [`core_call`].
    fn forward(
        &self,
        core_method: &'static str,
        params: Value,
    ) -> impl Future<Output = Result<Value, ErrorObject>> + Send;

    /// Opens a stream to the core's egress proxy for one connection of `call`'s programs,
    /// naming the call and presenting its token ([`crate::egress`]). Without a core (the
    /// default) there is none.
    fn egress(
        &self,
        call: &CallInfo,
    ) -> impl Future<Output = Result<BoxedStream, EgressError>> + Send {
        let _ = call;
        async { Err(EgressError::NoCore) }
    }

    /// Opens a context file stream of `call` to the core (`POST /file`, raw bytes:
    /// `workdir/fetch_stream.rs`) when a channel to the core can; `None` otherwise (the
    /// default), and the file comes in `core.contextFileRead` chunks.
    fn file_stream(&self, call: &CallInfo) -> impl Future<Output = Option<BoxedStream>> + Send {
        let _ = call;
        async { None }
    }
}

/// Calls core method `M` for `call` with `request`, typed both ways: the params carry the
/// call's id and capability token, as a tool's forwarded capability request does.
pub async fn core_call<M, T, B>(
    broker: &B,
    call: &CallInfo,
    request: T,
) -> Result<M::Result, ErrorObject>
where
    M: RpcMethod<Params = CoreCallbackParams<T>>,
    T: serde::Serialize,
    B: CapabilityBroker + ?Sized,
{
    let body = CoreCallbackParams {
        call_id: call.call_id.clone(),
        capability_token: call.capability_token.clone(),
        request,
    };
    let params = serde_json::to_value(body)
        .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))?;
    let answer = broker.forward(M::NAME, params).await?;
    serde_json::from_value(answer).map_err(|e| {
        ErrorObject::new(
            code::INTERNAL_ERROR,
            format!("the core's answer to {} does not parse: {e}", M::NAME),
        )
    })
}

/// The core method a tool's capability request is forwarded as (`fetch` → `core.fetch`,
/// `sign` → `core.sign`, `readFile` → `core.readFile`) and its params: the call id, the
/// call's capability token and the tool's request (docs/architecture.md). An unknown capability
/// answers -32601.
pub fn core_request(
    call: &CallInfo,
    capability: &str,
    params: Option<Value>,
) -> Result<(&'static str, Value), ErrorObject> {
    let core_method = Capability::parse(capability)
        .ok_or_else(|| {
            ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!(
                    "unknown capability {capability:?}; available: {}",
                    Capability::names()
                ),
            )
        })?
        .core_method()
        .as_str();
    let body = CoreCallbackParams {
        call_id: call.call_id.clone(),
        capability_token: call.capability_token.clone(),
        request: params.unwrap_or(Value::Null),
    };
    let body = serde_json::to_value(body)
        .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))?;
    Ok((core_method, body))
}

/// The broker of `skillbox-executor exec`: no core, no capabilities.
#[derive(Debug, Clone, Copy, Default)]
pub struct OneShotBroker;

impl CapabilityBroker for OneShotBroker {
    async fn request(
        &self,
        _call: &CallInfo,
        method: &str,
        _params: Option<Value>,
    ) -> Result<Value, ErrorObject> {
        Err(ErrorObject::new(
            code::CAPABILITY_UNAVAILABLE,
            format!("capability {method:?} is unavailable: no core is connected (one-shot mode)"),
        ))
    }

    async fn forward(
        &self,
        core_method: &'static str,
        _params: Value,
    ) -> Result<Value, ErrorObject> {
        Err(ErrorObject::new(
            code::CAPABILITY_UNAVAILABLE,
            format!("{core_method} is unavailable: no core is connected (one-shot mode)"),
        ))
    }
}

/// A call for unit tests across the crate.
#[cfg(test)]
pub(crate) mod test_support {
    use super::CallInfo;
    use skillbox_protocol::methods::SecretValue;

    /// Call `c1` of `s:t` with token `tok`.
    pub(crate) fn sample_call() -> CallInfo {
        CallInfo {
            call_id: "c1".into(),
            skill: "s".into(),
            tool: "t".into(),
            capability_token: SecretValue("tok".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use super::test_support::sample_call as call;

    #[test]
    fn core_request_maps_each_capability_to_its_core_method() {
        for (capability, core) in [
            ("fetch", "core.fetch"),
            ("sign", "core.sign"),
            ("readFile", "core.readFile"),
        ] {
            let (method, body) = core_request(&call(), capability, Some(json!({"a": 1}))).unwrap();
            assert_eq!(method, core);
            assert_eq!(
                body,
                json!({"call_id": "c1", "capability_token": "tok", "request": {"a": 1}})
            );
        }
    }

    #[test]
    fn core_request_refuses_unknown_capability() {
        let err = core_request(&call(), "exec", None).unwrap_err();
        assert_eq!(err.code, code::METHOD_NOT_FOUND);
        assert!(err.message.contains("\"exec\""), "{}", err.message);
    }
}

/// Why a connection could not be carried to the core.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// The executor runs without a core (`skillbox-executor exec`, `exec --stdio`).
    #[error("this executor has no core to carry the call's network (skillbox-executor exec runs without one); run the call through skillbox")]
    NoCore,
    /// The stream to the core's egress proxy could not be opened.
    #[error("the core's egress proxy is unreachable: {0}")]
    Core(#[from] ClientError),
}
