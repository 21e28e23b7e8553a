//! The `Host` a request names, checked against the host the proxy checked (the absolute
//! URL's, or the `CONNECT` host's): a request that names another host is domain fronting
//! (a shared front end routes by `Host`, so it would reach a host outside
//! `permissions.network`), and is refused in every mode where the proxy reads requests.

use crate::proxy::target::Target;

/// Why a request's `Host` headers do not name the checked host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// More than one `Host` header (RFC 9112 §3.2: answered 400).
    #[error("the request carries {0} Host headers; send one, naming the host of the request")]
    Several(usize),
    /// A `Host` naming another host or port than the checked one.
    #[error(
        "the request's Host {named:?} names another host than {checked}, the one the proxy \
         checked (domain fronting); send Host: {expected}, or ask for that host itself"
    )]
    Other {
        /// The `Host` value as sent (printable ASCII only).
        named: String,
        /// The checked origin (`scheme://host[:port]`).
        checked: String,
        /// The `Host` the request should carry.
        expected: String,
    },
}

impl HostError {
    /// The status the proxy answers with.
    pub fn status(&self) -> u16 {
        match self {
            HostError::Several(_) => 400,
            HostError::Other { .. } => 403,
        }
    }
}

/// Checks the `Host` values of a request (`values`: every `Host` header, in order) against
/// `target`: none, or exactly one naming the same host and port (a missing port is the
/// scheme's default; case and a trailing dot are ignored).
pub fn check_host<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
    target: &Target,
) -> Result<(), HostError> {
    let values: Vec<&[u8]> = values.into_iter().collect();
    match values.as_slice() {
        [] => Ok(()),
        [one] if names(one, target) => Ok(()),
        [one] => Err(HostError::Other {
            named: printable(one),
            checked: target.origin(),
            expected: target.host_header(),
        }),
        several => Err(HostError::Several(several.len())),
    }
}

/// Checks an authority a request line carries (absolute form inside a read connection,
/// or `:authority`) the same way as a `Host`.
pub fn check_authority(authority: &str, target: &Target) -> Result<(), HostError> {
    check_host([authority.as_bytes()], target)
}

/// Whether the `Host` value `value` names `target`'s host and port.
fn names(value: &[u8], target: &Target) -> bool {
    let Ok(value) = std::str::from_utf8(value) else {
        return false;
    };
    let value = value.trim();
    let (host, port) = match split(value) {
        Some(parts) => parts,
        None => return false,
    };
    let port = port.unwrap_or(target.scheme.default_port());
    let host = host.trim_end_matches('.');
    let checked = target.host.trim_end_matches('.');
    host.eq_ignore_ascii_case(checked) && port == target.port
}

/// `host[:port]`, a v6 host bracketed; `None` when the port is not a number.
fn split(value: &str) -> Option<(&str, Option<u16>)> {
    if value.is_empty() {
        return None;
    }
    let (host, port) = if value.starts_with('[') {
        let end = value.find(']')?;
        let rest = &value[end + 1..];
        (&value[..=end], rest.strip_prefix(':'))
    } else {
        match value.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (value, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => Some(p.parse::<u16>().ok()?),
    };
    Some((host, port))
}

/// `value` for a message: printable ASCII, anything else a `?`, at most 200 bytes.
fn printable(value: &[u8]) -> String {
    value
        .iter()
        .take(200)
        .map(|&b| if b.is_ascii_graphic() { b as char } else { '?' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Target {
        Target::parse(url).unwrap()
    }

    #[test]
    fn host_naming_the_checked_host_passes() {
        let t = target("http://a.test:8080/x");
        for ok in [
            "a.test:8080",
            "A.Test:8080",
            "a.test.:8080",
            " a.test:8080 ",
        ] {
            assert_eq!(check_host([ok.as_bytes()], &t), Ok(()), "{ok}");
        }
        assert_eq!(check_host(std::iter::empty(), &t), Ok(()));
        let default = target("https://a.test/");
        for ok in ["a.test", "a.test:443"] {
            assert_eq!(check_host([ok.as_bytes()], &default), Ok(()), "{ok}");
        }
    }

    #[test]
    fn host_header_fronting_refused() {
        let t = target("http://a.test:8080/x");
        for bad in [
            "b.test:8080",
            "a.test",
            "a.test:80",
            "a.test:8081",
            "a.test.evil:8080",
            "a.test:8080:1",
            "",
            "a.test:x",
            "[::1]:8080",
        ] {
            let e = check_host([bad.as_bytes()], &t).unwrap_err();
            assert_eq!(e.status(), 403, "{bad}");
            assert!(e.to_string().contains("domain fronting"), "{bad}: {e}");
            assert!(e.to_string().contains("Host: a.test:8080"), "{bad}: {e}");
        }
        let e = check_host([&b"a.test:8080"[..], b"b.test"], &t).unwrap_err();
        assert_eq!(e, HostError::Several(2));
        assert_eq!(e.status(), 400);
        assert!(check_host([&b"a.test\xff"[..]], &t).is_err());
    }

    #[test]
    fn an_absolute_form_authority_is_checked_like_a_host() {
        let t = target("https://a.test:8443/");
        assert_eq!(check_authority("a.test:8443", &t), Ok(()));
        assert!(check_authority("c.test:8443", &t).is_err());
    }
}
