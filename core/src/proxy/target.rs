//! The URL a fetch goes to, split into the parts the proxy checks (scheme, host, port)
//! and the part it forwards (path and query), and the resolution of a redirect's
//! `Location` against it.

use std::net::IpAddr;

use skillbox_protocol::skill::network::Scheme;

use super::ProxyError;

const CAP: &str = "fetch";

/// An absolute `http`/`https` URL without user info or fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// `http` or `https`.
    pub scheme: Scheme,
    /// Lower-case host as written: a DNS name, an IPv4 literal or a bracketed IPv6 literal.
    pub host: String,
    /// The port, the scheme's default when the URL has none.
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path_and_query: String,
}

impl Target {
    /// Parses an absolute URL, refusing other schemes, user info and empty hosts.
    pub fn parse(url: &str) -> Result<Self, ProxyError> {
        let url = url.split('#').next().unwrap_or_default();
        if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(ProxyError::invalid(
                CAP,
                "the url contains spaces or control characters; percent-encode them",
            ));
        }
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(ProxyError::invalid(
                CAP,
                format!("{url:?} is not an absolute http:// or https:// url"),
            ));
        };
        let scheme = Scheme::parse(scheme).ok_or_else(|| {
            ProxyError::invalid(
                CAP,
                format!("scheme {scheme:?} is not allowed; only http:// and https:// urls can be fetched"),
            )
        })?;
        let raw_authority = rest.split(['/', '?']).next().unwrap_or_default();
        if raw_authority.contains('@') {
            return Err(ProxyError::invalid(
                CAP,
                "urls with user info (user:password@host) are not allowed; send credentials in an Authorization header",
            ));
        }
        let uri: http::Uri = url
            .parse()
            .map_err(|e| ProxyError::invalid(CAP, format!("{url:?} is not a valid url: {e}")))?;
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        if authority.contains('@') {
            return Err(ProxyError::invalid(
                CAP,
                "urls with user info are not allowed",
            ));
        }
        let (host, port) = split_authority(authority).ok_or_else(|| {
            ProxyError::invalid(CAP, format!("{url:?} has no valid host and port"))
        })?;
        let path_and_query = uri
            .path_and_query()
            .map(|p| p.as_str())
            .filter(|p| p.starts_with('/'))
            .unwrap_or("/")
            .to_string();
        Ok(Target {
            scheme,
            host: host.to_ascii_lowercase(),
            port: port.unwrap_or(scheme.default_port()),
            path_and_query,
        })
    }

    /// `scheme://host[:port]`, the port shown only when it is not the default.
    pub fn origin(&self) -> String {
        format!("{}://{}", scheme_str(self.scheme), self.host_header())
    }

    /// The whole URL.
    #[cfg(test)]
    pub fn url(&self) -> String {
        format!("{}{}", self.origin(), self.path_and_query)
    }

    /// The URL without its query (which may carry API keys), for messages and logs.
    pub fn display(&self) -> String {
        let (path, _) = split_query(&self.path_and_query);
        format!("{}{path}", self.origin())
    }

    /// The value of the `Host` header: `host[:port]`.
    pub fn host_header(&self) -> String {
        if self.port == self.scheme.default_port() {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The host without IPv6 brackets or a trailing dot, for DNS and TLS.
    pub fn bare_host(&self) -> &str {
        let h = self.host.trim_end_matches('.');
        h.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(h)
    }

    /// The URL with the host replaced by `ip`, so the connection goes to the address the
    /// proxy checked and no second DNS lookup happens.
    pub fn pinned_url(&self, ip: IpAddr) -> String {
        let host = match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        };
        format!(
            "{}://{host}:{}{}",
            scheme_str(self.scheme),
            self.port,
            self.path_and_query
        )
    }

    /// Whether `other` has the same scheme, host and port.
    pub fn same_origin(&self, other: &Target) -> bool {
        self.scheme == other.scheme
            && self.bare_host() == other.bare_host()
            && self.port == other.port
    }

    /// Resolves a redirect's `Location` (absolute, scheme-relative, absolute-path,
    /// relative-path or query-only, RFC 3986 §5.2) against this URL.
    pub fn join(&self, location: &str) -> Result<Target, ProxyError> {
        let location = location.split('#').next().unwrap_or_default();
        if has_scheme(location) {
            return Target::parse(location);
        }
        if location.starts_with("//") {
            return Target::parse(&format!("{}:{location}", scheme_str(self.scheme)));
        }
        let (base_path, _) = split_query(&self.path_and_query);
        let joined = if location.is_empty() {
            self.path_and_query.clone()
        } else if location.starts_with('/') {
            location.to_string()
        } else if location.starts_with('?') {
            format!("{base_path}{location}")
        } else {
            let dir = &base_path[..base_path.rfind('/').map_or(0, |i| i + 1)];
            format!("{dir}{location}")
        };
        let (path, query) = split_query(&joined);
        let path = remove_dot_segments(path);
        let query = query.map(|q| format!("?{q}")).unwrap_or_default();
        Target::parse(&format!("{}{path}{query}", self.origin()))
    }
}

fn scheme_str(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::Http => "http",
        Scheme::Https => "https",
    }
}

/// `host[:port]` with a bracketed IPv6 host; `None` when the host is empty or the port bad.
fn split_authority(authority: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if authority.starts_with('[') {
        let end = authority.find(']')?;
        let rest = &authority[end + 1..];
        let port = if rest.is_empty() {
            None
        } else {
            Some(rest.strip_prefix(':')?)
        };
        (&authority[..=end], port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() || host == "[]" {
        return None;
    }
    let port = match port {
        None | Some("") => None,
        Some(p) => Some(p.parse::<u16>().ok().filter(|p| *p != 0)?),
    };
    Some((host, port))
}

/// Whether a reference starts with `scheme:` (RFC 3986 §3.1).
fn has_scheme(s: &str) -> bool {
    let Some((scheme, _)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

fn split_query(s: &str) -> (&str, Option<&str>) {
    match s.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (s, None),
    }
}

/// RFC 3986 §5.2.4 on an absolute path.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *seg {
            "." => {
                if last {
                    out.push("");
                }
            }
            ".." => {
                out.pop();
                if last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(url: &str) -> Target {
        Target::parse(url).unwrap()
    }

    fn reason(err: ProxyError) -> String {
        match err {
            ProxyError::InvalidParams { reason, .. } => reason,
            other => panic!("expected InvalidParams, got {other:?}"),
        }
    }

    #[test]
    fn parse_splits_scheme_host_port_path() {
        let a = t("https://API.Example.com/v1/x?q=1#frag");
        assert_eq!(a.scheme, Scheme::Https);
        assert_eq!(a.host, "api.example.com");
        assert_eq!(a.port, 443);
        assert_eq!(a.path_and_query, "/v1/x?q=1");
        let b = t("http://127.0.0.1:8080");
        assert_eq!((b.host.as_str(), b.port), ("127.0.0.1", 8080));
        assert_eq!(b.path_and_query, "/");
        let c = t("http://[::1]:81/a");
        assert_eq!(
            (c.host.as_str(), c.bare_host(), c.port),
            ("[::1]", "::1", 81)
        );
        assert_eq!(c.host_header(), "[::1]:81");
    }

    #[test]
    fn parse_refuses_other_schemes() {
        for url in [
            "file:///etc/passwd",
            "ftp://example.com/a",
            "gopher://x:70/",
        ] {
            let r = reason(Target::parse(url).unwrap_err());
            assert!(r.contains("only http:// and https://"), "{url}: {r}");
        }
        let r = reason(Target::parse("mailto:a@b.c").unwrap_err());
        assert!(r.contains("not an absolute http"), "{r}");
    }

    #[test]
    fn parse_refuses_userinfo() {
        for url in [
            "https://user:pw@example.com/",
            "https://example.com@127.0.0.1/",
            "http://@example.com/",
        ] {
            let r = reason(Target::parse(url).unwrap_err());
            assert!(r.contains("user info"), "{url}: {r}");
        }
    }

    #[test]
    fn parse_refuses_empty_host_bad_port_and_spaces() {
        for url in [
            "http://:80/",
            "http://a.com:0/",
            "http://a.com:99999/",
            "http://a .com/",
            "http://a.com/\n",
        ] {
            assert!(
                matches!(Target::parse(url), Err(ProxyError::InvalidParams { .. })),
                "{url}"
            );
        }
    }

    #[test]
    fn pinned_url_keeps_port_and_path() {
        let a = t("https://example.com/p?q");
        assert_eq!(
            a.pinned_url("93.184.216.34".parse().unwrap()),
            "https://93.184.216.34:443/p?q"
        );
        assert_eq!(
            a.pinned_url("2606:4700::1".parse().unwrap()),
            "https://[2606:4700::1]:443/p?q"
        );
    }

    #[test]
    fn join_resolves_location_forms() {
        let base = t("http://a.com:8080/x/y/z?q=1");
        let cases = [
            ("https://b.com/p", "https://b.com/p"),
            ("//c.com/p", "http://c.com/p"),
            ("/root?x", "http://a.com:8080/root?x"),
            ("?k=v", "http://a.com:8080/x/y/z?k=v"),
            ("w", "http://a.com:8080/x/y/w"),
            ("../w", "http://a.com:8080/x/w"),
            ("../../../../w", "http://a.com:8080/w"),
            ("./", "http://a.com:8080/x/y/"),
            ("", "http://a.com:8080/x/y/z?q=1"),
        ];
        for (loc, want) in cases {
            assert_eq!(base.join(loc).unwrap().url(), want, "{loc}");
        }
    }

    #[test]
    fn join_refuses_redirect_to_other_scheme_or_userinfo() {
        let base = t("https://a.com/");
        assert!(matches!(
            base.join("file:///etc/passwd"),
            Err(ProxyError::InvalidParams { .. })
        ));
        assert!(matches!(
            base.join("//u:p@b.com/"),
            Err(ProxyError::InvalidParams { .. })
        ));
    }

    #[test]
    fn same_origin_compares_scheme_host_port() {
        let a = t("https://a.com/x");
        assert!(a.same_origin(&t("https://A.com.:443/y")));
        assert!(!a.same_origin(&t("http://a.com/x")));
        assert!(!a.same_origin(&t("https://a.com:444/x")));
        assert!(!a.same_origin(&t("https://b.a.com/x")));
    }
}
