//! `[skills]`: the skills roots, highest precedence first (resolved by
//! [`crate::skills::roots`]), and the collection indexes `skillbox skill find` searches
//! (read by `crate::skills::find`, format in docs/skill-index.md).

use serde::{Deserialize, Serialize};

/// `[skills]`
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SkillsSection {
    /// Skills roots, highest precedence first; empty: `<workspace>/skills` only.
    pub roots: Vec<String>,
    /// Collection indexes searched by `skillbox skill find`: file paths (relative to the
    /// workspace) or `http://` / `https://` URLs of an index JSON file; empty: none.
    pub indexes: Vec<String>,
}
