//! The checks on every state-changing console request, beyond the SameSite=Strict cookie:
//! the session's CSRF token in the form (compared in constant time) and an `Origin` header
//! naming this very host (a browser always sends one on a POST; a request without it is
//! refused rather than trusted).

use subtle::ConstantTimeEq;

/// Why a state-changing console request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    /// No session cookie, or an expired or unknown one.
    #[error("no console session (it expired, or the browser did not send the cookie); sign in again at /console/")]
    NoSession,
    /// The request has no `Origin` header.
    #[error("the request has no Origin header; the console takes changes only from its own pages")]
    NoOrigin,
    /// The `Origin` is another site.
    #[error("the request comes from {origin}, not from this console ({host}); cross-site requests are refused")]
    CrossOrigin {
        /// The `Origin` sent.
        origin: String,
        /// This host.
        host: String,
    },
    /// The CSRF token is missing or wrong.
    #[error("the form's CSRF token is missing or wrong; reload the console page and try again")]
    Csrf,
}

/// Whether `origin` (the `Origin` header) names `host` (the `Host` header): the same
/// host and port, over http or https (a TLS proxy in front changes only the scheme).
pub fn check_origin(origin: Option<&str>, host: Option<&str>) -> Result<(), GuardError> {
    let origin = origin.ok_or(GuardError::NoOrigin)?;
    let host = host.unwrap_or_default();
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    match authority {
        Some(a) if !host.is_empty() && a.eq_ignore_ascii_case(host) => Ok(()),
        _ => Err(GuardError::CrossOrigin {
            origin: origin.to_string(),
            host: host.to_string(),
        }),
    }
}

/// Whether `presented` (the form field) equals the session's `expected` token, in
/// constant time.
pub fn check_csrf(presented: Option<&str>, expected: &str) -> Result<(), GuardError> {
    let presented = presented.ok_or(GuardError::Csrf)?;
    if presented.is_empty() || !bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) {
        return Err(GuardError::Csrf);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_origin_post_passes() {
        assert_eq!(
            check_origin(Some("http://127.0.0.1:7070"), Some("127.0.0.1:7070")),
            Ok(())
        );
        assert_eq!(
            check_origin(Some("https://box.example:443"), Some("box.example:443")),
            Ok(())
        );
    }

    #[test]
    fn cross_site_post_is_refused_naming_both_origins() {
        let e = check_origin(Some("http://evil.example"), Some("127.0.0.1:7070")).unwrap_err();
        assert!(matches!(e, GuardError::CrossOrigin { .. }));
        let msg = e.to_string();
        assert!(
            msg.contains("evil.example") && msg.contains("127.0.0.1:7070"),
            "{msg}"
        );
        // Another port of the same host is another origin.
        assert!(check_origin(Some("http://127.0.0.1:8080"), Some("127.0.0.1:7070")).is_err());
        // A lookalike prefix is not the host.
        assert!(check_origin(
            Some("http://127.0.0.1:7070.evil.example"),
            Some("127.0.0.1:7070")
        )
        .is_err());
        assert!(check_origin(Some("null"), Some("127.0.0.1:7070")).is_err());
        assert!(check_origin(Some("http://127.0.0.1:7070"), None).is_err());
    }

    #[test]
    fn post_without_origin_is_refused() {
        assert_eq!(
            check_origin(None, Some("127.0.0.1:7070")),
            Err(GuardError::NoOrigin)
        );
    }

    #[test]
    fn csrf_token_must_match_exactly() {
        assert_eq!(check_csrf(Some("tok"), "tok"), Ok(()));
        assert_eq!(check_csrf(Some("tok2"), "tok"), Err(GuardError::Csrf));
        assert_eq!(check_csrf(Some("to"), "tok"), Err(GuardError::Csrf));
        assert_eq!(check_csrf(Some(""), ""), Err(GuardError::Csrf));
        assert_eq!(check_csrf(None, "tok"), Err(GuardError::Csrf));
    }
}
