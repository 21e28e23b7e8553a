//! A tool's capability requests over its stdio (docs/skill-format.md): `tool.invoke` from
//! the executor to the tool, and `fetch`, `sign`, `readFile`, `runSkill` from the tool;
//! then the same requests forwarded to the core (`core.fetch`, ...) with the call's id and
//! capability token. Every struct rejects unknown fields.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::envelope::SecretValue;

/// Longest URL a `fetch` may carry.
pub const MAX_URL_LEN: usize = 8 * 1024;
/// Most headers a `fetch` may carry.
pub const MAX_HEADERS: usize = 64;

/// `tool.invoke` params, the one request the executor writes to a `jsonrpc` tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolInvokeParams {
    /// Tool name within the skill.
    pub tool: String,
    /// Arguments, already validated against the tool's schema.
    pub args: Value,
    /// The call id.
    pub call_id: String,
}

/// `fetch` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchParams {
    /// Absolute `http`/`https` URL.
    pub url: String,
    /// HTTP method, `GET` when absent.
    #[serde(default = "default_method")]
    pub method: String,
    /// Request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Request body (text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

fn default_method() -> String {
    "GET".into()
}

/// Why capability params are out of bounds.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParamsBoundError {
    /// The URL is longer than [`MAX_URL_LEN`].
    #[error("url of {len} bytes exceeds {max}")]
    UrlTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// More than [`MAX_HEADERS`] headers.
    #[error("{count} headers exceed the limit of {max}")]
    TooManyHeaders {
        /// How many.
        count: usize,
        /// The limit.
        max: usize,
    },
}

impl FetchParams {
    /// Checks the size bounds of a fetch request.
    pub fn check_bounds(&self) -> Result<(), ParamsBoundError> {
        if self.url.len() > MAX_URL_LEN {
            return Err(ParamsBoundError::UrlTooLong {
                len: self.url.len(),
                max: MAX_URL_LEN,
            });
        }
        if self.headers.len() > MAX_HEADERS {
            return Err(ParamsBoundError::TooManyHeaders {
                count: self.headers.len(),
                max: MAX_HEADERS,
            });
        }
        Ok(())
    }
}

/// `fetch` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchResult {
    /// HTTP status code.
    pub status: u16,
    /// Response headers.
    pub headers: BTreeMap<String, String>,
    /// Response body (text; binary bodies are base64 by the proxy's choice).
    pub body: String,
}

/// What a `sign` request signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignType {
    /// An arbitrary message.
    Message,
    /// A transaction.
    Transaction,
}

/// `sign` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignParams {
    /// Message or transaction.
    #[serde(rename = "type")]
    pub kind: SignType,
    /// Base64 of the bytes to sign.
    pub data: String,
}

/// `sign` result, all base64.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignResult {
    /// The signature.
    pub signature: String,
    /// The public key that verifies it.
    pub public_key: String,
    /// The algorithm, e.g. `ed25519`.
    pub algorithm: String,
}

/// `readFile` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFileParams {
    /// Workspace-relative path.
    pub path: String,
}

/// `readFile` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFileResult {
    /// The file's text.
    pub content: String,
}

/// A capability callback from the executor to the core: the call it belongs to, the
/// token the core issued for it, and the tool's request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreCallbackParams<T> {
    /// The call id the core issued.
    pub call_id: String,
    /// The capability token the core issued with `tool.execute`.
    pub capability_token: SecretValue,
    /// The tool's request.
    pub request: T,
}

/// `runSkill` params: a tool of another skill, called for this call's skill (delegation,
/// docs/permissions.md). The child runs under its own permissions, within what is left of
/// this call's time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSkillParams {
    /// `skill:tool`.
    pub tool: String,
    /// Its arguments (absent: `{}`).
    #[serde(default)]
    pub args: Value,
}

/// `core.fetch` params.
pub type CoreFetchParams = CoreCallbackParams<FetchParams>;
/// `core.sign` params.
pub type CoreSignParams = CoreCallbackParams<SignParams>;
/// `core.readFile` params.
pub type CoreReadFileParams = CoreCallbackParams<ReadFileParams>;
/// `core.runSkill` params.
pub type CoreRunSkillParams = CoreCallbackParams<RunSkillParams>;
/// `core.contextFileRead` params.
pub type CoreContextFileReadParams = CoreCallbackParams<crate::workdir::ContextFileReadParams>;
/// `core.contextFileWrite` params.
pub type CoreContextFileWriteParams = CoreCallbackParams<crate::workdir::ContextFileWriteParams>;
/// `core.contextFileDelete` params.
pub type CoreContextFileDeleteParams = CoreCallbackParams<crate::workdir::ContextFileDeleteParams>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fetch_params_default_method_and_reject_unknown() {
        let p: FetchParams = serde_json::from_value(json!({"url": "https://a"})).unwrap();
        assert_eq!(p.method, "GET");
        assert!(serde_json::from_value::<FetchParams>(json!({"url": "x", "proxy": "y"})).is_err());
    }

    #[test]
    fn fetch_params_bounds_are_checked() {
        let mut p: FetchParams = serde_json::from_value(json!({"url": "https://a"})).unwrap();
        assert_eq!(p.check_bounds(), Ok(()));
        p.url = "x".repeat(MAX_URL_LEN + 1);
        assert!(matches!(
            p.check_bounds(),
            Err(ParamsBoundError::UrlTooLong { .. })
        ));
        p.url = "https://a".into();
        p.headers = (0..=MAX_HEADERS)
            .map(|i| (format!("h{i}"), "v".into()))
            .collect();
        assert!(matches!(
            p.check_bounds(),
            Err(ParamsBoundError::TooManyHeaders { .. })
        ));
    }

    #[test]
    fn sign_params_use_type_key() {
        let p: SignParams =
            serde_json::from_value(json!({"type": "transaction", "data": "AA=="})).unwrap();
        assert_eq!(p.kind, SignType::Transaction);
        assert!(
            serde_json::from_value::<SignParams>(json!({"type": "other", "data": ""})).is_err()
        );
    }

    #[test]
    fn core_callback_rejects_unknown_fields() {
        let v = json!({"call_id": "c", "capability_token": "t", "request": {"path": "a"}, "skill": "x"});
        assert!(serde_json::from_value::<CoreReadFileParams>(v).is_err());
    }
}
