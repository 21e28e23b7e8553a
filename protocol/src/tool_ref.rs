//! [`ToolRef`]: the name of one tool of one skill, written `skill:tool` on the wire, in
//! the CLI and in approval policies. Parsed once at the boundary; inside, code passes the
//! two parts, never a string it splits again.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `skill:tool`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolRef {
    /// The skill's name.
    pub skill: String,
    /// The tool's name within the skill.
    pub tool: String,
}

/// Why a string is not `skill:tool`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a tool name; use \"skill:tool\"")]
pub struct ToolRefError(pub String);

impl ToolRef {
    /// The tool `tool` of the skill `skill`.
    pub fn new(skill: impl Into<String>, tool: impl Into<String>) -> Self {
        Self {
            skill: skill.into(),
            tool: tool.into(),
        }
    }

    /// Parses `skill:tool`: both parts non-empty, split at the first `:`.
    ///
    /// # Errors
    /// [`ToolRefError`] naming the string when it has no `:` or an empty part.
    pub fn parse(s: &str) -> Result<Self, ToolRefError> {
        match s.split_once(':') {
            Some((skill, tool)) if !skill.is_empty() && !tool.is_empty() => {
                Ok(Self::new(skill, tool))
            }
            _ => Err(ToolRefError(s.to_string())),
        }
    }
}

impl fmt::Display for ToolRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.skill, self.tool)
    }
}

impl FromStr for ToolRef {
    type Err = ToolRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for ToolRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ToolRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_ref_round_trips_through_its_string() {
        let r = ToolRef::parse("crypto-price:get_price").unwrap();
        assert_eq!(r, ToolRef::new("crypto-price", "get_price"));
        assert_eq!(r.to_string(), "crypto-price:get_price");
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, "\"crypto-price:get_price\"");
        assert_eq!(serde_json::from_str::<ToolRef>(&json).unwrap(), r);
    }

    #[test]
    fn tool_ref_refuses_names_without_both_parts() {
        for bad in ["", "echo", ":echo", "echo:", ":"] {
            let e = ToolRef::parse(bad).unwrap_err();
            assert!(e.to_string().contains("is not a tool name"), "{bad}: {e}");
        }
        assert!(serde_json::from_str::<ToolRef>("\"echo\"").is_err());
    }
}
