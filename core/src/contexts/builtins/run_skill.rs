//! `run_skill {name, task}` (seed 001 §19): delegates a task to a skill for the agent's
//! sub-agent. It runs nothing: it checks the skill exists and the caller may use it,
//! refuses a loop and a chain deeper than `[routing] max_delegate_depth`, and answers a
//! child context with the skill pinned and its instructions loaded
//! ([`crate::contexts::delegation`]).

use serde_json::json;
use skillbox_protocol::Target;

use super::{Builtin, Reach};

/// The built-in.
pub static BUILTIN: Builtin = Builtin {
    target: Target::RunSkill,
    description: "Delegate a task to a skill: answers a child context (its id) with the skill \
                  pinned, its instructions and the call chain, for a sub-agent to work in; \
                  refuses a loop or a chain deeper than the configured depth.",
    schema: |available| {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": available},
                "task": {"type": "string", "minLength": 1}
            },
            "required": ["name", "task"],
            "additionalProperties": false
        })
    },
    reach: Reach::Reads,
    session: false,
};
