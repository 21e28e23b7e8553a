//! Where a tool's capability requests (`fetch`, `sign`, `readFile`) go. The core's channel
//! implements [`CapabilityBroker`]; in one-shot mode ([`OneShotBroker`]) there is no core
//! and every request answers -32003.

use std::future::Future;

use serde_json::Value;
use skillbox_protocol::jsonrpc::{code, ErrorObject};
use skillbox_protocol::methods::SecretValue;

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
}
