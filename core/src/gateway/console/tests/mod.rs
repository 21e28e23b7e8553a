//! The console's answers through [`super::handle`] over a test gateway (no server): the
//! security headers, sign-in by token and by one-time link, the guard on every post, and
//! escaping of what skills and bots put on the page.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvals;
mod attribution;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use skillbox_protocol::skill::{Catalog, Security};

use super::session::COOKIE;
use super::{handle, Console, ConsoleSection};
use crate::gateway::web::request::Body;
use crate::gateway::Gateway;
use crate::state::store::{unix_ms_now, ApprovalRecord, ApprovalStatus};

pub(super) const TOKEN: &str = "console-token-7d1e0b";
pub(super) const HOST: &str = "127.0.0.1:7070";
pub(super) const ORIGIN: &str = "http://127.0.0.1:7070";

pub(super) fn gateway(
    ws: &std::path::Path,
    section: &ConsoleSection,
    catalog: Catalog,
    skills_root: std::path::PathBuf,
) -> Gateway {
    crate::gateway::test_gateway(ws, catalog, skills_root, TOKEN, 4096, Console::new(section))
}

/// Request headers of a case.
pub(super) type Headers<'a> = &'a [(&'a str, &'a str)];

pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    pub(super) body: String,
}

pub(super) async fn send(
    gw: &Gateway,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    form: &str,
) -> Answer {
    let mut map = HeaderMap::new();
    map.insert(http::header::HOST, HeaderValue::from_static(HOST));
    for (k, v) in headers {
        map.insert(
            http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    let body: Body = Full::new(Bytes::from(form.to_string()))
        .map_err(|never| match never {})
        .boxed();
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q.to_string())),
        None => (path, None),
    };
    let r = handle(gw, method, path, query, map, body).await;
    let status = r.status();
    let headers = r.headers().clone();
    let body =
        String::from_utf8(r.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    Answer {
        status,
        headers,
        body,
    }
}

/// A live session: its cookie header and CSRF token.
pub(super) fn session(gw: &Gateway) -> (String, String) {
    let (id, s) = gw.console.sessions.create(unix_ms_now()).unwrap();
    (format!("{COOKIE}={id}"), s.csrf)
}

pub(super) fn pending(gw: &Gateway, id: &str, security: Security, args: Value) {
    gw.calls
        .pipeline
        .store()
        .insert_approval(&ApprovalRecord {
            id: id.to_string(),
            skill: "notes".into(),
            tool: "append".into(),
            args_hash: "0".repeat(64),
            args,
            security,
            status: ApprovalStatus::Pending,
            created_at: unix_ms_now(),
            decided_at: None,
            reason: None,
            requested_by: "tg".into(),
            context_id: Some("chat-1".into()),
            decided_by: None,
        })
        .unwrap();
}

pub(super) fn status_of(gw: &Gateway, id: &str) -> ApprovalStatus {
    gw.approvals.approvals.get(id).unwrap().status
}

pub(super) fn setup() -> (tempfile::TempDir, Gateway) {
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(
        dir.path(),
        &ConsoleSection::default(),
        Catalog::default(),
        dir.path().join("skills"),
    );
    (dir, gw)
}

#[tokio::test]
async fn console_pages_send_csp_without_unsafe_inline_and_forbid_framing() {
    let (_dir, gw) = setup();
    let (cookie, _) = session(&gw);
    for (path, headers) in [
        ("/console/", vec![]),
        ("/console/approvals", vec![("cookie", cookie.as_str())]),
        ("/console/nothing", vec![("cookie", cookie.as_str())]),
    ] {
        let a = send(&gw, Method::GET, path, &headers, "").await;
        let csp = a.headers["content-security-policy"].to_str().unwrap();
        assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert_eq!(a.headers["x-frame-options"], "DENY", "{path}");
        assert_eq!(a.headers["cache-control"], "no-store", "{path}");
        // No inline script on any page: scripts come from /console/assets only.
        assert!(!a.body.contains("<script>"), "{path}: {}", a.body);
    }
}

#[tokio::test]
async fn sign_in_form_has_the_api_token_password_input() {
    let (_dir, gw) = setup();
    let a = send(&gw, Method::GET, "/console/", &[], "").await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(
        a.body.contains(r#"<label for="token">API token</label>"#),
        "{}",
        a.body
    );
    assert!(
        a.body.contains(r#"type="password" name="token""#),
        "{}",
        a.body
    );
    assert!(a.body.contains(">Sign in</button>"), "{}", a.body);
}

#[tokio::test]
async fn sign_in_with_the_token_sets_a_strict_http_only_cookie() {
    let (_dir, gw) = setup();
    let form = format!("token={TOKEN}");
    let a = send(
        &gw,
        Method::POST,
        "/console/signin",
        &[("origin", ORIGIN)],
        &form,
    )
    .await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    assert_eq!(a.headers["location"], "/console/approvals");
    let cookie = a.headers["set-cookie"].to_str().unwrap();
    for part in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/console",
        "Max-Age=28800",
    ] {
        assert!(cookie.contains(part), "{cookie}");
    }
    assert!(
        !cookie.contains(TOKEN),
        "the token itself must not be the cookie"
    );
    assert_eq!(gw.console.sessions.count(unix_ms_now()), 1);
    // The cookie opens the pages.
    let value = cookie.split(';').next().unwrap();
    let page = send(
        &gw,
        Method::GET,
        "/console/approvals",
        &[("cookie", value)],
        "",
    )
    .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
}

#[tokio::test]
async fn sign_in_with_a_wrong_token_is_refused_without_a_cookie() {
    let (_dir, gw) = setup();
    let a = send(
        &gw,
        Method::POST,
        "/console/signin",
        &[("origin", ORIGIN)],
        "token=console-token-7d1e0c",
    )
    .await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert!(a.body.contains("Wrong API token"), "{}", a.body);
    assert!(a.headers.get("set-cookie").is_none());
    assert_eq!(gw.console.sessions.count(unix_ms_now()), 0);
}

#[tokio::test]
async fn sign_in_with_a_wrong_token_does_not_disclose_the_token_file_path() {
    let (dir, gw) = setup();
    let a = send(
        &gw,
        Method::POST,
        "/console/signin",
        &[("origin", ORIGIN)],
        "token=guessing",
    )
    .await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    // Where the token is, said as the first page says it, not where this host keeps it.
    assert!(
        a.body
            .contains("Wrong API token. It is in &lt;workspace&gt;/.skillbox/api-token."),
        "{}",
        a.body
    );
    let workspace = dir.path().display().to_string();
    assert!(!a.body.contains(&workspace), "{}", a.body);
}

#[tokio::test]
async fn sign_in_from_another_origin_is_refused() {
    let (_dir, gw) = setup();
    let form = format!("token={TOKEN}");
    for origin in [Some("http://evil.example"), None] {
        let headers: Vec<(&str, &str)> = origin.map(|o| ("origin", o)).into_iter().collect();
        let a = send(&gw, Method::POST, "/console/signin", &headers, &form).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{origin:?}");
        assert!(a.headers.get("set-cookie").is_none());
    }
}

#[tokio::test]
async fn sign_in_returns_to_the_page_asked_for_and_nowhere_else() {
    let (_dir, gw) = setup();
    let a = send(&gw, Method::GET, "/console/approvals/ap_1", &[], "").await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
    assert_eq!(
        a.headers["location"],
        "/console/?next=%2Fconsole%2Fapprovals%2Fap_1"
    );
    let form = send(
        &gw,
        Method::GET,
        "/console/?next=%2Fconsole%2Fapprovals%2Fap_1",
        &[],
        "",
    )
    .await;
    assert!(
        form.body
            .contains(r#"<input type="hidden" name="next" value="/console/approvals/ap_1">"#),
        "{}",
        form.body
    );
    let ok = format!("token={TOKEN}&next=%2Fconsole%2Fapprovals%2Fap_1");
    let a = send(
        &gw,
        Method::POST,
        "/console/signin",
        &[("origin", ORIGIN)],
        &ok,
    )
    .await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
    assert_eq!(a.headers["location"], "/console/approvals/ap_1");
    // Anything but a plain console path is ignored: no open redirect.
    for next in [
        "https://evil.example/",
        "//evil.example",
        "/console//evil.example",
        "/console/../v1/tools",
        "/console/approvals?x=1",
        "/consolex",
        "/console/",
    ] {
        let form = serde_urlencoded::to_string([("token", TOKEN), ("next", next)]).unwrap();
        let a = send(
            &gw,
            Method::POST,
            "/console/signin",
            &[("origin", ORIGIN)],
            &form,
        )
        .await;
        assert_eq!(a.status, StatusCode::SEE_OTHER, "{next}");
        assert_eq!(a.headers["location"], "/console/approvals", "{next}");
        let page = send(
            &gw,
            Method::GET,
            &format!(
                "/console/?{}",
                serde_urlencoded::to_string([("next", next)]).unwrap()
            ),
            &[],
            "",
        )
        .await;
        assert!(
            !page.body.contains(r#"name="next""#),
            "{next}: {}",
            page.body
        );
    }
}

#[tokio::test]
async fn one_time_link_works_once() {
    let (_dir, gw) = setup();
    let path = gw.console.sign_in_path().unwrap();
    assert!(!path.contains(TOKEN));
    let first = send(&gw, Method::GET, &path, &[], "").await;
    assert_eq!(first.status, StatusCode::SEE_OTHER);
    assert!(first.headers["set-cookie"]
        .to_str()
        .unwrap()
        .contains("SameSite=Strict"));
    let again = send(&gw, Method::GET, &path, &[], "").await;
    assert_eq!(again.status, StatusCode::FORBIDDEN);
    assert!(again.body.contains("works once"), "{}", again.body);
    assert!(again.headers.get("set-cookie").is_none());
}

#[tokio::test]
async fn one_time_link_expires_after_link_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(
        dir.path(),
        &ConsoleSection {
            link_seconds: 0,
            ..ConsoleSection::default()
        },
        Catalog::default(),
        dir.path().join("skills"),
    );
    let path = gw.console.sign_in_path().unwrap();
    let a = send(&gw, Method::GET, &path, &[], "").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn pages_without_a_session_go_to_sign_in_and_posts_are_refused() {
    let (_dir, gw) = setup();
    pending(&gw, "ap_1", Security::Write, json!({}));
    for path in [
        "/console/approvals",
        "/console/approvals/ap_1",
        "/console/skills",
    ] {
        let a = send(
            &gw,
            Method::GET,
            path,
            &[("cookie", "skillbox_console=forged")],
            "",
        )
        .await;
        assert_eq!(a.status, StatusCode::SEE_OTHER, "{path}");
        let location = a.headers["location"].to_str().unwrap();
        assert!(
            location.starts_with("/console/?next=%2Fconsole%2F"),
            "{path}: {location}"
        );
    }
    let live = send(&gw, Method::GET, "/console/approvals/live", &[], "").await;
    assert_eq!(live.status, StatusCode::UNAUTHORIZED);
    let a = send(
        &gw,
        Method::POST,
        "/console/approvals/ap_1",
        &[("origin", ORIGIN)],
        "decision=approve&csrf=x",
    )
    .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(a.body.contains("no console session"), "{}", a.body);
    assert_eq!(status_of(&gw, "ap_1"), ApprovalStatus::Pending);
}

#[tokio::test]
async fn sign_out_ends_the_session() {
    let (_dir, gw) = setup();
    let (cookie, csrf) = session(&gw);
    let a = send(
        &gw,
        Method::POST,
        "/console/signout",
        &[("origin", ORIGIN), ("cookie", cookie.as_str())],
        &format!("csrf={csrf}"),
    )
    .await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
    assert!(a.headers["set-cookie"]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));
    let page = send(
        &gw,
        Method::GET,
        "/console/approvals",
        &[("cookie", cookie.as_str())],
        "",
    )
    .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn oversized_form_is_refused() {
    let (_dir, gw) = setup();
    let form = format!("token={}", "x".repeat(5000));
    let a = send(
        &gw,
        Method::POST,
        "/console/signin",
        &[("origin", ORIGIN)],
        &form,
    )
    .await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(a.body.contains("4096-byte limit"), "{}", a.body);
}

/// What an approval card shows (payload, warnings, permissions, recent decisions).
mod card;
