//! `tool.execute` (core → executor): one tool call, its skill's [`Envelope`] and the
//! context's files it runs in; the answer is the call's [`ToolResult`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::envelope::{Envelope, SecretValue};
use crate::result::ToolResult;

/// `tool.execute` params (core → executor).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolExecuteParams {
    /// The id the core gave this call.
    pub call_id: String,
    /// Per-call token the executor must present on capability callbacks.
    pub capability_token: SecretValue,
    /// Skill name.
    pub skill: String,
    /// Tool name within the skill.
    pub tool: String,
    /// Arguments.
    pub args: Value,
    /// What the call carries of its skill's envelope (absent: nothing).
    #[serde(default, skip_serializing_if = "Envelope::is_empty")]
    pub envelope: Envelope,
    /// The W3C `traceparent` a bot sent with the call, validated by the core; the
    /// executor puts it on the call's log lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The context's files, when the call is made in a context: the call runs in them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<crate::workdir::WorkDir>,
    /// A script of the skill to run instead of a declared tool (`run_skill_script`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<ScriptRun>,
}

/// A script under a skill's `scripts/`, run by its shebang or extension with arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptRun {
    /// Its path in the skill folder (`scripts/...`).
    pub path: String,
    /// Its command-line arguments.
    #[serde(default)]
    pub args: Vec<String>,
}

/// `tool.execute` result: the call's [`ToolResult`].
pub type ToolExecuteResult = ToolResult;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_value_debug_is_masked() {
        let p = ToolExecuteParams {
            call_id: "c".into(),
            capability_token: SecretValue("tok-123".into()),
            skill: "s".into(),
            tool: "t".into(),
            args: json!({}),
            envelope: Envelope {
                env: [("API_KEY".to_string(), SecretValue("sk-live".into()))].into(),
                ..Envelope::default()
            },
            traceparent: None,
            workdir: None,
            script: None,
        };
        let dbg = format!("{p:?}");
        assert!(
            !dbg.contains("tok-123") && !dbg.contains("sk-live"),
            "{dbg}"
        );
    }

    #[test]
    fn the_envelope_travels_nested_and_flat_fields_are_refused() {
        let p: ToolExecuteParams = serde_json::from_value(json!({
            "call_id": "c", "capability_token": "t", "skill": "s", "tool": "t", "args": {},
            "envelope": {"env": {"K": "v"}, "deps": "d"},
        }))
        .unwrap();
        assert_eq!(
            (p.envelope.env["K"].0.as_str(), p.envelope.deps.as_deref()),
            ("v", Some("d"))
        );
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["envelope"], json!({"env": {"K": "v"}, "deps": "d"}));
        // What a core of the flat release would send: refused, not silently dropped.
        let flat = json!({
            "call_id": "c", "capability_token": "t", "skill": "s", "tool": "t", "args": {},
            "env": {"K": "v"},
        });
        assert!(serde_json::from_value::<ToolExecuteParams>(flat).is_err());
    }
}
