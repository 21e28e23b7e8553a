//! The calls in flight: what a capability callback (`core.fetch`, `core.sign`,
//! `core.readFile`) is judged by. A call is registered when it is dispatched, with the
//! capability token issued for it, and leaves when it ends, however it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use skillbox_protocol::methods::SecretValue;
use skillbox_protocol::skill::{Security, Skill};
use subtle::ConstantTimeEq;

/// A call in flight, as its capability callbacks see it.
#[derive(Debug)]
pub struct ActiveCall {
    /// The skill the call was dispatched under (its permissions decide callbacks).
    pub skill: Arc<Skill>,
    /// The tool.
    pub tool: String,
    /// The tool's security level.
    pub security: Security,
    /// Who asked for the call, and in which context (a signature's approval names them).
    pub origin: crate::auth::CallOrigin,
    pub(super) token: SecretValue,
    pub(super) approvals: ApprovalTrail,
}

impl ActiveCall {
    /// Notes an approval this call waited on (its result names the last one).
    pub fn note_approval(&self, id: &str) {
        self.approvals.note(id);
    }
}

/// The approvals one call waited on, in order (shared by the call and its callbacks).
#[derive(Debug, Clone, Default)]
pub(super) struct ApprovalTrail(Arc<Mutex<Vec<String>>>);

impl ApprovalTrail {
    pub(super) fn note(&self, id: &str) {
        if let Ok(mut ids) = self.0.lock() {
            ids.push(id.to_string());
        }
    }

    pub(super) fn last(&self) -> Option<String> {
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

/// The table of calls in flight, shared by the pipeline (which registers calls) and the
/// callbacks (which look them up).
#[derive(Debug, Default)]
pub struct InFlight {
    calls: Mutex<HashMap<String, Arc<ActiveCall>>>,
}

impl InFlight {
    /// Registers `call` under `call_id` until the returned guard is dropped.
    pub(super) fn register(&self, call_id: &str, call: Arc<ActiveCall>) -> InFlightGuard<'_> {
        if let Ok(mut calls) = self.calls.lock() {
            calls.insert(call_id.to_string(), call);
        }
        InFlightGuard {
            table: self,
            call_id: call_id.to_string(),
        }
    }

    /// Whether no call is in flight.
    pub fn is_empty(&self) -> bool {
        self.calls.lock().map(|c| c.is_empty()).unwrap_or(true)
    }

    /// The call a callback belongs to, when its id is in flight and its token matches
    /// (compared in constant time).
    pub fn authorize(
        &self,
        call_id: &str,
        token: &SecretValue,
    ) -> Result<Arc<ActiveCall>, CallbackAuthError> {
        let call = self
            .calls
            .lock()
            .ok()
            .and_then(|calls| calls.get(call_id).cloned())
            .ok_or_else(|| CallbackAuthError::UnknownCall(call_id.to_string()))?;
        if bool::from(call.token.0.as_bytes().ct_eq(token.0.as_bytes())) {
            Ok(call)
        } else {
            Err(CallbackAuthError::BadToken(call_id.to_string()))
        }
    }
}

/// Removes a call from the table when it ends, however it ends.
pub(super) struct InFlightGuard<'a> {
    table: &'a InFlight,
    call_id: String,
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.table.calls.lock() {
            calls.remove(&self.call_id);
        }
    }
}
