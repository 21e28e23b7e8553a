//! The one network policy of the fetch capability and the egress proxy:
//!
//! 1. the scheme, host and port must match one of the skill's effective
//!    `permissions.network` patterns ([`check_declared`]);
//! 2. the proxy resolves the host itself (a name pinned by `[egress] resolve` first, as
//!    curl's `--resolve`) and refuses if *any* resolved address is not public
//!    (`address.rs`), unless the operator allow-listed the exact `host:port` or `ip:port`
//!    in `[fetch] allow_private` ([`NetPolicy::resolve_checked`]);
//! 3. the caller connects to an address from that same lookup, never resolving again.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use skillbox_protocol::skill::network::NetworkPattern;

use super::address::forbidden_reason;
use super::target::Target;

/// Why a destination is refused or cannot be reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PolicyError {
    /// The skill declares (and was granted) no network at all.
    #[error(
        "{what}: the skill declares no permissions.network; declare the host in skill.yaml \
         (permissions.network) or have the operator grant it ([grants.<skill>] network)"
    )]
    NoNetwork {
        /// What was asked for (`https://host`, a redirect).
        what: String,
    },
    /// No pattern matches the scheme, host and port.
    #[error(
        "{what}: {origin} is not in the skill's permissions.network {network:?}; declare it in \
         skill.yaml or have the operator grant it ([grants.<skill>] network)"
    )]
    Undeclared {
        /// What was asked for.
        what: String,
        /// `scheme://host[:port]`.
        origin: String,
        /// The skill's effective patterns.
        network: Vec<String>,
    },
    /// The name resolves to an address that is not public.
    #[error(
        "{host} resolves to {ip}, which is {why}; only public addresses are reached (an \
         operator can allow this exact address by adding \"{key}\" to [fetch] allow_private)"
    )]
    Private {
        /// The name asked for.
        host: String,
        /// The address it resolved to.
        ip: IpAddr,
        /// Which kind of address it is.
        why: &'static str,
        /// The `ip:port` entry that would allow it.
        key: String,
    },
    /// The name could not be resolved.
    #[error("cannot resolve {host}: {reason}")]
    Resolve {
        /// The name.
        host: String,
        /// The resolver's error.
        reason: String,
    },
    /// The name resolved to nothing.
    #[error("{host} resolves to no address")]
    NoAddress {
        /// The name.
        host: String,
    },
}

/// The skill's patterns that parse (an invalid one is logged and allows nothing).
pub(crate) fn parse_patterns(network: &[String]) -> Vec<NetworkPattern> {
    network
        .iter()
        .filter_map(|p| match NetworkPattern::parse(p) {
            Ok(pattern) => Some(pattern),
            Err(e) => {
                tracing::warn!(error = %e, "ignoring an invalid network permission");
                None
            }
        })
        .collect()
}

/// Whether `target`'s scheme, host and port match one of `patterns` (parsed from
/// `network`); `what` names the request in the refusal.
pub(crate) fn check_declared(
    network: &[String],
    patterns: &[NetworkPattern],
    target: &Target,
    what: String,
) -> Result<(), PolicyError> {
    if patterns
        .iter()
        .any(|p| p.matches(target.scheme, &target.host, target.port))
    {
        return Ok(());
    }
    if network.is_empty() {
        return Err(PolicyError::NoNetwork { what });
    }
    Err(PolicyError::Undeclared {
        what,
        origin: target.origin(),
        network: network.to_vec(),
    })
}

/// The operator's side of the policy: private addresses allowed, names pinned.
#[derive(Debug, Clone, Default)]
pub(crate) struct NetPolicy {
    /// `[fetch] allow_private`: `host:port` or `ip:port` entries.
    allow_private: Vec<String>,
    /// `[egress] resolve`, keys lower-case without a trailing dot.
    resolve: BTreeMap<String, IpAddr>,
}

impl NetPolicy {
    /// A policy allowing the `allow_private` entries and pinning the `resolve` names.
    pub(crate) fn new(allow_private: Vec<String>, resolve: &BTreeMap<String, IpAddr>) -> Self {
        let resolve = resolve
            .iter()
            .map(|(name, ip)| (normal_name(name), *ip))
            .collect();
        Self {
            allow_private,
            resolve,
        }
    }

    /// Resolves `target`'s host (a pinned name without asking DNS) and checks every
    /// address; returns them in order, without duplicates.
    pub(crate) async fn resolve_checked(
        &self,
        target: &Target,
    ) -> Result<Vec<SocketAddr>, PolicyError> {
        let host = target.bare_host();
        let mut addrs: Vec<SocketAddr> = match self.resolve.get(&normal_name(host)) {
            Some(ip) => vec![SocketAddr::new(*ip, target.port)],
            None => tokio::net::lookup_host((host, target.port))
                .await
                .map_err(|e| PolicyError::Resolve {
                    host: host.to_string(),
                    reason: e.to_string(),
                })?
                .collect(),
        };
        addrs.dedup();
        if addrs.is_empty() {
            return Err(PolicyError::NoAddress {
                host: host.to_string(),
            });
        }
        let host_key = format!("{}:{}", target.host.trim_end_matches('.'), target.port);
        let host_allowed = self.allow_listed(&host_key);
        for addr in &addrs {
            let Some(why) = forbidden_reason(addr.ip()) else {
                continue;
            };
            let key = addr_key(addr);
            if host_allowed || self.allow_listed(&key) {
                continue;
            }
            return Err(PolicyError::Private {
                host: host.to_string(),
                ip: addr.ip(),
                why,
                key,
            });
        }
        Ok(addrs)
    }

    fn allow_listed(&self, key: &str) -> bool {
        self.allow_private
            .iter()
            .any(|entry| entry.trim().eq_ignore_ascii_case(key))
    }
}

/// A name as pins are looked up: lower-case, no trailing dot.
fn normal_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// `ip:port`, a v6 address bracketed.
fn addr_key(addr: &SocketAddr) -> String {
    match addr {
        SocketAddr::V4(v4) => format!("{}:{}", v4.ip(), v4.port()),
        SocketAddr::V6(v6) => format!("[{}]:{}", v6.ip(), v6.port()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Target {
        Target::parse(url).unwrap()
    }

    #[tokio::test]
    async fn pinned_name_resolves_without_dns_and_is_still_checked() {
        let pins = BTreeMap::from([("API.test.".to_string(), "127.0.0.1".parse().unwrap())]);
        let refused = NetPolicy::new(Vec::new(), &pins)
            .resolve_checked(&target("https://api.test/"))
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, PolicyError::Private { key, why: "loopback", .. } if key == "127.0.0.1:443"),
            "{refused}"
        );
        for allowed in ["api.test:443", "127.0.0.1:443"] {
            let addrs = NetPolicy::new(vec![allowed.into()], &pins)
                .resolve_checked(&target("https://api.test/"))
                .await
                .unwrap();
            assert_eq!(addrs, vec!["127.0.0.1:443".parse().unwrap()], "{allowed}");
        }
    }

    #[test]
    fn undeclared_names_the_origin_and_the_patterns() {
        let network = vec!["api.test".to_string()];
        let patterns = parse_patterns(&network);
        assert!(check_declared(
            &network,
            &patterns,
            &target("https://api.test/"),
            String::new()
        )
        .is_ok());
        let e = check_declared(&network, &patterns, &target("http://api.test/"), "x".into())
            .unwrap_err();
        assert!(
            e.to_string().contains(
                "http://api.test is not in the skill's permissions.network [\"api.test\"]"
            ),
            "{e}"
        );
    }
}
