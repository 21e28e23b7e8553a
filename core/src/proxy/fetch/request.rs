//! The request a tool asked for, checked: its method, and its headers without those a
//! tool may not set.

use std::collections::BTreeMap;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::Method;

use super::super::ProxyError;
use super::CAP;

/// Request headers a tool may not set: hop-by-hop headers (RFC 9110 §7.6.1; those the
/// tool's `Connection` header names are dropped too), `Host`
/// (the proxy sets it from the URL), `Content-Length` (computed from the body) and
/// `Expect`.
pub(super) const DROPPED_REQUEST_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "expect",
];

pub(super) fn parse_method(method: &str) -> Result<Method, ProxyError> {
    match method.to_ascii_uppercase().as_str() {
        "GET" => Ok(Method::GET),
        "POST" => Ok(Method::POST),
        "PUT" => Ok(Method::PUT),
        "PATCH" => Ok(Method::PATCH),
        "DELETE" => Ok(Method::DELETE),
        "HEAD" => Ok(Method::HEAD),
        _ => Err(ProxyError::invalid(
            CAP,
            format!("method {method:?} is not allowed; use GET, POST, PUT, PATCH, DELETE or HEAD"),
        )),
    }
}

/// The tool's headers without hop-by-hop ones (including those its `Connection` names).
pub(super) fn request_headers(given: &BTreeMap<String, String>) -> Result<HeaderMap, ProxyError> {
    let named_by_connection: Vec<String> = given
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| value.split(','))
        .map(|token| token.trim().to_ascii_lowercase())
        .collect();
    let mut headers = HeaderMap::new();
    for (name, value) in given {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            ProxyError::invalid(CAP, format!("{name:?} is not a valid header name"))
        })?;
        if DROPPED_REQUEST_HEADERS.contains(&name.as_str())
            || named_by_connection.iter().any(|n| n == name.as_str())
        {
            continue;
        }
        let value = HeaderValue::from_str(value).map_err(|_| {
            ProxyError::invalid(
                CAP,
                format!(
                    "the value of header {name} is not valid (control characters or non-ASCII)"
                ),
            )
        })?;
        headers.append(name, value);
    }
    Ok(headers)
}
