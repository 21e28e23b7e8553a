//! The operator console under `/console/` on the gateway listener (docs/console.md):
//! server-rendered pages ([`pages`], [`lists`]) over the same dispatcher the API uses,
//! forms whose posts [`actions`] checks ([`guard`]: session, CSRF token, Origin), and
//! sessions bought with the API token or a one-time link ([`session`]). Assets are
//! compiled into the binary ([`assets`]); the only script refreshes the pending approvals.
//!
//! Every console answer carries [`SECURITY_HEADERS`]: a Content-Security-Policy that
//! allows scripts and styles from this origin only (no inline script), forbids framing
//! (`frame-ancestors 'none'` and `X-Frame-Options: DENY`), and is never cached.

mod actions;
mod assets;
mod card;
mod guard;
mod lists;
mod pages;
pub mod session;
mod time;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode};
use http_body_util::Full;
use maud::Markup;

use super::web::request::{read_bounded, Body, BodyReadError};
use super::Gateway;
use crate::state::store::unix_ms_now;
pub use guard::GuardError;
pub use session::{Session, SessionLimits, Sessions};

/// The Content-Security-Policy of every console answer.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                       connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The headers every console answer carries.
pub const SECURITY_HEADERS: [(&str, &str); 6] = [
    ("content-security-policy", CSP),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null`
    // on the console's own posts, which the Origin check would refuse.
    ("referrer-policy", "same-origin"),
    ("cache-control", "no-store"),
    ("cross-origin-opener-policy", "same-origin"),
];

impl ConsoleSection {
    /// The session bounds these settings give.
    pub fn limits(&self) -> SessionLimits {
        let ms = |n: u64, unit: u64| i64::try_from(n.saturating_mul(unit)).unwrap_or(i64::MAX);
        SessionLimits {
            session_ms: ms(self.session_minutes, 60_000),
            max_sessions: self.max_sessions.max(1),
            link_ms: ms(self.link_seconds, 1_000),
        }
    }
}

pub use crate::state::config::console::ConsoleSection;

/// The console's state: its sessions and sign-in links.
#[derive(Debug)]
pub struct Console {
    /// Signed-in browsers and pending one-time links.
    pub sessions: Sessions,
}

impl Console {
    /// A console with no sessions, under `section`'s bounds.
    pub fn new(section: &ConsoleSection) -> Self {
        Self {
            sessions: Sessions::new(section.limits()),
        }
    }

    /// A one-time sign-in path (`/console/link/<code>`) for `skillbox up` to print.
    pub fn sign_in_path(&self) -> Result<String, crate::random::RandomError> {
        Ok(format!(
            "/console/link/{}",
            self.sessions.issue_link(unix_ms_now())?
        ))
    }
}

/// Why a console form was not read.
#[derive(Debug, thiserror::Error)]
pub enum FormError {
    /// The body was too large, stopped arriving, or the connection broke.
    #[error("the form was not read: {0}")]
    Body(BodyReadError),
    /// The body is not the form expected.
    #[error("the form is malformed: {0}")]
    Malformed(String),
}

impl FormError {
    /// The status of the console's error page for this refusal.
    pub fn status(&self) -> StatusCode {
        match self {
            FormError::Body(BodyReadError::TooLarge { .. }) => StatusCode::PAYLOAD_TOO_LARGE,
            FormError::Body(BodyReadError::TimedOut { .. }) => StatusCode::REQUEST_TIMEOUT,
            FormError::Body(BodyReadError::Broken(_)) | FormError::Malformed(_) => {
                StatusCode::BAD_REQUEST
            }
        }
    }
}

/// One console request as the handlers see it.
#[derive(Debug)]
pub struct ConsoleReq {
    /// Its method.
    pub method: Method,
    /// The path segments after `/console`.
    pub segments: Vec<String>,
    /// The query string.
    pub query: Option<String>,
    /// Its headers.
    pub headers: HeaderMap,
    /// The session its cookie names, if alive, with the cookie value.
    pub session: Option<(String, Session)>,
    /// The body, unread.
    pub body: Body,
    /// Largest body accepted.
    pub max_body: usize,
    /// Longest wait for the whole body (`gateway.body_timeout_ms`).
    pub body_timeout: std::time::Duration,
}

impl ConsoleReq {
    /// A request header as text.
    pub fn header(&self, name: http::header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The session's CSRF token, for the forms of a page (empty without a session).
    pub fn csrf(&self) -> &str {
        self.session.as_ref().map_or("", |(_, s)| s.csrf.as_str())
    }

    /// The value of `key` in the query string, percent-decoded.
    pub fn query_param(&self, key: &str) -> Option<String> {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(self.query.as_deref().unwrap_or_default()).ok()?;
        pairs.into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Reads the body as a form of type `T` (refused from its declared length when over
    /// the limit, given up when it stops arriving: [`read_bounded`]).
    pub async fn form<T: serde::de::DeserializeOwned>(self) -> Result<T, FormError> {
        let bytes = read_bounded(self.body, self.max_body, self.body_timeout)
            .await
            .map_err(FormError::Body)?;
        serde_urlencoded::from_bytes(&bytes).map_err(|e| FormError::Malformed(e.to_string()))
    }
}

/// Answers a request for `/console` or below.
pub async fn handle(
    gw: &Gateway,
    method: Method,
    path: &str,
    query: Option<String>,
    headers: HeaderMap,
    body: Body,
) -> Response<Full<Bytes>> {
    let segments: Vec<String> = path
        .trim_start_matches("/console")
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    let now = unix_ms_now();
    let session = headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|h| session::cookie_value(h, session::COOKIE))
        .and_then(|id| {
            gw.console
                .sessions
                .get(id, now)
                .map(|s| (id.to_string(), s))
        });
    let req = ConsoleReq {
        method,
        segments,
        query,
        headers,
        session,
        body,
        max_body: gw.max_request_bytes,
        body_timeout: gw.server_limits.body_timeout,
    };
    let mut response = route(gw, req).await;
    for (name, value) in SECURITY_HEADERS {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    response
}

async fn route(gw: &Gateway, req: ConsoleReq) -> Response<Full<Bytes>> {
    let segs: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    match (&req.method, segs.as_slice()) {
        (&Method::GET, ["assets", name]) => assets::serve(name),
        (&Method::GET, []) => match req.session {
            Some(_) => redirect("/console/approvals"),
            None => {
                let next = req.query_param("next");
                html(
                    StatusCode::OK,
                    pages::sign_in(None, safe_next(next.as_deref())),
                )
            }
        },
        (&Method::GET, ["link", code]) => actions::redeem_link(gw, code),
        (&Method::POST, ["signin"]) => actions::sign_in(gw, req).await,
        (&Method::GET, _) if req.session.is_none() => {
            if segs == ["approvals", "live"] {
                return html(StatusCode::UNAUTHORIZED, pages::signed_out_fragment());
            }
            // Back to the page asked for after signing in (the approval link MCP clients
            // and the CLI print).
            let asked = format!("/console/{}", segs.join("/"));
            let query = serde_urlencoded::to_string([("next", asked.as_str())]).unwrap_or_default();
            redirect(&format!("/console/?{query}"))
        }
        (&Method::GET, ["approvals"]) => pages::approvals(gw, &req).await,
        (&Method::GET, ["approvals", "live"]) => pages::approvals_live(gw, &req).await,
        (&Method::GET, ["approvals", id]) => pages::approval(gw, &req, id).await,
        (&Method::GET, ["skills"]) => lists::skills(gw, &req).await,
        (&Method::GET, ["calls"]) => lists::calls(gw, &req).await,
        (&Method::GET, ["routes"]) => lists::routes(gw, &req).await,
        (&Method::GET, ["routes", id]) => lists::route(gw, &req, id).await,
        (&Method::POST, ["signout"]) => actions::sign_out(gw, req).await,
        (&Method::POST, ["approvals", id]) => {
            let id = id.to_string();
            actions::decide(gw, req, &id).await
        }
        (&Method::POST, ["allowances", id, "revoke"]) => {
            let id = id.to_string();
            actions::revoke(gw, req, &id).await
        }
        (&Method::GET, _) => html(
            StatusCode::NOT_FOUND,
            pages::message("Not found", "No console page here; start at /console/."),
        ),
        _ => html(
            StatusCode::METHOD_NOT_ALLOWED,
            pages::message(
                "Method not allowed",
                "The console takes GET for pages and POST from its own forms.",
            ),
        ),
    }
}

/// `next` when it is a console page this server could have sent the browser to (so the
/// sign-in cannot be made into an open redirect): `/console/` and path segments of
/// letters, digits, `_` and `-` only.
pub fn safe_next(next: Option<&str>) -> Option<&str> {
    let next = next?;
    let rest = next.strip_prefix("/console/")?;
    let safe = !rest.is_empty()
        && rest.split('/').all(|seg| {
            !seg.is_empty()
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
    safe.then_some(next)
}

/// An HTML answer.
pub fn html(status: StatusCode, markup: Markup) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(markup.into_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    r
}

/// A 303 to `location` (after a form post, or to the sign-in page).
pub fn redirect(location: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(http::header::LOCATION, v);
    }
    r
}

#[cfg(test)]
mod tests;
