//! The calls in flight: what a capability callback (`core.fetch`, `core.sign`,
//! `core.readFile`) is judged by. A call is registered when it is dispatched, with the
//! capability token issued for it, and leaves when it ends, however it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use skillbox_protocol::methods::SecretValue;
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::skill::{Security, Skill};
use subtle::ConstantTimeEq;

use crate::proxy::egress::{EgressCall, EgressCalls, EgressLog};
use crate::proxy::CallbackAuthError;

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
    /// The context's files, when the call was made in a context.
    pub files: Option<Arc<super::workfiles::CallFiles>>,
    /// The connections its programs make through the egress proxy (stored with the call).
    pub egress: EgressLog,
    /// Its bound secrets: the placeholders its programs hold and the values behind them.
    pub secrets: Arc<crate::proxy::secrets::CallSecrets>,
    /// The skills above it when it was delegated, its deadline and the budget of calls it
    /// shares with them (`runSkill`).
    pub delegation: super::delegate::Delegation,
    /// The calls its programs delegated, in order (its result lists them).
    pub delegated: Mutex<Vec<skillbox_protocol::result::DelegatedCall>>,
}

impl ActiveCall {
    /// The record of a piece of executor work acting for `origin` under `skill` (its
    /// `tool`, of `security`), holding `token`: no files, no secrets, no delegation, a
    /// trail and an egress log of its own. The `with_*` steps add what a job has beyond.
    pub fn new(
        skill: Arc<Skill>,
        tool: impl Into<String>,
        security: Security,
        origin: crate::auth::CallOrigin,
        token: SecretValue,
    ) -> Self {
        Self {
            skill,
            tool: tool.into(),
            security,
            origin,
            token,
            approvals: ApprovalTrail::default(),
            files: None,
            egress: EgressLog::default(),
            secrets: Arc::default(),
            delegation: Default::default(),
            delegated: Default::default(),
        }
    }

    /// Its approvals noted on `trail` and its connections on `egress` (the run's own, so
    /// the pipeline's record of the call keeps them).
    pub(super) fn in_run(mut self, trail: ApprovalTrail, egress: EgressLog) -> Self {
        self.approvals = trail;
        self.egress = egress;
        self
    }

    /// With a context's files.
    pub fn with_files(mut self, files: Option<Arc<super::workfiles::CallFiles>>) -> Self {
        self.files = files;
        self
    }

    /// With bound secrets.
    pub fn with_secrets(mut self, secrets: Arc<crate::proxy::secrets::CallSecrets>) -> Self {
        self.secrets = secrets;
        self
    }

    /// With the delegation it runs under.
    pub fn with_delegation(mut self, delegation: super::delegate::Delegation) -> Self {
        self.delegation = delegation;
        self
    }

    /// Notes an approval this call waited on (its result names the last one).
    pub fn note_approval(&self, id: &str) {
        self.approvals.note(id);
    }

    /// Notes that a signature this call asked for was refused (`why`: which approval and
    /// how), so that a tool failing on the refusal is recorded as `approval_denied`.
    pub fn note_refused_signature(&self, why: String) {
        self.approvals.refuse_signature(why);
    }
}

/// What one call's approvals came to.
#[derive(Debug, Default)]
struct Trail {
    /// The approvals it waited on, in order.
    ids: Vec<String>,
    /// The last signature request refused for want of an approval, and how.
    refused_signature: Option<String>,
}

/// The approvals one call waited on, in order (shared by the call and its callbacks).
#[derive(Debug, Clone, Default)]
pub(super) struct ApprovalTrail(Arc<Mutex<Trail>>);

impl ApprovalTrail {
    pub(super) fn note(&self, id: &str) {
        if let Ok(mut trail) = self.0.lock() {
            trail.ids.push(id.to_string());
        }
    }

    pub(super) fn last(&self) -> Option<String> {
        self.0.lock().ok().and_then(|t| t.ids.last().cloned())
    }

    fn refuse_signature(&self, why: String) {
        if let Ok(mut trail) = self.0.lock() {
            trail.refused_signature = Some(why);
        }
    }

    /// A tool that failed after one of its signature requests was refused failed because
    /// of that refusal: `approval_denied`, saying what happened (the tool ran, nothing was
    /// signed), not `tool_error` with the approvals' "the call did not run".
    pub(super) fn account_refused_signature(&self, result: &mut ToolResult) {
        if result.success || result.error_kind != Some(ErrorKind::ToolError) {
            return;
        }
        let Some(why) = self.0.lock().ok().and_then(|t| t.refused_signature.clone()) else {
            return;
        };
        let tool_said = result.error.take().unwrap_or_default();
        result.error_kind = Some(ErrorKind::ApprovalDenied);
        result.error = Some(format!(
            "the tool ran and asked for a signature: {why}; nothing was signed, and the tool \
             then failed ({tool_said}). Ask the operator, or call again to request a new approval"
        ));
    }
}

/// The table of calls in flight, shared by the pipeline (which registers calls) and the
/// callbacks (which look them up).
#[derive(Debug, Default)]
pub struct InFlight {
    calls: Mutex<HashMap<String, Arc<ActiveCall>>>,
}

impl InFlight {
    /// Registers `call` under `call_id` until the returned guard is dropped.
    pub(crate) fn register(&self, call_id: &str, call: Arc<ActiveCall>) -> InFlightGuard<'_> {
        if let Ok(mut calls) = self.calls.lock() {
            calls.insert(call_id.to_string(), call);
        }
        InFlightGuard {
            table: self,
            call_id: call_id.to_string(),
        }
    }

    /// Registers `call` under `call_id` until [`InFlight::remove`] (a command session,
    /// whose callbacks outlive the call that started it).
    pub(super) fn insert(&self, call_id: &str, call: Arc<ActiveCall>) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.insert(call_id.to_string(), call);
        }
    }

    /// Ends what [`InFlight::insert`] registered.
    pub(super) fn remove(&self, call_id: &str) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.remove(call_id);
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

impl EgressCalls for InFlight {
    fn egress_call(
        &self,
        call_id: &str,
        token: &SecretValue,
    ) -> Result<EgressCall, CallbackAuthError> {
        let call = self.authorize(call_id, token)?;
        Ok(EgressCall {
            skill: Arc::clone(&call.skill),
            secrets: Arc::clone(&call.secrets),
            egress: call.egress.clone(),
            deps_build: call.tool == crate::proxy::egress::DEPS_BUILD_TOOL,
        })
    }
}

impl InFlight {
    /// Registers a call of `skill` under `call_id` with `token` until [`InFlight::remove`]
    /// (tests of the callbacks' and the egress proxy's judging, and the egress bench,
    /// `core/benches/egress.rs`, which serves a call's connections without a pipeline).
    /// Not part of the API: production calls are registered by the pipeline only.
    #[doc(hidden)]
    pub fn insert_for_test(
        &self,
        call_id: &str,
        skill: Arc<Skill>,
        token: &str,
    ) -> Arc<ActiveCall> {
        self.insert_test_call(call_id, skill, token, (Arc::default(), None))
    }

    /// A read call of `skill` holding `secrets`, made in a context when `files` are given,
    /// registered for a test or the bench.
    fn insert_test_call(
        &self,
        call_id: &str,
        skill: Arc<Skill>,
        token: &str,
        (secrets, files): (
            Arc<crate::proxy::secrets::CallSecrets>,
            Option<Arc<super::workfiles::CallFiles>>,
        ),
    ) -> Arc<ActiveCall> {
        let call = Arc::new(
            ActiveCall::new(
                skill,
                "t",
                Security::Read,
                crate::auth::CallOrigin::operator(),
                SecretValue(token.to_string()),
            )
            .with_secrets(secrets)
            .with_files(files),
        );
        self.insert(call_id, Arc::clone(&call));
        call
    }
}

#[cfg(test)]
impl InFlight {
    /// [`InFlight::insert_for_test`] of a call holding `secrets`.
    pub(crate) fn insert_with_secrets_for_test(
        &self,
        call_id: &str,
        skill: Arc<Skill>,
        token: &str,
        secrets: crate::proxy::secrets::CallSecrets,
    ) -> Arc<ActiveCall> {
        self.insert_test_call(call_id, skill, token, (Arc::new(secrets), None))
    }

    /// [`InFlight::insert_for_test`] of a call made in a context, sent `files`.
    pub(crate) fn insert_with_files_for_test(
        &self,
        call_id: &str,
        skill: Arc<Skill>,
        token: &str,
        files: Arc<super::workfiles::CallFiles>,
    ) -> Arc<ActiveCall> {
        self.insert_test_call(call_id, skill, token, (Arc::default(), Some(files)))
    }

    /// [`InFlight::remove`], for tests.
    pub(crate) fn remove_for_test(&self, call_id: &str) {
        self.remove(call_id);
    }
}

/// Removes a call from the table when it ends, however it ends.
pub(crate) struct InFlightGuard<'a> {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn tool_failing_on_a_refused_signature_is_approval_denied() {
        let trail = ApprovalTrail::default();
        trail.note("ap_1");
        trail.refuse_signature("the operator denied signature approval ap_1 (not today)".into());
        let mut r = ToolResult::failed(
            "c1",
            ErrorKind::ToolError,
            "the tool reported error -32002: signature approval ap_1 was denied",
            5,
        );
        trail.account_refused_signature(&mut r);
        assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied));
        let error = r.error.unwrap();
        assert!(error.starts_with("the tool ran and asked for a signature: the operator denied signature approval ap_1 (not today); nothing was signed"), "{error}");
        assert!(error.contains("reported error -32002"), "{error}");
        assert!(!error.contains("did not run"), "{error}");
    }

    #[test]
    fn other_outcomes_keep_their_kind() {
        let refused = ApprovalTrail::default();
        refused.refuse_signature("denied".into());
        // The tool handled the refusal and answered: a success stays one.
        let mut ok = ToolResult::ok("c1", serde_json::json!({"ok": false}), 1);
        refused.account_refused_signature(&mut ok);
        assert!(ok.success && ok.error_kind.is_none());
        // A limit that ended the tool is still that limit.
        let mut limit = ToolResult::failed("c1", ErrorKind::ResourceLimit, "memory", 1);
        refused.account_refused_signature(&mut limit);
        assert_eq!(limit.error_kind, Some(ErrorKind::ResourceLimit));
        // No signature was refused: a tool error stays one.
        let mut failed = ToolResult::failed("c1", ErrorKind::ToolError, "boom", 1);
        ApprovalTrail::default().account_refused_signature(&mut failed);
        assert_eq!(failed.error_kind, Some(ErrorKind::ToolError));
        assert_eq!(failed.error.as_deref(), Some("boom"));
    }
}
