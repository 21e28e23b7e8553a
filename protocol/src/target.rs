//! [`Target`]: what a tool call names, parsed once at the edge (REST, MCP, the router):
//! a skill's tool (`skill:tool`) or one of the built-in disclosure tools. Active tools of
//! a context are sets of targets too.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::tool_ref::{ToolRef, ToolRefError};

/// What a call names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// A tool a skill declares.
    Tool(ToolRef),
    /// `load_skill {name}`: a skill's instructions and file list.
    LoadSkill,
    /// `run_skill {name, task}`: a child context with the skill pinned and its
    /// instructions, for the agent's sub-agent (seed 001's delegation entry).
    RunSkill,
    /// `run_skill_script {name, script, args?}`: a file under a skill's `scripts/`, run by
    /// its shebang or extension with those arguments.
    RunSkillScript,
    /// `exec_command {cmd, skill?, ...}`: a command in a context's sandboxed shell.
    ExecCommand,
    /// `write_stdin {session_id, chars?}`: input to a running command, or a poll.
    WriteStdin,
    /// `close_context {session_id?}`: ends a command session, or all of a context's.
    CloseContext,
}

impl Target {
    /// The name of [`Target::LoadSkill`].
    pub const LOAD_SKILL: &'static str = "load_skill";
    /// The name of [`Target::RunSkillScript`].
    pub const RUN_SKILL_SCRIPT: &'static str = "run_skill_script";
    /// The name of [`Target::ExecCommand`].
    pub const EXEC_COMMAND: &'static str = "exec_command";
    /// The name of [`Target::WriteStdin`].
    pub const WRITE_STDIN: &'static str = "write_stdin";
    /// The name of [`Target::CloseContext`].
    pub const CLOSE_CONTEXT: &'static str = "close_context";
    /// The name of [`Target::RunSkill`].
    pub const RUN_SKILL: &'static str = "run_skill";

    /// The built-ins every context has (seed 004's execution tools).
    pub const SESSION_TOOLS: [Target; 3] = [
        Target::ExecCommand,
        Target::WriteStdin,
        Target::CloseContext,
    ];

    /// Parses a built-in's name or `skill:tool`.
    ///
    /// # Errors
    /// [`ToolRefError`] naming the string when it is neither.
    pub fn parse(s: &str) -> Result<Self, ToolRefError> {
        match s {
            Self::LOAD_SKILL => Ok(Target::LoadSkill),
            Self::RUN_SKILL_SCRIPT => Ok(Target::RunSkillScript),
            Self::EXEC_COMMAND => Ok(Target::ExecCommand),
            Self::WRITE_STDIN => Ok(Target::WriteStdin),
            Self::CLOSE_CONTEXT => Ok(Target::CloseContext),
            Self::RUN_SKILL => Ok(Target::RunSkill),
            _ => ToolRef::parse(s).map(Target::Tool),
        }
    }

    /// The skill's tool, when the target is one.
    pub fn tool(&self) -> Option<&ToolRef> {
        match self {
            Target::Tool(r) => Some(r),
            _ => None,
        }
    }

    /// Whether this is one of the command-session built-ins, which need a context.
    pub fn is_session_tool(&self) -> bool {
        Self::SESSION_TOOLS.contains(self)
    }

    /// Whether this is a built-in tool.
    pub fn is_builtin(&self) -> bool {
        self.tool().is_none()
    }
}

impl From<ToolRef> for Target {
    fn from(r: ToolRef) -> Self {
        Target::Tool(r)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tool(r) => r.fmt(f),
            Target::LoadSkill => f.write_str(Self::LOAD_SKILL),
            Target::RunSkillScript => f.write_str(Self::RUN_SKILL_SCRIPT),
            Target::ExecCommand => f.write_str(Self::EXEC_COMMAND),
            Target::WriteStdin => f.write_str(Self::WRITE_STDIN),
            Target::CloseContext => f.write_str(Self::CLOSE_CONTEXT),
            Target::RunSkill => f.write_str(Self::RUN_SKILL),
        }
    }
}

impl FromStr for Target {
    type Err = ToolRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Target {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_round_trip_through_their_names() {
        for (name, want) in [
            ("load_skill", Target::LoadSkill),
            ("run_skill_script", Target::RunSkillScript),
            ("exec_command", Target::ExecCommand),
            ("write_stdin", Target::WriteStdin),
            ("close_context", Target::CloseContext),
            ("run_skill", Target::RunSkill),
            ("echo:echo", Target::Tool(ToolRef::new("echo", "echo"))),
        ] {
            let t = Target::parse(name).unwrap();
            assert_eq!(t, want);
            assert_eq!(t.to_string(), name);
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(serde_json::from_str::<Target>(&json).unwrap(), t);
        }
    }

    #[test]
    fn a_name_that_is_neither_is_refused_saying_so() {
        for bad in ["", "echo", "echo.echo", ":x"] {
            let e = Target::parse(bad).unwrap_err();
            assert!(e.to_string().contains("is not a tool name"), "{bad}: {e}");
        }
    }
}
