//! When a call that failed on one executor may go to another: what the call allows
//! ([`Resend`], by the tool's security) against what the failure says about delivery.

use skillbox_channel::client::ClientError;
use skillbox_protocol::jsonrpc::code;

/// When a call that failed on one executor may be sent to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resend {
    /// Only when the request surely did not reach the executor: no connection could be
    /// made, or the executor refused it as draining. For `write` and `sign` tools and for
    /// every method but `tool.execute` of a `read` tool.
    OnlyUndelivered,
    /// Also when the connection broke after the request was sent (the tool may have run):
    /// for `read` tools, which may run twice.
    AlsoDelivered,
}

/// What one attempt's failure allows.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Failure {
    /// The request did not reach the executor.
    Undelivered,
    /// It may have: the connection broke or the answer was unreadable.
    MaybeDelivered,
    /// Final: a timeout (sending again would double the wait) or the executor's own answer.
    Final,
}

impl Failure {
    pub(super) fn of(e: &ClientError) -> Self {
        match e {
            ClientError::Connect { .. } => Failure::Undelivered,
            ClientError::Rpc(o) if o.code == code::EXECUTOR_DRAINING => Failure::Undelivered,
            ClientError::Unreachable { .. } | ClientError::BadAnswer { .. } => {
                Failure::MaybeDelivered
            }
            _ => Failure::Final,
        }
    }

    pub(super) fn may_resend(&self, resend: Resend) -> bool {
        match self {
            Failure::Undelivered => true,
            Failure::MaybeDelivered => resend == Resend::AlsoDelivered,
            Failure::Final => false,
        }
    }
}
