//! The built-in tools (seed 004's), one file each: its name and what it tells an agent,
//! its arguments (the type the pipeline parses, beside the JSON schema listed for it; the
//! tests hold the two to each other), whose envelope it runs under ([`Reach`]), whether it
//! is a command-session tool, and its MCP annotations. `GET /v1/tools`, MCP's
//! `tools/list`, a context's base tools and the pipeline's gate read this table: adding a
//! built-in is one file here, its line in [`ALL`], and its handler in the pipeline.

mod close_context;
mod exec_command;
mod load_skill;
mod run_skill;
mod run_skill_script;
mod write_stdin;

use serde_json::{json, Value};
use skillbox_protocol::Target;

pub use close_context::CloseArgs;
pub use exec_command::ExecArgs;
pub use write_stdin::WriteArgs;

/// Whose envelope (env, secrets, network, limits) a built-in's work runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// None: it reads a skill (`load_skill`, `run_skill`), runs nothing.
    Reads,
    /// The skill its `name` argument names (`run_skill_script`).
    NamedSkill,
    /// The skill its `skill` argument names, else the context's only pinned skill, else
    /// none (`exec_command`).
    ExecEnvelope,
    /// The envelope of the session it writes to (`write_stdin`).
    Session,
    /// None: it ends processes and reaches nothing (`close_context`).
    Nothing,
}

impl Reach {
    /// The skill the arguments name, which the caller must be allowed to use before
    /// anything about it is looked up.
    pub fn named<'a>(&self, args: &'a Value) -> Option<&'a str> {
        let key = match self {
            Reach::Reads | Reach::NamedSkill => "name",
            Reach::ExecEnvelope => "skill",
            Reach::Session | Reach::Nothing => return None,
        };
        args.get(key).and_then(Value::as_str)
    }

    /// Whether it runs programs with a skill's envelope (a `write` one included).
    pub fn runs_programs(&self) -> bool {
        matches!(
            self,
            Reach::NamedSkill | Reach::ExecEnvelope | Reach::Session
        )
    }
}

/// One built-in tool.
#[derive(Debug)]
pub struct Builtin {
    /// Its target (its name is the target's).
    pub target: Target,
    /// What it tells an agent.
    pub description: &'static str,
    /// Its arguments' JSON schema; `available` names the skills it may name.
    pub schema: fn(available: &[String]) -> Value,
    /// Whose envelope it runs under.
    pub reach: Reach,
    /// A command-session tool: listed when `[exec] enabled`, and needs a context.
    pub session: bool,
}

impl Builtin {
    /// Its name.
    pub fn name(&self) -> String {
        self.target.to_string()
    }

    /// The MCP annotations: a built-in that runs programs may do anything its skill may
    /// (destructive, open world); closing a session ends processes but reaches nothing
    /// outside; reading a skill changes nothing.
    pub fn annotations(&self) -> Value {
        let runs = self.reach.runs_programs();
        let ends = self.reach == Reach::Nothing;
        json!({
            "readOnlyHint": !runs && !ends,
            "destructiveHint": runs || ends,
            "openWorldHint": runs,
        })
    }

    /// As `GET /v1/tools` lists it.
    pub fn listed(&self, available: &[String]) -> Value {
        json!({
            "name": self.name(),
            "description": self.description,
            "parameters": (self.schema)(available),
            "security": "read",
            "builtin": true,
        })
    }
}

/// Every built-in, in the order they are listed.
pub static ALL: [&Builtin; 6] = [
    &load_skill::BUILTIN,
    &run_skill::BUILTIN,
    &run_skill_script::BUILTIN,
    &exec_command::BUILTIN,
    &write_stdin::BUILTIN,
    &close_context::BUILTIN,
];

/// The built-in of `target`, `None` for a skill's tool.
pub fn of(target: &Target) -> Option<&'static Builtin> {
    ALL.into_iter().find(|b| b.target == *target)
}

/// The built-ins as `GET /v1/tools` lists them; `name` arguments are an enum of
/// `available`. The command-session tools are listed when `exec` is on.
pub fn listed(available: &[String], exec: bool) -> Vec<Value> {
    (ALL.into_iter())
        .filter(|b| exec || !b.session)
        .map(|b| b.listed(available))
        .collect()
}

#[cfg(test)]
mod tests;
