//! The core's capability proxies: the outside-world work a skill asks the core to do.
//!
//! - [`fetch`]: HTTP(S) to the hosts the skill declared in `permissions.network`, never to
//!   private, loopback, link-local or metadata addresses (unless the operator allow-lists
//!   an exact `host:port`), redirects re-checked hop by hop, bodies and time capped.
//! - [`readfile`]: a workspace-relative file the skill's `permissions.workspace.read` globs
//!   cover (the file reached, not just the name asked for), opened with
//!   `openat2(RESOLVE_BENEATH)` so nothing outside the workspace is read, and never the
//!   core's state folder or its config, whatever the glob or link.
//! - [`sign`]: Ed25519 signatures by keys that never leave the core.
//! - [`egress`]: the HTTP proxy of every program in a sandbox (`CONNECT` tunnels and
//!   absolute-form HTTP), reaching exactly the skill's hosts under the same policy as
//!   `fetch` (`policy.rs`), every connection in the call's record.
//!
//! Every refusal is a [`ProxyError`]; [`ProxyError::to_error_object`] is the one place that
//! maps it to the JSON-RPC error a tool sees (docs/skill-format.md). Approvals (for `sign`) and the
//! lookup of a call's skill are the dispatcher's, not this module's.

mod address;
pub mod egress;
pub mod fetch;
pub(crate) mod policy;
pub mod readfile;
pub mod roots;
pub mod secrets;
pub mod sign;
pub(crate) mod target;

use serde_json::json;
use skillbox_protocol::jsonrpc::{code, ErrorObject};

pub use fetch::{FetchConfig, FetchProxy};
pub use readfile::ReadFileProxy;
pub use sign::{SignError, Signer};

/// Why a callback (a capability request, a program's connection) is refused before its
/// request is looked at: the call it names is not in flight with that token.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CallbackAuthError {
    /// No call in flight has this id (never issued, or already ended).
    #[error("no call {0:?} is in flight; capabilities exist only during their call")]
    UnknownCall(String),
    /// The token is not the one issued with the call.
    #[error("the capability token does not belong to call {0:?}")]
    BadToken(String),
}

/// Why a capability request was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The skill's declared permissions (or the operator's rules) do not allow the request.
    #[error("{capability} refused: {reason}")]
    PermissionDenied {
        /// `fetch`, `readFile` or `sign`.
        capability: &'static str,
        /// What was refused and what to do about it.
        reason: String,
    },
    /// The operator denied the approval the request needed, or it expired.
    #[error("{reason}")]
    ApprovalDenied {
        /// `sign`.
        capability: &'static str,
        /// The approval's outcome, as the approvals say it.
        reason: String,
    },
    /// The request itself is malformed.
    #[error("{capability}: invalid request: {reason}")]
    InvalidParams {
        /// `fetch`, `readFile` or `sign`.
        capability: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A body, file or payload is larger than the proxy carries.
    #[error("{capability} refused: {what} exceeds the limit of {limit} bytes")]
    TooLarge {
        /// `fetch`, `readFile` or `sign`.
        capability: &'static str,
        /// What was too large (`request body`, `response body`, `file`, `data`).
        what: &'static str,
        /// The limit in bytes.
        limit: u64,
    },
    /// The file named by a `readFile` request does not exist.
    #[error("readFile: {path:?} does not exist in the workspace")]
    NotFound {
        /// The workspace-relative path.
        path: String,
    },
    /// The remote server could not be reached or answered badly.
    #[error("fetch of {url} failed: {reason}")]
    Upstream {
        /// The URL of the hop that failed.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The server redirected more often than the proxy follows.
    #[error("fetch of {url} stopped: more than {max} redirects; fetch the final url directly")]
    TooManyRedirects {
        /// The URL whose answer was one redirect too many.
        url: String,
        /// The limit.
        max: usize,
    },
    /// The whole fetch (every hop and the body) took longer than allowed.
    #[error("fetch of {url} timed out after {timeout_ms} ms")]
    Timeout {
        /// The URL first asked for.
        url: String,
        /// The limit.
        timeout_ms: u64,
    },
    /// The capability cannot work on this host (for example a kernel without `openat2`).
    #[error("{capability} unavailable: {reason}")]
    Unavailable {
        /// `fetch`, `readFile` or `sign`.
        capability: &'static str,
        /// Why, and what the operator can do.
        reason: String,
    },
    /// Reading a workspace file failed after it was opened or while opening it.
    #[error("readFile of {path:?} failed while {step}: {source}")]
    Read {
        /// The workspace-relative path.
        path: String,
        /// The step that failed.
        step: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The signing key store failed.
    #[error("sign failed: {0}")]
    Sign(#[from] SignError),
}

impl ProxyError {
    /// The outcome label of this refusal in the fetch-proxy metrics.
    pub fn outcome(&self) -> &'static str {
        match self {
            ProxyError::PermissionDenied { .. } => "permission_denied",
            ProxyError::ApprovalDenied { .. } => "approval_denied",
            ProxyError::InvalidParams { .. } => "invalid_params",
            ProxyError::TooLarge { .. } => "too_large",
            ProxyError::NotFound { .. } => "not_found",
            ProxyError::Upstream { .. } => "upstream",
            ProxyError::TooManyRedirects { .. } => "too_many_redirects",
            ProxyError::Timeout { .. } => "timeout",
            ProxyError::Unavailable { .. } => "unavailable",
            ProxyError::Read { .. } => "read",
            ProxyError::Sign(_) => "sign",
        }
    }

    /// The JSON-RPC error a tool receives for this refusal — the one mapping of every
    /// capability callback's refusal: permission → -32001, a denied or expired approval →
    /// -32002, a bad or oversize request → -32602, an unavailable capability → -32003,
    /// anything that went
    /// wrong on the core's side or upstream → -32603. `data.kind` names the refusal for
    /// the dispatcher's `error_kind`.
    pub fn to_error_object(&self) -> ErrorObject {
        let (code, kind) = match self {
            ProxyError::PermissionDenied { .. } => (code::PERMISSION_DENIED, "permission_denied"),
            ProxyError::ApprovalDenied { .. } => (code::APPROVAL_DENIED, "approval_denied"),
            ProxyError::InvalidParams { .. } => (code::INVALID_PARAMS, "invalid_params"),
            ProxyError::NotFound { .. } => (code::INVALID_PARAMS, "not_found"),
            ProxyError::TooLarge { .. } => (code::INVALID_PARAMS, "resource_limit"),
            ProxyError::Timeout { .. } => (code::INTERNAL_ERROR, "timeout"),
            ProxyError::Upstream { .. } => (code::INTERNAL_ERROR, "upstream"),
            ProxyError::TooManyRedirects { .. } => (code::INTERNAL_ERROR, "resource_limit"),
            ProxyError::Unavailable { .. } => (code::CAPABILITY_UNAVAILABLE, "unavailable"),
            ProxyError::Read { .. } | ProxyError::Sign(_) => (code::INTERNAL_ERROR, "internal"),
        };
        ErrorObject {
            code,
            message: self.to_string(),
            data: Some(json!({ "kind": kind })),
        }
    }

    pub(crate) fn denied(capability: &'static str, reason: impl Into<String>) -> Self {
        ProxyError::PermissionDenied {
            capability,
            reason: reason.into(),
        }
    }

    pub(crate) fn invalid(capability: &'static str, reason: impl Into<String>) -> Self {
        ProxyError::InvalidParams {
            capability,
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_follow_the_contract() {
        let cases = [
            (ProxyError::denied("fetch", "no"), code::PERMISSION_DENIED),
            (ProxyError::invalid("sign", "bad"), code::INVALID_PARAMS),
            (
                ProxyError::ApprovalDenied {
                    capability: "sign",
                    reason: "denied by the operator".into(),
                },
                code::APPROVAL_DENIED,
            ),
            (
                ProxyError::TooLarge {
                    capability: "fetch",
                    what: "response body",
                    limit: 5,
                },
                code::INVALID_PARAMS,
            ),
            (
                ProxyError::NotFound { path: "a".into() },
                code::INVALID_PARAMS,
            ),
            (
                ProxyError::Timeout {
                    url: "https://a".into(),
                    timeout_ms: 1,
                },
                code::INTERNAL_ERROR,
            ),
            (
                ProxyError::Upstream {
                    url: "https://a".into(),
                    reason: "reset".into(),
                },
                code::INTERNAL_ERROR,
            ),
            (
                ProxyError::Unavailable {
                    capability: "readFile",
                    reason: "no openat2".into(),
                },
                code::CAPABILITY_UNAVAILABLE,
            ),
        ];
        for (err, want) in cases {
            let obj = err.to_error_object();
            assert_eq!(obj.code, want, "{err}");
            assert_eq!(obj.message, err.to_string());
            assert!(obj.data.is_some_and(|d| d["kind"].is_string()));
        }
    }

    #[test]
    fn permission_denied_message_names_capability_and_reason() {
        let obj = ProxyError::denied(
            "fetch",
            "host evil.example is not in permissions.network; declare it in skill.yaml",
        )
        .to_error_object();
        assert_eq!(obj.code, -32001);
        assert!(obj.message.starts_with("fetch refused: host evil.example"));
        assert!(obj.message.contains("declare it"));
    }
}
