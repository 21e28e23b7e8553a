//! Why a call may not run, or an approval could not be listed or decided, and the kind
//! each is to the caller.

use skillbox_protocol::result::ErrorKind;

use super::ApprovalStatus;
use crate::state::store::StoreError;

/// Why a call may not run, or an approval could not be listed or decided.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    /// An operator denied the call.
    #[error("approval {id} was denied{}; the call did not run. Ask the operator, or call again to request a new approval", reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default())]
    Denied {
        /// The approval.
        id: String,
        /// The operator's reason.
        reason: Option<String>,
    },
    /// Nobody decided in time; the approval expired.
    #[error("approval {id} got no decision within {timeout_ms} ms and expired; the call did not run. Call again and approve the new request with `skillbox approvals approve ID` or POST /v1/approvals/ID, or raise the approval timeout")]
    TimedOut {
        /// The expired approval.
        id: String,
        /// The timeout that ran out.
        timeout_ms: u64,
    },
    /// Another identical call used the approval first.
    #[error("approval {id} was already used by another identical call; call again to request a new approval")]
    AlreadyUsed {
        /// The approval.
        id: String,
    },
    /// No approval has this id.
    #[error(
        "no approval with id {id}; list them with `skillbox approvals list` or GET /v1/approvals"
    )]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The approval was already decided or expired.
    #[error("approval {id} is already {status}; only a pending approval can be decided. List pending ones with `skillbox approvals list` or GET /v1/approvals?status=pending")]
    NotPending {
        /// The approval.
        id: String,
        /// Its current status.
        status: ApprovalStatus,
    },
    /// A bot may not decide this approval.
    #[error("{0}")]
    NotYours(String),
    /// The operating system's random source failed while making an approval id.
    #[error("could not draw a random approval id from the operating system")]
    RandomId,
    /// The state database failed.
    #[error(transparent)]
    Store(StoreError),
    /// The blocking task that ran a database step panicked or was cancelled.
    #[error("the approvals database task failed: {source}")]
    StoreTask {
        /// Tokio's error.
        source: tokio::task::JoinError,
    },
}

impl From<StoreError> for ApprovalError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::ApprovalNotFound { id } => ApprovalError::NotFound { id },
            StoreError::NotPending { id, status } => ApprovalError::NotPending { id, status },
            StoreError::NotApproved {
                id,
                status: ApprovalStatus::Used,
            } => ApprovalError::AlreadyUsed { id },
            other => ApprovalError::Store(other),
        }
    }
}

impl ApprovalError {
    /// The approval a refused call waited on (denied, expired or used by another call).
    pub fn approval_id(&self) -> Option<&str> {
        match self {
            ApprovalError::Denied { id, .. }
            | ApprovalError::TimedOut { id, .. }
            | ApprovalError::AlreadyUsed { id } => Some(id),
            _ => None,
        }
    }

    /// The docs/http-api.md kind of a call refused by this error.
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            ApprovalError::Denied { .. }
            | ApprovalError::TimedOut { .. }
            | ApprovalError::AlreadyUsed { .. } => ErrorKind::ApprovalDenied,
            ApprovalError::NotFound { .. } => ErrorKind::NotFound,
            ApprovalError::NotPending { .. } => ErrorKind::InvalidArgs,
            ApprovalError::NotYours(_) => ErrorKind::PermissionDenied,
            ApprovalError::RandomId | ApprovalError::Store(_) | ApprovalError::StoreTask { .. } => {
                ErrorKind::Unavailable
            }
        }
    }
}
