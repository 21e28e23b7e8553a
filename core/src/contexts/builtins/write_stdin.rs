//! `write_stdin {session_id, chars?, yield_ms?, max_output_bytes?}`: input to a running
//! command of `exec_command`, or a poll, under that session's envelope.

use serde::Deserialize;
use serde_json::json;
use skillbox_protocol::Target;

use super::{Builtin, Reach};
use crate::state::config::exec::MAX_YIELD_MS;

/// Its arguments, as the pipeline parses them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The session.
    pub session_id: String,
    /// What to write (empty: just poll).
    #[serde(default)]
    pub chars: String,
    /// How long to wait for output.
    #[serde(default)]
    pub yield_ms: Option<u64>,
    /// Most output bytes in the answer.
    #[serde(default)]
    pub max_output_bytes: Option<u64>,
}

/// The built-in.
pub static BUILTIN: Builtin = Builtin {
    target: Target::WriteStdin,
    description: "Write to a running command of exec_command (empty chars: just poll) and get its output since the last answer, and exit_code once it ended.",
    schema: |_| {
        json!({
            "type": "object",
            "properties": {
                "session_id": {"type": "string"},
                "chars": {"type": "string"},
                "yield_ms": {"type": "integer", "minimum": 0, "maximum": MAX_YIELD_MS},
                "max_output_bytes": {"type": "integer", "minimum": 1}
            },
            "required": ["session_id"],
            "additionalProperties": false
        })
    },
    reach: Reach::Session,
    session: true,
};
