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
    /// `run_skill_script {name, script, args?}`: a script of a skill, through the declared
    /// tool that runs it.
    RunSkillScript,
}

impl Target {
    /// The name of [`Target::LoadSkill`].
    pub const LOAD_SKILL: &'static str = "load_skill";
    /// The name of [`Target::RunSkillScript`].
    pub const RUN_SKILL_SCRIPT: &'static str = "run_skill_script";

    /// Parses a built-in's name or `skill:tool`.
    ///
    /// # Errors
    /// [`ToolRefError`] naming the string when it is neither.
    pub fn parse(s: &str) -> Result<Self, ToolRefError> {
        match s {
            Self::LOAD_SKILL => Ok(Target::LoadSkill),
            Self::RUN_SKILL_SCRIPT => Ok(Target::RunSkillScript),
            _ => ToolRef::parse(s).map(Target::Tool),
        }
    }

    /// The skill's tool, when the target is one.
    pub fn tool(&self) -> Option<&ToolRef> {
        match self {
            Target::Tool(r) => Some(r),
            Target::LoadSkill | Target::RunSkillScript => None,
        }
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
