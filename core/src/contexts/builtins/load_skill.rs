//! `load_skill {name}`: a skill's instructions (its SKILL.md body) and its file list.

use serde_json::json;
use skillbox_protocol::Target;

use super::{Builtin, Reach};

/// The built-in.
pub static BUILTIN: Builtin = Builtin {
    target: Target::LoadSkill,
    description: "Read a skill's instructions (the body of its SKILL.md) and its file list.",
    schema: |available| {
        json!({
            "type": "object",
            "properties": {"name": {"type": "string", "enum": available}},
            "required": ["name"],
            "additionalProperties": false
        })
    },
    reach: Reach::Reads,
    session: false,
};
