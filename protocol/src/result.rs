//! The result of one tool call (docs/http-api.md) and the closed set of failure kinds.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a call failed, as a machine-readable kind (docs/http-api.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The arguments do not match the tool's parameter schema.
    InvalidArgs,
    /// The skill or tool does not exist.
    NotFound,
    /// A declared permission does not cover what was asked.
    PermissionDenied,
    /// An approval was denied or timed out.
    ApprovalDenied,
    /// The wall-clock limit ended the call.
    Timeout,
    /// A memory, output, process or file-size limit ended the call.
    ResourceLimit,
    /// The sandbox could not be applied, or it stopped the tool.
    Sandbox,
    /// The tool ran and reported a failure.
    ToolError,
    /// The tool broke the stdio protocol.
    Protocol,
    /// The executor, the core or a prerequisite is not available.
    Unavailable,
}

impl ErrorKind {
    /// The kind's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgs => "invalid_args",
            ErrorKind::NotFound => "not_found",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::ApprovalDenied => "approval_denied",
            ErrorKind::Timeout => "timeout",
            ErrorKind::ResourceLimit => "resource_limit",
            ErrorKind::Sandbox => "sandbox",
            ErrorKind::ToolError => "tool_error",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Unavailable => "unavailable",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of one tool call, success or failure, as the gateway and the executor
/// report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResult {
    /// Whether the tool produced a result.
    pub success: bool,
    /// The tool's result when `success`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// A human-readable reason when not `success`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The failure kind when not `success`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<ErrorKind>,
    /// The id the core gave the call.
    pub call_id: String,
    /// Wall-clock duration of the call.
    pub duration_ms: u64,
    /// The approval the call waited on (a `write` call, or a `sign` tool's last signature),
    /// approved, denied or expired; absent when none was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// The context's files the call created or changed (a call made in a context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<crate::workdir::WorkFile>>,
    /// Executor → core only: microseconds from the call's arrival at the executor to its
    /// tool process started (sandbox preparation and spawn). The core takes it for its
    /// metrics; gateway answers never carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawn_us: Option<u64>,
    /// Executor → core only: where the executor's time on the call went. The core takes
    /// it for its metrics; gateway answers never carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<ExecutorStages>,
    /// The calls the tool's programs made of other skills' tools (`runSkill`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegated: Vec<DelegatedCall>,
}

/// One call a tool delegated to another skill's tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DelegatedCall {
    /// `skill:tool` called.
    pub tool: String,
    /// Its call id (empty when it was refused before it became a call).
    pub call_id: String,
    /// Whether it succeeded.
    pub success: bool,
    /// Its failure kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<ErrorKind>,
    /// 1 for a call the caller's tool made, 2 for one its child made, ...
    pub depth: u32,
}

/// Where an executor's time on one call went, in microseconds, stage after stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorStages {
    /// From the request's arrival at the handler to the call's start: parameters decoded,
    /// a slot taken (waiting in the queue included).
    pub queue_us: u64,
    /// The arguments checked, the sandbox prepared and the tool's process started (or a
    /// prestarted one taken).
    pub start_us: u64,
    /// The tool at work, until its answer was read and it exited.
    pub tool_us: u64,
    /// The call ended: its processes killed and reaped, its user and scratch dir queued
    /// for release.
    pub end_us: u64,
}

impl ExecutorStages {
    /// The four stages together.
    pub fn total_us(&self) -> u64 {
        self.queue_us + self.start_us + self.tool_us + self.end_us
    }
}

impl ToolResult {
    /// A successful result.
    pub fn ok(call_id: impl Into<String>, data: Value, duration_ms: u64) -> Self {
        Self {
            success: true,
            data: Some(data),
            error: None,
            error_kind: None,
            call_id: call_id.into(),
            duration_ms,
            approval_id: None,
            files: None,
            spawn_us: None,
            stages: None,
            delegated: Vec::new(),
        }
    }

    /// A failed result.
    pub fn failed(
        call_id: impl Into<String>,
        kind: ErrorKind,
        error: impl Into<String>,
        duration_ms: u64,
    ) -> Self {
        Self {
            success: false,
            data: None,
            error: Some(error.into()),
            error_kind: Some(kind),
            call_id: call_id.into(),
            duration_ms,
            approval_id: None,
            files: None,
            spawn_us: None,
            stages: None,
            delegated: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_result_serializes_as_contract() {
        let ok = ToolResult::ok("c1", json!({"x": 1}), 12);
        assert_eq!(
            serde_json::to_value(&ok).unwrap(),
            json!({"success": true, "data": {"x": 1}, "call_id": "c1", "duration_ms": 12})
        );
        let bad = ToolResult::failed("c2", ErrorKind::ResourceLimit, "output over 1 MiB", 3);
        assert_eq!(
            serde_json::to_value(&bad).unwrap(),
            json!({"success": false, "error": "output over 1 MiB", "error_kind": "resource_limit",
                   "call_id": "c2", "duration_ms": 3})
        );
    }

    #[test]
    fn error_kind_names_match_serde() {
        for k in [
            ErrorKind::InvalidArgs,
            ErrorKind::NotFound,
            ErrorKind::PermissionDenied,
            ErrorKind::ApprovalDenied,
            ErrorKind::Timeout,
            ErrorKind::ResourceLimit,
            ErrorKind::Sandbox,
            ErrorKind::ToolError,
            ErrorKind::Protocol,
            ErrorKind::Unavailable,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), json!(k.as_str()));
        }
    }

    #[test]
    fn tool_result_rejects_unknown_fields() {
        let r: Result<ToolResult, _> = serde_json::from_value(
            json!({"success": true, "call_id": "c", "duration_ms": 1, "extra": 1}),
        );
        assert!(r.is_err());
    }
}
