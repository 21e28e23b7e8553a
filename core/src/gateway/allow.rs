//! Which methods a gateway path takes, so that a known path asked with the wrong method is
//! answered 405 with an `Allow` header instead of 404 (docs/http-api.md lists the routes).
//! Kept beside [`super::routes::route`]: a route added there is added here too (the test
//! below lists every route).

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::Full;
use serde_json::json;
use skillbox_protocol::result::ErrorKind;

use super::json_response;

/// The methods `segments` (the path split at `/`, without empty ends) is served with;
/// empty when no route has this shape.
pub fn methods(segments: &[&str]) -> Vec<Method> {
    use Method as M;
    match segments {
        ["healthz"] | ["v1", "skills"] | ["v1", "tools"] | ["v1", "approvals"] => vec![M::GET],
        ["v1", "skills", "reload" | "install"] => vec![M::GET, M::POST, M::DELETE],
        ["v1", "skills", _] => vec![M::GET, M::DELETE],
        ["v1", "skills", _, "repairs"]
        | ["v1", "tools", "call"]
        | ["v1", "route"]
        | ["v1", "route", "execute"]
        | ["v1", "trust", "reload"]
        | ["v1", "approvals", _] => vec![M::POST],
        ["v1", "skills", _, "files", rest @ ..] if !rest.is_empty() => vec![M::GET],
        ["v1", "contexts", _] => vec![M::GET],
        ["v1", "contexts", _, "skills", _] => vec![M::PUT, M::DELETE],
        _ => Vec::new(),
    }
}

/// The answer to a request no route took: 405 with `Allow` when the path is known, else 404.
pub fn no_route(method: &Method, path: &str, segments: &[&str]) -> Response<Full<Bytes>> {
    let allowed = methods(segments);
    if allowed.is_empty() {
        return json_response(
            StatusCode::NOT_FOUND,
            &json!({
                "error": format!("no route {method} {path}; docs/http-api.md lists the routes"),
                "error_kind": ErrorKind::NotFound,
            }),
        );
    }
    let allow: Vec<&str> = allowed.iter().map(Method::as_str).collect();
    let allow = allow.join(", ");
    let mut r = json_response(
        StatusCode::METHOD_NOT_ALLOWED,
        &json!({
            "error": format!("{path} does not take {method}; use {allow} (docs/http-api.md)"),
            "error_kind": ErrorKind::InvalidArgs,
        }),
    );
    if let Ok(v) = http::HeaderValue::from_str(&allow) {
        r.headers_mut().insert(http::header::ALLOW, v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(path: &str) -> Vec<&str> {
        path.trim_matches('/').split('/').collect()
    }

    /// Every route of `routes::route`, with its method.
    const ROUTES: [(&str, &str); 19] = [
        ("GET", "/healthz"),
        ("GET", "/v1/skills"),
        ("GET", "/v1/skills/echo"),
        ("GET", "/v1/skills/echo/files/scripts/run.py"),
        ("GET", "/v1/tools"),
        ("POST", "/v1/tools/call"),
        ("POST", "/v1/route"),
        ("POST", "/v1/route/execute"),
        ("POST", "/v1/skills/install"),
        ("POST", "/v1/skills/reload"),
        ("POST", "/v1/skills/echo/repairs"),
        ("DELETE", "/v1/skills/echo"),
        ("POST", "/v1/trust/reload"),
        ("GET", "/v1/contexts/c1"),
        ("PUT", "/v1/contexts/c1/skills/echo"),
        ("DELETE", "/v1/contexts/c1/skills/echo"),
        ("GET", "/v1/approvals"),
        ("POST", "/v1/approvals/ap_1"),
        ("GET", "/v1/skills/reload"),
    ];

    #[test]
    fn every_route_lists_its_method() {
        for (method, path) in ROUTES {
            let m = Method::from_bytes(method.as_bytes()).unwrap();
            assert!(methods(&split(path)).contains(&m), "{method} {path}");
        }
    }

    #[test]
    fn get_on_a_post_route_is_405_with_allow() {
        let r = no_route(&Method::GET, "/v1/tools/call", &split("/v1/tools/call"));
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.headers()[http::header::ALLOW], "POST");
    }

    #[test]
    fn unknown_path_is_404_naming_the_docs() {
        let r = no_route(&Method::GET, "/v1/nothing", &split("/v1/nothing"));
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert!(r.headers().get(http::header::ALLOW).is_none());
    }
}
