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
    /// Hosts (as `permissions.network` writes them) that serve the files the index links
    /// to, which a build reaches beside the index. Unset: `files.pythonhosted.org` for
    /// PyPI's index (`pypi.org`), none for any other (an index that serves its own files).
    pub file_hosts: Option<Vec<String>>,
    /// Pins every build applies to what skills leave open, as pip constraints
    /// (`["mcp<2"]`); a skill's `[grants.<skill>] constraints` come after these.
    pub constraints: Vec<String>,
}

impl Default for DepsConfig {
    fn default() -> Self {
        Self {
            index_url: "https://pypi.org/simple".into(),
            build_timeout_ms: 600_000,
            memory_mb: 1024,
            build_on_load: true,
            file_hosts: None,
            constraints: Vec::new(),
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
        let mut out = Vec::new();
        if !ok {
            out.push(format!(
                "index_url {url:?} is not an http(s) URL of a package index (PEP 503 simple)"
            ));
        }
        let host = self.index_host();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if ok && bare.parse::<std::net::IpAddr>().is_ok() {
            out.push(format!(
                "index_url {url:?} names the index by its address {host}; the egress proxy \
                 reaches names only: give it one with [egress] resolve = {{ \"index.internal\" = \
                 \"{bare}\" }}, use index_url = \"{}\", and allow that name's port in [fetch] \
                 allow_private",
                url.replacen(&host, "index.internal", 1)
            ));
        }
        for (i, c) in self.constraints.iter().enumerate() {
            if let Some(why) = skillbox_protocol::skill::deps::spec_problem(c) {
                out.push(format!("constraints[{i}]: {c:?}: {why}"));
            }
        }
        for (i, h) in self.file_hosts.iter().flatten().enumerate() {
            if let Err(e) = skillbox_protocol::skill::network::NetworkPattern::parse(h) {
                out.push(format!("file_hosts[{i}]: {e}"));
            }
        }
        out
    }

    /// The index's host as written in `index_url` (no port).
    fn index_host(&self) -> String {
        let rest = self.index_url.split_once("://").map_or("", |(_, r)| r);
        let authority = rest.split('/').next().unwrap_or_default();
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        match authority.strip_prefix('[') {
            Some(v6) => format!("[{}]", v6.split(']').next().unwrap_or_default()),
            None => authority.split(':').next().unwrap_or_default().to_string(),
        }
    }

    /// Everything a build may reach, as `permissions.network` writes it: the index and the
    /// hosts of its files ([`Self::file_hosts`]).
    pub fn build_network(&self) -> Vec<String> {
        let mut hosts = vec![self.index_pattern()];
        match &self.file_hosts {
            Some(listed) => hosts.extend(listed.iter().cloned()),
            None if self.index_host().eq_ignore_ascii_case("pypi.org") => {
                hosts.push("files.pythonhosted.org".into());
            }
            None => {}
        }
        hosts
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
    fn pypis_index_brings_its_file_host_and_others_what_they_list() {
        assert_eq!(
            DepsConfig::default().build_network(),
            ["pypi.org", "files.pythonhosted.org"]
        );
        let mirror = DepsConfig {
            index_url: "http://index.test:8080/simple/".into(),
            ..DepsConfig::default()
        };
        assert_eq!(mirror.build_network(), ["http://index.test:8080"]);
        let split = DepsConfig {
            file_hosts: Some(vec!["http://files.test:8081".into()]),
            ..mirror
        };
        assert_eq!(
            split.build_network(),
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
}
