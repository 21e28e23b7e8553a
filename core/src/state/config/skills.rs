//! `[skills]`: the skills roots, highest precedence first (resolved by
//! [`crate::skills::roots`]), and the collection indexes `skillbox skill find` searches
//! (read by `crate::skills::find`, format in docs/skill-index.md).

use serde::{Deserialize, Serialize};

pub use super::sources::{FetchSection, InstallPolicySection, MaxPermissions, DEFAULT_GIT_HOST};

/// `[skills]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SkillsSection {
    /// Skills roots, highest precedence first; empty: `<workspace>/skills` only.
    pub roots: Vec<String>,
    /// Collection indexes searched by `skillbox skill find`: file paths (relative to the
    /// workspace) or `http://` / `https://` URLs of an index JSON file; empty: none.
    pub indexes: Vec<String>,
    /// The host `owner/repo` sources are fetched from (`skillbox skill add owner/repo`).
    pub git_host: String,
    /// `skill update` applies an update that widens nothing without `--yes`; an update
    /// that widens permissions always waits for confirmation.
    pub auto_update: bool,
    /// `[skills.fetch]`: limits on a git fetch.
    pub fetch: FetchSection,
    /// `[skills.install_policy]`: what add, update and import let in.
    pub install_policy: InstallPolicySection,
}

impl Default for SkillsSection {
    fn default() -> Self {
        Self {
            roots: Vec::new(),
            indexes: Vec::new(),
            git_host: DEFAULT_GIT_HOST.to_string(),
            auto_update: false,
            fetch: FetchSection::default(),
            install_policy: InstallPolicySection::default(),
        }
    }
}
