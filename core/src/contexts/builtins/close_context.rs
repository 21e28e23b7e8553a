//! `close_context {session_id?}`: ends a command session, or every session of the context,
//! and every process in it.

use serde::Deserialize;
use serde_json::json;
use skillbox_protocol::Target;

use super::{Builtin, Reach};

/// Its arguments, as the pipeline parses them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseArgs {
    /// The session to end; none: every session of the context.
    #[serde(default)]
    pub session_id: Option<String>,
}

/// The built-in.
pub static BUILTIN: Builtin = Builtin {
    target: Target::CloseContext,
    description: "End a command session (or, without session_id, every session of the context) and every process in it.",
    schema: |_| {
        json!({
            "type": "object",
            "properties": {"session_id": {"type": "string"}},
            "additionalProperties": false
        })
    },
    reach: Reach::Nothing,
    session: true,
};
