//! Network permission patterns: `[scheme://]host[:port]`.
//!
//! - `host` is a DNS name, an IPv4 literal, a bracketed IPv6 literal, or `*.` followed by
//!   a DNS name, which matches any name below it (not the name itself).
//! - With no scheme the pattern allows `https` only; with no port, the scheme's default
//!   port only (443 for https, 80 for http).
//! - No path, query, user info or bare `*`: a permission names hosts, not the internet.

use std::net::{Ipv4Addr, Ipv6Addr};

/// A parsed network permission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPattern {
    scheme: Scheme,
    host: HostPattern,
    port: Option<u16>,
}

/// URL scheme a pattern allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS.
    Https,
}

impl Scheme {
    /// Default port of the scheme.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// Parses `http` or `https` (any case).
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Exact(String),
    /// `*.example.org`: stored as `.example.org`.
    Below(String),
}

/// Why a pattern is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("network pattern {pattern:?}: {reason}; expected [http://|https://]host[:port] such as \"api.example.com\" or \"*.example.org:8443\"")]
pub struct NetworkPatternError {
    /// The pattern.
    pub pattern: String,
    /// What is wrong.
    pub reason: &'static str,
}

impl NetworkPattern {
    /// Parses a pattern.
    pub fn parse(pattern: &str) -> Result<Self, NetworkPatternError> {
        let err = |reason| NetworkPatternError {
            pattern: pattern.to_string(),
            reason,
        };
        let (scheme, rest) = match pattern.split_once("://") {
            Some((s, rest)) => (
                Scheme::parse(s).ok_or(err("scheme must be http or https"))?,
                rest,
            ),
            None => (Scheme::Https, pattern),
        };
        if rest.contains(['/', '?', '#', '@']) || rest.chars().any(char::is_whitespace) {
            return Err(err("no path, query, user or spaces allowed"));
        }
        let (host, port) = split_host_port(rest).ok_or(err("bad port (1-65535)"))?;
        let host = host.to_ascii_lowercase();
        let host = if let Some(below) = host.strip_prefix("*.") {
            if !is_dns_name(below) || !below.contains('.') {
                return Err(err(
                    "a wildcard must be followed by a domain with at least two labels",
                ));
            }
            HostPattern::Below(format!(".{below}"))
        } else if host.contains('*') {
            return Err(err("a wildcard is only allowed as a leading \"*.\""));
        } else if is_dns_name(&host) || host.parse::<Ipv4Addr>().is_ok() || is_bracketed_v6(&host) {
            HostPattern::Exact(host)
        } else {
            return Err(err("host is not a DNS name or IP address"));
        };
        Ok(Self { scheme, host, port })
    }

    /// The port it allows: its own, else its scheme's default.
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(self.scheme.default_port())
    }

    /// Whether a request to `scheme://host:port` is allowed. `host` is compared
    /// case-insensitively; IPv6 hosts are given bracketed.
    pub fn matches(&self, scheme: Scheme, host: &str, port: u16) -> bool {
        if scheme != self.scheme || port != self.port.unwrap_or(self.scheme.default_port()) {
            return false;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match &self.host {
            HostPattern::Exact(h) => *h == host,
            HostPattern::Below(suffix) => {
                host.len() > suffix.len() && host.ends_with(suffix.as_str())
            }
        }
    }
}

fn split_host_port(s: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if s.starts_with('[') {
        let end = s.find(']')?;
        match &s[end + 1..] {
            "" => (&s[..=end], None),
            p => (&s[..=end], Some(p.strip_prefix(':')?)),
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => Some(p.parse::<u16>().ok().filter(|p| *p != 0)?),
    };
    Some((host, port))
}

fn is_bracketed_v6(h: &str) -> bool {
    h.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .is_some_and(|h| h.parse::<Ipv6Addr>().is_ok())
}

fn is_dns_name(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
        // A name made only of digits and dots is a malformed IPv4 address, not a name.
        && !h.chars().all(|c| c.is_ascii_digit() || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> NetworkPattern {
        NetworkPattern::parse(s).unwrap()
    }

    #[test]
    fn exact_host_defaults_to_https_443() {
        let pat = p("api.coingecko.com");
        assert!(pat.matches(Scheme::Https, "api.coingecko.com", 443));
        assert!(pat.matches(Scheme::Https, "API.CoinGecko.com.", 443));
        assert!(!pat.matches(Scheme::Http, "api.coingecko.com", 80));
        assert!(!pat.matches(Scheme::Https, "api.coingecko.com", 8443));
        assert!(!pat.matches(Scheme::Https, "evil-api.coingecko.com", 443));
    }

    #[test]
    fn wildcard_matches_subdomains_only() {
        let pat = p("*.example.org:8443");
        assert!(pat.matches(Scheme::Https, "a.example.org", 8443));
        assert!(pat.matches(Scheme::Https, "a.b.example.org", 8443));
        assert!(!pat.matches(Scheme::Https, "example.org", 8443));
        assert!(!pat.matches(Scheme::Https, "badexample.org", 8443));
        assert!(!pat.matches(Scheme::Https, "a.example.org", 443));
    }

    #[test]
    fn explicit_scheme_and_ip_literals() {
        assert!(p("http://127.0.0.1:8080").matches(Scheme::Http, "127.0.0.1", 8080));
        assert!(p("https://[::1]").matches(Scheme::Https, "[::1]", 443));
    }

    #[test]
    fn rejects_broad_or_malformed_patterns() {
        for bad in [
            "*",
            "*.com",
            "a.*.com",
            "ftp://a.com",
            "a.com/path",
            "user@a.com",
            "a.com:0",
            "a.com:99999",
            "a.com:",
            "-a.com",
            "a..com",
            "",
            "a com",
            "999.1.1.1",
            "[zz]",
        ] {
            assert!(
                NetworkPattern::parse(bad).is_err(),
                "{bad} should be refused"
            );
        }
    }
}
