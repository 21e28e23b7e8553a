//! What a bot's revoked token does to its approvals: every one it asked for that is still
//! pending is refused at once, and a call of it waiting in this process hears so.

use super::{ApprovalError, ApprovalRecord, ApprovalStatus, Approvals, Decision};

impl Approvals {
    /// Denies every pending approval bot `bot` asked for, because its token was revoked;
    /// the denials, for the revocation's answer. Blocking (the store).
    pub fn refuse_pending_of(&self, bot: &str) -> Result<Vec<ApprovalRecord>, ApprovalError> {
        let reason = format!(
            "the token of bot {bot:?} was revoked: the calls it made are refused; the operator \
             makes it a new one with `skillbox tokens create {bot}`"
        );
        let mut refused = Vec::new();
        let pending = self.store.list_approvals(Some(ApprovalStatus::Pending))?;
        for asked in pending.into_iter().filter(|a| a.requested_by == bot) {
            match self.decide(&asked.id, Decision::Deny, Some(reason.clone())) {
                Ok(record) => refused.push(record),
                // Decided meanwhile: nothing is left to refuse.
                Err(ApprovalError::NotPending { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        if !refused.is_empty() {
            tracing::info!(
                bot,
                refused = refused.len(),
                "a revoked bot's pending approvals were refused"
            );
        }
        Ok(refused)
    }
}
