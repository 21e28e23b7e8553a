//! Executor URLs and their addresses: `https://host:port`, where `host` is an address or
//! a name resolved on every round (Docker's DNS answers a compose service name with the
//! address of every container of that service).

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// How long one resolution may take (a slow resolver must not stall the health round).
const LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Why an executor URL is not usable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UrlError {
    /// No URL at all.
    #[error("no executor URL: set [executor] url (https://host:port) in skillbox.toml")]
    None,
    /// Not `https://host:port`.
    #[error("executor URL {url:?} is not https://host:port: {reason}")]
    Malformed {
        /// The URL.
        url: String,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Why a URL's host gave no address this round.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The resolver failed.
    #[error("resolving {host}: {source}")]
    Lookup {
        /// The host.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// The resolver answered with no address.
    #[error("{host} has no address")]
    Empty {
        /// The host.
        host: String,
    },
}

/// A parsed executor URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorUrl {
    host: String,
    port: u16,
}

impl ExecutorUrl {
    /// Parses `https://host:port` (an IPv6 host in brackets).
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let bad = |reason| UrlError::Malformed {
            url: url.to_string(),
            reason,
        };
        let rest = url.strip_prefix("https://").ok_or(bad(
            "the channel is mutual TLS: the URL starts with https://",
        ))?;
        let authority = rest.trim_end_matches('/');
        if authority.contains('/') || authority.contains('@') {
            return Err(bad("no path or user info, only host:port"));
        }
        let (host, port) = authority
            .rsplit_once(':')
            .ok_or(bad("the port is required"))?;
        let port: u16 = port.parse().map_err(|_| bad("the port is not a number"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || port == 0 {
            return Err(bad("host and a non-zero port are required"));
        }
        Ok(Self {
            host: host.to_string(),
            port,
        })
    }

    /// Every address of the URL now.
    pub async fn resolve(&self) -> Result<Vec<SocketAddr>, ResolveError> {
        if let Ok(ip) = self.host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, self.port)]);
        }
        let lookup = tokio::net::lookup_host((self.host.as_str(), self.port));
        let mut addrs: Vec<SocketAddr> = tokio::time::timeout(LOOKUP_TIMEOUT, lookup)
            .await
            .map_err(|_| ResolveError::Lookup {
                host: self.host.clone(),
                source: std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer within 2 s"),
            })?
            .map_err(|source| ResolveError::Lookup {
                host: self.host.clone(),
                source,
            })?
            .collect();
        addrs.sort();
        addrs.dedup();
        if addrs.is_empty() {
            return Err(ResolveError::Empty {
                host: self.host.clone(),
            });
        }
        Ok(addrs)
    }
}

impl fmt::Display for ExecutorUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "https://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "https://{}:{}", self.host, self.port)
        }
    }
}
