//! `[deps]`: how skills' Python and Node dependencies are built (docs/sandbox.md, "Dependencies";
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
    /// Hosts (as `permissions.network` writes them) that serve the files the index links
    /// to, which a build reaches beside the index. Unset: `files.pythonhosted.org` for
    /// PyPI's index (`pypi.org`), none for any other (an index that serves its own files).
    pub file_hosts: Option<Vec<String>>,
    /// Pins every build applies to what skills leave open, as pip constraints
    /// (`["mcp<2"]`); a skill's `[grants.<skill>] constraints` come after these.
    pub constraints: Vec<String>,
    /// The npm registry skills' `package.json` dependencies are installed from (default
    /// `https://registry.npmjs.org/`, which serves its tarballs itself), reached as the
    /// index is.
    pub npm_registry: String,
    /// The most MiB of package files the builds' download cache keeps (default 2048; 0
    /// turns it off): a file one build downloaded is served to the next build asking for
    /// the same URL, least recently used files evicted past this.
    pub cache_mb: u64,
}

/// The largest `cache_mb` taken (16 TiB): more is a typo, and its bytes would overflow.
pub const MAX_CACHE_MB: u64 = 16 * 1024 * 1024;

impl Default for DepsConfig {
    fn default() -> Self {
        Self {
            index_url: "https://pypi.org/simple".into(),
            build_timeout_ms: 600_000,
            memory_mb: 1024,
            build_on_load: true,
            file_hosts: None,
            constraints: Vec::new(),
            npm_registry: "https://registry.npmjs.org/".into(),
            cache_mb: 2048,
        }
    }
}

impl DepsConfig {
    /// What is wrong with it, if anything.
    pub fn problems(&self) -> Vec<String> {
        let mut out = url_problems(
            "index_url",
            &self.index_url,
            "a package index (PEP 503 simple)",
        );
        out.extend(url_problems(
            "npm_registry",
            &self.npm_registry,
            "an npm registry",
        ));
        for (i, c) in self.constraints.iter().enumerate() {
            if let Some(why) = skillbox_protocol::skill::deps::spec_problem(c) {
                out.push(format!("constraints[{i}]: {c:?}: {why}"));
            }
        }
        if self.cache_mb > MAX_CACHE_MB {
            out.push(format!(
                "cache_mb {} is more than {MAX_CACHE_MB} (16 TiB); give the MiB of package files \
                 the download cache keeps, or 0 to turn it off",
                self.cache_mb
            ));
        }
        for (i, h) in self.file_hosts.iter().flatten().enumerate() {
            if let Err(e) = skillbox_protocol::skill::network::NetworkPattern::parse(h) {
                out.push(format!("file_hosts[{i}]: {e}"));
            }
        }
        out
    }

    /// The bytes the download cache keeps (`cache_mb` in MiB; 0: off).
    pub fn cache_bytes(&self) -> u64 {
        self.cache_mb.min(MAX_CACHE_MB) * 1024 * 1024
    }

    /// Everything a build may reach, as `permissions.network` writes it: the index, the
    /// npm registry when the build installs Node dependencies (`node`), and the hosts of
    /// their files ([`Self::file_hosts`]).
    pub fn build_network(&self, node: bool) -> Vec<String> {
        let mut hosts = vec![self.index_pattern()];
        if node {
            hosts.push(pattern_of(&self.npm_registry));
        }
        match &self.file_hosts {
            Some(listed) => hosts.extend(listed.iter().cloned()),
            None if host_of(&self.index_url).eq_ignore_ascii_case("pypi.org") => {
                hosts.push("files.pythonhosted.org".into());
            }
            None => {}
        }
        hosts
    }

    /// The index's host pattern, as `permissions.network` writes it: what a build may
    /// reach.
    pub fn index_pattern(&self) -> String {
        pattern_of(&self.index_url)
    }
}

/// What is wrong with `url`, the value of `key` naming `what`, if anything: not an
/// http(s) URL, or a host given by its address (the egress proxy reaches names only).
fn url_problems(key: &str, url: &str, what: &str) -> Vec<String> {
    let ok = (url.starts_with("https://") || url.starts_with("http://"))
        && url.len() > "https://".len()
        && !url.contains(char::is_whitespace);
    let mut out = Vec::new();
    if !ok {
        out.push(format!("{key} {url:?} is not an http(s) URL of {what}"));
    }
    let host = host_of(url);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let name = match key {
        "npm_registry" => "registry.internal",
        _ => "index.internal",
    };
    if ok && bare.parse::<std::net::IpAddr>().is_ok() {
        out.push(format!(
            "{key} {url:?} names its host by the address {host}; the egress proxy reaches \
             names only: give it one with [egress] resolve = {{ \"{name}\" = \"{bare}\" }}, \
             use {key} = \"{}\", and allow that name's port in [fetch] allow_private",
            url.replacen(&host, name, 1)
        ));
    }
    out
}

/// The host of `url` as written (no port).
fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    match authority.strip_prefix('[') {
        Some(v6) => format!("[{}]", v6.split(']').next().unwrap_or_default()),
        None => authority.split(':').next().unwrap_or_default().to_string(),
    }
}

/// The host pattern of `url`, as `permissions.network` writes it.
fn pattern_of(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (s, r),
        None => ("https", url),
    };
    let authority = rest.split('/').next().unwrap_or_default();
    match scheme {
        "http" => format!("http://{authority}"),
        _ => authority.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pypis_index_brings_its_file_host_and_others_what_they_list() {
        assert_eq!(
            DepsConfig::default().build_network(false),
            ["pypi.org", "files.pythonhosted.org"]
        );
        let mirror = DepsConfig {
            index_url: "http://index.test:8080/simple/".into(),
            ..DepsConfig::default()
        };
        assert_eq!(mirror.build_network(false), ["http://index.test:8080"]);
        assert_eq!(
            mirror.build_network(true),
            ["http://index.test:8080", "registry.npmjs.org"]
        );
        let split = DepsConfig {
            file_hosts: Some(vec!["http://files.test:8081".into()]),
            ..mirror
        };
        assert_eq!(
            split.build_network(false),
            ["http://index.test:8080", "http://files.test:8081"]
        );
    }

    #[test]
    fn an_index_by_address_is_refused_with_the_fix() {
        for url in ["http://127.0.0.1:8080/simple/", "http://[::1]:8080/simple/"] {
            let d = DepsConfig {
                index_url: url.into(),
                ..DepsConfig::default()
            };
            let p = d.problems();
            assert_eq!(p.len(), 1, "{p:?}");
            assert!(p[0].contains("[egress] resolve"), "{p:?}");
            assert!(p[0].contains("index.internal:8080/simple/"), "{p:?}");
        }
        let npm = DepsConfig {
            npm_registry: "http://10.0.0.5:4873/".into(),
            ..DepsConfig::default()
        };
        let p = npm.problems();
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("registry.internal:4873/"), "{p:?}");
        let bad = DepsConfig {
            constraints: vec!["--index-url=https://evil.test".into(), "mcp<2".into()],
            ..DepsConfig::default()
        };
        let p = bad.problems();
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("constraints[0]"), "{p:?}");
    }

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

    #[test]
    fn cache_mb_past_its_bound_is_refused_naming_the_key() {
        let d = DepsConfig::default();
        assert_eq!(d.cache_bytes(), 2048 * 1024 * 1024);
        let off = DepsConfig {
            cache_mb: 0,
            ..d.clone()
        };
        assert!(off.problems().is_empty());
        assert_eq!(off.cache_bytes(), 0);
        let huge = DepsConfig {
            cache_mb: u64::MAX,
            ..d
        };
        let p = huge.problems();
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("cache_mb "), "{p:?}");
    }
}
