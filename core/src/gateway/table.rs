//! The route table: every route of the gateway as method + path pattern → the role it
//! needs and its handler (docs/http-api.md describes each, with a table by role). Dispatch
//! takes the first route whose method and pattern match and refuses a caller without its
//! role (403 `permission_denied` naming the role); a path some route's pattern matches
//! under other methods is answered 405 with an `Allow` header derived from the same table,
//! any other path 404.

use http::Method;

use super::mcp;
use super::rest::{
    approvals, contexts, deps, files, health, install, observe, reload, repairs, route, skills,
    tokens, tools,
};
use super::web::error::ApiError;
use super::web::request::{Answered, Handled, Req};
use super::Gateway;
use crate::auth::{Caller, Role};

/// A route handler.
pub type Handler = for<'a> fn(&'a Gateway, Req) -> Handled<'a>;

/// One route: a method, a path pattern, the role it needs and its handler.
#[derive(Debug)]
pub struct Route {
    /// The method it takes.
    pub method: Method,
    /// The path, `/`-separated: literal segments, `{name}` for one segment, `{*name}` for
    /// one or more trailing segments.
    pub pattern: &'static str,
    /// The role a caller needs; `None` for a route without a token (`/healthz`).
    pub role: Option<Role>,
    /// What answers it.
    pub handler: Handler,
}

macro_rules! routes {
    ($($method:ident $pattern:literal $role:ident => $handler:path),* $(,)?) => {
        [$(Route {
            method: Method::$method,
            pattern: $pattern,
            role: routes!(@role $role),
            handler: |gw, req| Box::pin(async move {
                $handler(gw, req).await.map(|r| r.map(Into::into))
            }),
        }),*]
    };
    (@role anyone) => { None };
    (@role bot) => { Some(Role::Bot) };
    (@role operator) => { Some(Role::Operator) };
}

/// Every route with the role it needs: `bot` routes are open to bots and the operator
/// (the handler limits a bot to its skills, contexts and records), `operator` routes to
/// the operator only. Order matters only between patterns that match the same path with
/// the same method (none do today).
pub fn routes() -> [Route; 36] {
    routes![
        GET "/healthz" anyone => health::healthz,
        GET "/v1/skills" bot => skills::list,
        GET "/v1/skills/{name}" bot => skills::get,
        GET "/v1/skills/{name}/files/{*path}" bot => skills::file,
        POST "/v1/skills/reload" operator => reload::skills,
        POST "/v1/skills/install" operator => install::install,
        DELETE "/v1/skills/{name}" operator => install::remove,
        POST "/v1/skills/{name}/repairs" operator => repairs::propose,
        POST "/v1/skills/{name}/deps" operator => deps::build,
        POST "/v1/skills/{name}/update" operator => install::update,
        POST "/v1/trust/reload" operator => reload::trust,
        GET "/v1/tools" bot => tools::list,
        POST "/v1/tools/call" bot => tools::call,
        POST "/v1/route" bot => route::plan,
        POST "/v1/route/execute" bot => route::execute,
        GET "/v1/contexts/{id}" bot => contexts::get,
        PUT "/v1/contexts/{id}/skills/{name}" bot => contexts::pin,
        DELETE "/v1/contexts/{id}/skills/{name}" bot => contexts::unpin,
        DELETE "/v1/contexts/{id}" bot => files::delete_context,
        GET "/v1/contexts/{id}/files" bot => files::list,
        PUT "/v1/contexts/{id}/files/{*path}" bot => files::put,
        GET "/v1/contexts/{id}/files/{*path}" bot => files::get,
        DELETE "/v1/contexts/{id}/files/{*path}" bot => files::delete,
        GET "/v1/approvals" bot => approvals::list,
        POST "/v1/approvals/{id}" bot => approvals::decide,
        GET "/metrics" operator => observe::metrics,
        GET "/v1/calls" bot => observe::calls,
        GET "/v1/calls/{id}" bot => observe::call,
        GET "/v1/routes" bot => observe::routes,
        GET "/v1/routes/{route_id}" bot => observe::route,
        GET "/v1/skills/{name}/repairs" operator => observe::repairs,
        GET "/v1/tokens" operator => tokens::list,
        POST "/v1/tokens" operator => tokens::create,
        DELETE "/v1/tokens/{name}" operator => tokens::revoke,
        POST "/mcp" bot => mcp::serve,
        POST "/mcp/{context_id}" bot => mcp::serve_in_context,
    ]
}

/// What a request asks: its method and path, and who asks (`None` before authentication,
/// for the routes that need none).
#[derive(Debug)]
pub struct Asked<'a> {
    /// The method.
    pub method: &'a Method,
    /// The path.
    pub path: &'a str,
    /// The authenticated caller.
    pub caller: Option<Caller>,
}

/// The segments of `path` (split at `/`, without empty ends).
pub fn segments(path: &str) -> Vec<&str> {
    path.trim_matches('/').split('/').collect()
}

/// The captures of `pattern` on `segments`, or `None` when it does not match.
fn captures(pattern: &'static str, path: &[&str]) -> Option<Vec<(&'static str, String)>> {
    let mut out = Vec::new();
    let parts = segments(pattern);
    for (i, part) in parts.iter().enumerate() {
        if let Some(name) = part.strip_prefix("{*").and_then(|p| p.strip_suffix('}')) {
            let rest = path.get(i..).filter(|r| !r.is_empty())?;
            out.push((name, rest.join("/")));
            return Some(out);
        }
        let segment = path.get(i)?;
        match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            Some(name) => out.push((name, segment.to_string())),
            None if part == segment => {}
            None => return None,
        }
    }
    (parts.len() == path.len()).then_some(out)
}

/// The methods `path` is served with, in the order GET, POST, PUT, DELETE; empty when no
/// route has this shape.
pub fn allowed(path: &str) -> Vec<Method> {
    let segments = segments(path);
    let table = routes();
    [Method::GET, Method::POST, Method::PUT, Method::DELETE]
        .into_iter()
        .filter(|m| {
            table
                .iter()
                .any(|r| r.method == *m && captures(r.pattern, &segments).is_some())
        })
        .collect()
}

/// Answers `method path` with its route when the caller holds the route's role, or
/// 401/403 when it does not, or 405/404 when no route takes it.
pub async fn dispatch(
    gw: &Gateway,
    asked: Asked<'_>,
    query: Option<String>,
    headers: http::HeaderMap,
    body: super::web::request::Body,
) -> Answered {
    let Asked {
        method,
        path,
        caller,
    } = asked;
    let segments = segments(path);
    for route in routes() {
        if route.method != *method {
            continue;
        }
        if let Some(params) = captures(route.pattern, &segments) {
            let caller = admit(&route, method, path, caller)?;
            // Parameters as named: `my%20file.txt` is the file `my file.txt`.
            let params = (params.into_iter())
                .map(|(name, raw)| Ok((name, super::web::pct::decode(&raw)?)))
                .collect::<Result<Vec<_>, String>>()
                .map_err(|why| {
                    ApiError::new(skillbox_protocol::result::ErrorKind::InvalidArgs, why)
                })?;
            let req = Req {
                body,
                query,
                params,
                max_body: gw.max_request_bytes,
                body_timeout: gw.server_limits.body_timeout,
                headers,
                caller,
            };
            return (route.handler)(gw, req).await;
        }
    }
    Err(no_route(method, path))
}

/// The caller a route runs for, when it holds the route's role.
fn admit(
    route: &Route,
    method: &Method,
    path: &str,
    caller: Option<Caller>,
) -> Result<Caller, ApiError> {
    match (route.role, caller) {
        (None, caller) => Ok(caller.unwrap_or(Caller::Operator)),
        (Some(_), None) => Err(ApiError::unauthorized()),
        (Some(role), Some(caller)) if caller.has(role) => Ok(caller),
        (Some(role), Some(caller)) => {
            tracing::warn!(bot = %caller.name(), %method, %path, "refused: the route needs the {} role", role.as_str());
            Err(ApiError::needs_role(method, path, role, &caller))
        }
    }
}

/// The refusal of a request no route took: 405 with `Allow` when the path is known, else 404.
fn no_route(method: &Method, path: &str) -> ApiError {
    let allowed = allowed(path);
    if allowed.is_empty() {
        return ApiError::new(
            skillbox_protocol::result::ErrorKind::NotFound,
            format!("no route {method} {path}; docs/http-api.md lists the routes"),
        );
    }
    let allow: Vec<&str> = allowed.iter().map(Method::as_str).collect();
    let allow = allow.join(", ");
    let message = format!("{path} does not take {method}; use {allow} (docs/http-api.md)");
    ApiError::method_not_allowed(allow, message)
}

#[cfg(test)]
mod tests {
    use http::StatusCode;

    use super::*;

    /// A method, a path, and the captures (name, value) the route takes from it.
    type Sample = (
        &'static str,
        &'static str,
        &'static [(&'static str, &'static str)],
    );

    /// A path of every route, with its method and the captures its handler reads.
    const ROUTES: [Sample; 37] = [
        ("GET", "/healthz", &[]),
        ("GET", "/v1/skills", &[]),
        ("GET", "/v1/skills/echo", &[("name", "echo")]),
        (
            "GET",
            "/v1/skills/echo/files/scripts/run.py",
            &[("name", "echo"), ("path", "scripts/run.py")],
        ),
        ("GET", "/v1/tools", &[]),
        ("POST", "/v1/tools/call", &[]),
        ("POST", "/v1/route", &[]),
        ("POST", "/v1/route/execute", &[]),
        ("POST", "/v1/skills/install", &[]),
        ("POST", "/v1/skills/reload", &[]),
        ("POST", "/v1/skills/echo/repairs", &[("name", "echo")]),
        ("POST", "/v1/skills/echo/deps", &[("name", "echo")]),
        ("POST", "/v1/skills/echo/update", &[("name", "echo")]),
        ("DELETE", "/v1/skills/echo", &[("name", "echo")]),
        ("POST", "/v1/trust/reload", &[]),
        ("GET", "/v1/contexts/c1", &[("id", "c1")]),
        (
            "PUT",
            "/v1/contexts/c1/skills/echo",
            &[("id", "c1"), ("name", "echo")],
        ),
        (
            "DELETE",
            "/v1/contexts/c1/skills/echo",
            &[("id", "c1"), ("name", "echo")],
        ),
        ("GET", "/v1/approvals", &[]),
        ("POST", "/v1/approvals/ap_1", &[("id", "ap_1")]),
        ("GET", "/v1/skills/reload", &[("name", "reload")]),
        ("GET", "/metrics", &[]),
        ("GET", "/v1/calls", &[]),
        ("GET", "/v1/calls/c1", &[("id", "c1")]),
        ("GET", "/v1/routes", &[]),
        ("GET", "/v1/routes/rt_1", &[("route_id", "rt_1")]),
        ("GET", "/v1/skills/echo/repairs", &[("name", "echo")]),
        ("POST", "/mcp", &[]),
        ("POST", "/mcp/c1", &[("context_id", "c1")]),
        ("DELETE", "/v1/contexts/c1", &[("id", "c1")]),
        ("GET", "/v1/contexts/c1/files", &[("id", "c1")]),
        (
            "PUT",
            "/v1/contexts/c1/files/in/a.csv",
            &[("id", "c1"), ("path", "in/a.csv")],
        ),
        (
            "GET",
            "/v1/contexts/c1/files/in/a.csv",
            &[("id", "c1"), ("path", "in/a.csv")],
        ),
        (
            "DELETE",
            "/v1/contexts/c1/files/in/a.csv",
            &[("id", "c1"), ("path", "in/a.csv")],
        ),
        ("GET", "/v1/tokens", &[]),
        ("POST", "/v1/tokens", &[]),
        ("DELETE", "/v1/tokens/tg", &[("name", "tg")]),
    ];

    fn route_of(method: &str, path: &str) -> Option<(&'static str, Vec<(&'static str, String)>)> {
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        let segments = segments(path);
        routes()
            .into_iter()
            .filter(|r| r.method == m)
            .find_map(|r| captures(r.pattern, &segments).map(|c| (r.pattern, c)))
    }

    #[test]
    fn every_route_is_dispatched_with_its_captures_and_listed_in_allow() {
        for (method, path, want) in ROUTES {
            let (pattern, got) =
                route_of(method, path).unwrap_or_else(|| panic!("{method} {path}: no route"));
            let got: Vec<(&str, &str)> = got.iter().map(|(k, v)| (*k, v.as_str())).collect();
            assert_eq!(got, want, "{method} {path} ({pattern})");
            let m = Method::from_bytes(method.as_bytes()).unwrap();
            assert!(allowed(path).contains(&m), "{method} {path}");
        }
    }

    #[test]
    fn every_table_route_has_a_sample() {
        for r in routes() {
            assert!(
                ROUTES.iter().any(|(m, p, _)| *m == r.method.as_str()
                    && route_of(m, p).map(|(pat, _)| pat) == Some(r.pattern)),
                "{} {} has no sample in ROUTES",
                r.method,
                r.pattern
            );
        }
    }

    #[test]
    fn literal_segments_win_over_captures_only_by_method() {
        assert_eq!(
            allowed("/v1/skills/reload"),
            [Method::GET, Method::POST, Method::DELETE]
        );
        assert_eq!(allowed("/v1/skills/echo"), [Method::GET, Method::DELETE]);
        assert_eq!(
            allowed("/v1/contexts/c1/skills/echo"),
            [Method::PUT, Method::DELETE]
        );
    }

    /// The hand-written list this table replaced, kept as the reference the derived
    /// `Allow` must equal (with the observability routes added since).
    fn allowed_before_the_table(segments: &[&str]) -> Vec<Method> {
        use Method as M;
        match segments {
            ["healthz"]
            | ["metrics"]
            | ["v1", "skills"]
            | ["v1", "tools"]
            | ["v1", "approvals"]
            | ["v1", "calls"]
            | ["v1", "calls", _]
            | ["v1", "routes"]
            | ["v1", "routes", _] => vec![M::GET],
            ["v1", "skills", _, "repairs"] => vec![M::GET, M::POST],
            ["v1", "skills", _, "deps"] => vec![M::POST],
            ["v1", "skills", _, "update"] => vec![M::POST],
            ["v1", "skills", "reload" | "install"] => vec![M::GET, M::POST, M::DELETE],
            ["v1", "skills", _] => vec![M::GET, M::DELETE],
            ["v1", "tools", "call"]
            | ["v1", "route"]
            | ["v1", "route", "execute"]
            | ["v1", "trust", "reload"]
            | ["v1", "approvals", _] => vec![M::POST],
            ["v1", "skills", _, "files", rest @ ..] if !rest.is_empty() => vec![M::GET],
            ["v1", "contexts", _] => vec![M::GET, M::DELETE],
            ["v1", "contexts", _, "files"] => vec![M::GET],
            ["v1", "contexts", _, "files", rest @ ..] if !rest.is_empty() => {
                vec![M::GET, M::PUT, M::DELETE]
            }
            ["v1", "contexts", _, "skills", _] => vec![M::PUT, M::DELETE],
            ["mcp"] | ["mcp", _] => vec![M::POST],
            ["v1", "tokens"] => vec![M::GET, M::POST],
            ["v1", "tokens", _] => vec![M::DELETE],
            _ => Vec::new(),
        }
    }

    #[test]
    fn derived_allow_equals_the_hand_written_list_it_replaced() {
        let mut paths: Vec<&str> = ROUTES.iter().map(|(_, p, _)| *p).collect();
        paths.extend([
            "/",
            "",
            "/v1",
            "/v1/",
            "/v1/skills/",
            "/v1/skills/install",
            "/v1/skills/install/repairs",
            "/v1/skills/echo/files",
            "/v1/skills/echo/files/a",
            "/v1/skills/echo/files/a/b/c",
            "/v1/skills/echo/other",
            "/v1/tools/call/x",
            "/v1/route/other",
            "/v1/contexts",
            "/v1/contexts/c1/skills",
            "/v1/contexts/c1/skills/echo/x",
            "/v1/approvals/ap_1/x",
            "/v1/trust",
            "/healthz/x",
            "//v1//skills",
        ]);
        for path in paths {
            assert_eq!(
                allowed(path),
                allowed_before_the_table(&segments(path)),
                "{path}"
            );
        }
    }

    #[test]
    fn files_route_needs_a_path() {
        assert!(route_of("GET", "/v1/skills/echo/files").is_none());
        assert!(allowed("/v1/skills/echo/files").is_empty());
    }

    #[test]
    fn get_on_a_post_route_is_405_with_allow() {
        let r = no_route(&Method::GET, "/v1/tools/call").into_response();
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.headers()[http::header::ALLOW], "POST");
    }

    #[test]
    fn get_on_mcp_is_405_with_allow_post() {
        for path in ["/mcp", "/mcp/c1"] {
            let r = no_route(&Method::GET, path).into_response();
            assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{path}");
            assert_eq!(r.headers()[http::header::ALLOW], "POST", "{path}");
        }
    }

    #[test]
    fn unknown_path_is_404_naming_the_docs() {
        let e = no_route(&Method::GET, "/v1/nothing");
        assert!(e.message().contains("docs/http-api.md"), "{}", e.message());
        let r = e.into_response();
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert!(r.headers().get(http::header::ALLOW).is_none());
    }
}
