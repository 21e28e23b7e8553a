//! What the pipeline asks the approvals ([`ApprovalRequest`]) and what it gets back when a
//! call may run ([`ApprovalGrant`]).

use serde::Serialize;
use serde_json::Value;
use skillbox_protocol::skill::Security;

/// A call that may need an approval.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ApprovalRequest {
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// The call's arguments; identical arguments (in any key order) make an identical call.
    pub args: Value,
    /// The tool's declared security.
    pub security: Security,
    /// Who asked for the call (a bot's name or `operator`): only its calls use the approval.
    pub requested_by: String,
    /// The context the call was made in, if any.
    pub context_id: Option<String>,
}

/// Why a call may run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "grant")]
pub enum ApprovalGrant {
    /// The tool only reads: no approval needed.
    NotRequired,
    /// The operator's policy approves this tool; nothing was recorded.
    Auto,
    /// An approval given earlier (e.g. before a core restart) for this exact call.
    Earlier {
        /// The approval used.
        id: String,
    },
    /// An operator approved while the call waited.
    Decided {
        /// The approval used.
        id: String,
    },
    /// An allowance the operator set in the console covers this tool for a while.
    Allowance {
        /// The allowance.
        id: String,
    },
}

impl ApprovalGrant {
    /// The approval record the call used, if any.
    pub fn approval_id(&self) -> Option<&str> {
        match self {
            ApprovalGrant::NotRequired | ApprovalGrant::Auto | ApprovalGrant::Allowance { .. } => {
                None
            }
            ApprovalGrant::Earlier { id } | ApprovalGrant::Decided { id } => Some(id),
        }
    }
}
