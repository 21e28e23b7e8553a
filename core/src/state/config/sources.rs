//! `[skills]` keys for skills fetched from git (`skillbox skill add|outdated|update`,
//! [`crate::skills::sources`]): the host `owner/repo` means, the fetch limits, and the
//! operator's install policy.

use serde::{Deserialize, Serialize};

/// The host `owner/repo` sources are fetched from.
pub const DEFAULT_GIT_HOST: &str = "https://github.com";
/// Largest fetch (pack bytes received), 200 MiB.
pub const DEFAULT_MAX_FETCH_BYTES: u64 = 200 * 1024 * 1024;
/// Most files in a fetched tree.
pub const DEFAULT_MAX_FILES: usize = 20_000;
/// Largest file of a fetched skill, 50 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;
/// Longest a fetch may run.
pub const DEFAULT_FETCH_TIMEOUT_SECS: u64 = 300;

/// `[skills.fetch]`: limits on one git fetch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FetchSection {
    /// Bytes the fetch may receive before it is stopped.
    pub max_bytes: u64,
    /// Files (blobs) the fetched tree may hold.
    pub max_files: usize,
    /// Largest file in a chosen skill's folder.
    pub max_file_bytes: u64,
    /// Seconds before the fetch is stopped.
    pub timeout_secs: u64,
    /// Allow plain `http://` git URLs (default: only https, ssh, file and local repos).
    pub allow_http: bool,
}

impl Default for FetchSection {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_FETCH_BYTES,
            max_files: DEFAULT_MAX_FILES,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            timeout_secs: DEFAULT_FETCH_TIMEOUT_SECS,
            allow_http: false,
        }
    }
}

/// `[skills.install_policy]`: what the operator allows in, checked on add, update and
/// import. Empty lists allow anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InstallPolicySection {
    /// Only signed skills (as `[trust] require_signed`, but for new installs only).
    pub signed_only: bool,
    /// Sources allowed: `owner/repo`, `owner/*`, a URL prefix ending in `*`, or an exact
    /// URL. Empty: any source.
    pub sources: Vec<String>,
    /// Publishers allowed (the name in the developer certificate); non-empty implies
    /// signed only.
    pub publishers: Vec<String>,
    /// The most a skill may ask for.
    pub max_permissions: MaxPermissions,
}

/// `[skills.install_policy.max_permissions]`: the widest permissions a skill may declare.
/// A missing key puts no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MaxPermissions {
    /// The highest tool security level: `read`, `write` or `sign`.
    pub security: Option<String>,
    /// Host patterns a skill may declare (`permissions.network` and secret hosts); a
    /// declared pattern must be one of these.
    pub network: Option<Vec<String>>,
    /// Env names a skill may declare.
    pub env: Option<Vec<String>>,
    /// Secret names a skill may bind.
    pub secrets: Option<Vec<String>>,
    /// Whether a skill may declare dependencies (Python requirements, `package.json`
    /// dependencies).
    pub dependencies: Option<bool>,
    /// Skills or tools a skill may declare in `permissions.delegate`.
    pub delegate: Option<Vec<String>>,
}
