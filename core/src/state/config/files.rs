//! `[files]`: the quotas of a context's working folder and how long an idle one is kept
//! ([`crate::contexts::files`]).

use serde::{Deserialize, Serialize};

/// `[files]`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FilesSection {
    /// Largest file, in bytes (default 64 MiB).
    pub max_file_bytes: u64,
    /// All of one context's files together, in bytes (default 256 MiB).
    pub max_total_bytes: u64,
    /// Files in one context (default 1000).
    pub max_files: usize,
    /// A context none of whose files was written for this many days is removed (default 7;
    /// 0 keeps them).
    pub idle_days: u64,
}

impl Default for FilesSection {
    fn default() -> Self {
        Self {
            max_file_bytes: 64 * 1024 * 1024,
            max_total_bytes: 256 * 1024 * 1024,
            max_files: 1000,
            idle_days: 7,
        }
    }
}
