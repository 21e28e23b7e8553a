//! `run_skill_script {name, script, args?}`: a file under a skill's `scripts/`, run by its
//! shebang or extension with those arguments, under the skill's envelope.

use serde_json::json;
use skillbox_protocol::Target;

use super::{Builtin, Reach};

/// The built-in.
pub static BUILTIN: Builtin = Builtin {
    target: Target::RunSkillScript,
    description: "Run a file under a skill's scripts/ folder (by its shebang or extension: .py python3, .sh sh, .js node) with command-line arguments, in the skill's sandbox; in a context it works in the context's files. A failed run returns stdout, stderr and the exit code.",
    schema: |available| {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": available},
                "script": {"type": "string", "description": "path under scripts/, e.g. scripts/fill_form.py"},
                "args": {"type": "array", "items": {"type": "string"}, "description": "command-line arguments"}
            },
            "required": ["name", "script"],
            "additionalProperties": false
        })
    },
    reach: Reach::NamedSkill,
    session: false,
};
