//! `[deps]`: how skills' Python dependencies are built (docs/sandbox.md, "Dependencies";
//! the builds are [`crate::state::deps`]'s records, run by the executors).

use serde::{Deserialize, Serialize};

/// `[deps]` in `skillbox.toml` (every key optional, unknown keys refused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DepsConfig {
    /// The package index, PEP 503 "simple" (default `https://pypi.org/simple`): the only
    /// network of a build, through the egress proxy. A private index or mirror for
    /// air-gapped hosts; its host needs `[fetch] allow_private` when it is private.
    pub index_url: String,
    /// Longest build (default 10 min).
    pub build_timeout_ms: u64,
    /// Memory of a build (default 1024 MiB).
    pub memory_mb: u64,
    /// Build a skill's missing dependencies when the skills are loaded (default true);
    /// otherwise only on install and `skillbox skill deps NAME`.
    pub build_on_load: bool,
}

impl Default for DepsConfig {
    fn default() -> Self {
        Self {
            index_url: "https://pypi.org/simple".into(),
            build_timeout_ms: 600_000,
            memory_mb: 1024,
            build_on_load: true,
        }
    }
}

impl DepsConfig {
    /// What is wrong with it, if anything.
    pub fn problems(&self) -> Vec<String> {
        let url = &self.index_url;
        let ok = (url.starts_with("https://") || url.starts_with("http://"))
            && url.len() > "https://".len()
            && !url.contains(char::is_whitespace);
        match ok {
            true => Vec::new(),
            false => vec![format!(
                "index_url {url:?} is not an http(s) URL of a package index (PEP 503 simple)"
            )],
        }
    }

    /// The index's host pattern, as `permissions.network` writes it: what a build may
    /// reach.
    pub fn index_pattern(&self) -> String {
        let (scheme, rest) = match self.index_url.split_once("://") {
            Some((s, r)) => (s, r),
            None => ("https", self.index_url.as_str()),
        };
        let authority = rest.split('/').next().unwrap_or_default();
        match scheme {
            "http" => format!("http://{authority}"),
            _ => authority.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_is_the_only_host_a_build_reaches() {
        let d = DepsConfig::default();
        assert_eq!(d.index_pattern(), "pypi.org");
        let local = DepsConfig {
            index_url: "http://index.test:8080/simple/".into(),
            ..d.clone()
        };
        assert_eq!(local.index_pattern(), "http://index.test:8080");
        let bad = DepsConfig {
            index_url: "ftp://x".into(),
            ..d
        };
        assert_eq!(bad.problems().len(), 1);
    }
}
