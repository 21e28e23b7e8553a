//! `[skills]`: the skills roots, highest precedence first (resolved by
//! [`crate::skills::roots`]).

use serde::{Deserialize, Serialize};

/// `[skills]`
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SkillsSection {
    /// Skills roots, highest precedence first; empty: `<workspace>/skills` only.
    pub roots: Vec<String>,
}
