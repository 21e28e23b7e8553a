//! What the egress proxy asks of the calls in flight, by a connection's call id and
//! token: the [`EgressCalls`] trait, which the in-flight registry (`calls::InFlight`)
//! implements, so that the proxy judges a connection by the call it names without
//! knowing the pipeline.

use std::sync::Arc;

use skillbox_protocol::methods::SecretValue;
use skillbox_protocol::skill::Skill;

use super::EgressLog;
use crate::proxy::secrets::CallSecrets;
use crate::proxy::CallbackAuthError;

/// A call in flight as its programs' connections see it.
#[derive(Debug, Clone)]
pub struct EgressCall {
    /// The skill the call was dispatched under (its effective `permissions.network`
    /// decides the hosts; its name goes in the log).
    pub skill: Arc<Skill>,
    /// Its bound secrets: a connection of a call holding any is read request by request.
    pub secrets: Arc<CallSecrets>,
    /// Its connections: the limits' counters and the record stored with the call.
    pub egress: EgressLog,
    /// Whether it is a dependency build (its tool is [`DEPS_BUILD_TOOL`]): its package
    /// downloads go through the download cache (`cache/`).
    pub deps_build: bool,
}

/// The tool name of a dependency build's identity in the calls in flight.
pub const DEPS_BUILD_TOOL: &str = "deps.build";

/// The calls in flight, as the egress proxy asks about them.
pub trait EgressCalls: Send + Sync + std::fmt::Debug {
    /// The call `call_id`, when it is in flight and `token` is its own capability token
    /// (compared in constant time).
    fn egress_call(
        &self,
        call_id: &str,
        token: &SecretValue,
    ) -> Result<EgressCall, CallbackAuthError>;
}
