//! `exec_command {cmd, skill?, workdir?, yield_ms?, max_output_bytes?, tty?}`: a command in
//! the context's sandboxed shell (docs/sessions.md).

use serde::Deserialize;
use serde_json::json;
use skillbox_protocol::session::Command;
use skillbox_protocol::Target;

use super::{Builtin, Reach};
use crate::state::config::exec::MAX_YIELD_MS;

/// Its arguments, as the pipeline parses them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    /// Shell text (`sh -c`) or an argv list.
    pub cmd: Command,
    /// Whose envelope it runs under ([`Reach::ExecEnvelope`]).
    #[serde(default)]
    pub skill: Option<String>,
    /// A folder of the context's files to run in.
    #[serde(default)]
    pub workdir: Option<String>,
    /// How long to wait for it to end before answering with a session.
    #[serde(default)]
    pub yield_ms: Option<u64>,
    /// Most output bytes in the answer.
    #[serde(default)]
    pub max_output_bytes: Option<u64>,
    /// Run on a pseudo-terminal.
    #[serde(default)]
    pub tty: bool,
}

/// The built-in.
pub static BUILTIN: Builtin = Builtin {
    target: Target::ExecCommand,
    description: "Run a shell command (sh -c) or an argv list in the context's sandboxed shell: the context's files are the working directory, the skill's folder is $SKILLBOX_SKILL_DIR. Answers with the output and exit_code when it ends within yield_ms, else with a session_id to drive with write_stdin. Needs a context.",
    schema: |available| {
        json!({
            "type": "object",
            "properties": {
                "cmd": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
                "skill": {"type": "string", "enum": available, "description": "whose envelope (env, limits) the command runs under; default: the context's only pinned skill"},
                "workdir": {"type": "string", "description": "a folder of the context's files"},
                "yield_ms": {"type": "integer", "minimum": 0, "maximum": MAX_YIELD_MS},
                "max_output_bytes": {"type": "integer", "minimum": 1},
                "tty": {"type": "boolean"}
            },
            "required": ["cmd"],
            "additionalProperties": false
        })
    },
    reach: Reach::ExecEnvelope,
    session: true,
};
