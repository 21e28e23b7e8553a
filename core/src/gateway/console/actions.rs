//! The console's state-changing requests: sign-in (API token or one-time link), sign-out,
//! approve/deny (optionally with an allowance for the tool), and revoking an allowance.
//! Each post passes [`guarded`] first: a live session, an `Origin` of this host, and the
//! session's CSRF token in the form. A refusal answers 403 with the reason.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::Full;
use serde::Deserialize;
use skillbox_protocol::skill::validate::is_tool_name;
use subtle::ConstantTimeEq;

use super::guard::{check_csrf, check_origin, GuardError};
use super::pages::{message, sign_in as sign_in_page};
use super::session::{clear_cookie, set_cookie, Session};
use super::{html, redirect, safe_next, ConsoleReq, FormError};
use crate::approvals::Decision;
use crate::gateway::{ApiError, Gateway};
use crate::state::store::unix_ms_now;

use crate::approvals::grants::AllowError;
use crate::approvals::payload::approval_warnings;
use crate::approvals::ApprovalRecord;

/// The sign-in form.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignInForm {
    token: String,
    /// The console page to go to afterwards.
    #[serde(default)]
    next: Option<String>,
}

/// A form that carries only the CSRF token.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CsrfForm {
    csrf: Option<String>,
}

/// The decision form of an approval.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecideForm {
    csrf: Option<String>,
    decision: Decision,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    allow_minutes: Option<u64>,
    /// `yes` when the operator ticked that they read the approval's warnings.
    #[serde(default)]
    acknowledge: Option<String>,
}

fn refused(e: &GuardError) -> Response<Full<Bytes>> {
    tracing::warn!(reason = %e, "console request refused");
    html(StatusCode::FORBIDDEN, message("Refused", &e.to_string()))
}

fn bad_form(e: &FormError) -> Response<Full<Bytes>> {
    let title = match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => "Request too large",
        StatusCode::REQUEST_TIMEOUT => "Request timed out",
        _ => "Bad request",
    };
    html(e.status(), message(title, &e.to_string()))
}

/// The session, a same-origin `Origin`, and the form with the right CSRF token; or the
/// refusal to answer.
async fn guarded<T, F>(
    req: ConsoleReq,
    csrf_of: F,
) -> Result<(String, Session, T), Response<Full<Bytes>>>
where
    T: serde::de::DeserializeOwned,
    F: Fn(&T) -> Option<&str>,
{
    let Some((id, session)) = req.session.clone() else {
        return Err(refused(&GuardError::NoSession));
    };
    check_origin(
        req.header(http::header::ORIGIN),
        req.header(http::header::HOST),
    )
    .map_err(|e| refused(&e))?;
    let form: T = req.form().await.map_err(|e| bad_form(&e))?;
    check_csrf(csrf_of(&form), &session.csrf).map_err(|e| refused(&e))?;
    Ok((id, session, form))
}

fn with_session(gw: &Gateway, to: &str) -> Response<Full<Bytes>> {
    let (id, _) = match gw.console.sessions.create(unix_ms_now()) {
        Ok(s) => s,
        Err(e) => {
            return html(
                StatusCode::SERVICE_UNAVAILABLE,
                message("Sign-in failed", &e.to_string()),
            )
        }
    };
    let max_age = gw.console.sessions.limits().session_ms / 1000;
    let mut r = redirect(to);
    if let Ok(v) = HeaderValue::from_str(&set_cookie(&id, max_age)) {
        r.headers_mut().insert(http::header::SET_COOKIE, v);
    }
    r
}

/// `POST /console/signin`: the API token buys a session cookie.
pub async fn sign_in(gw: &Gateway, req: ConsoleReq) -> Response<Full<Bytes>> {
    if let Err(e) = check_origin(
        req.header(http::header::ORIGIN),
        req.header(http::header::HOST),
    ) {
        return refused(&e);
    }
    let form: SignInForm = match req.form().await {
        Ok(f) => f,
        Err(e) => return bad_form(&e),
    };
    let right = bool::from(form.token.trim().as_bytes().ct_eq(gw.token.0.as_bytes()));
    if !right {
        tracing::warn!("console sign-in with a wrong API token");
        // Said as the sign-in page says it: someone not signed in learns no path of this host.
        let why = "Wrong API token. It is in <workspace>/.skillbox/api-token.";
        let next = safe_next(form.next.as_deref());
        return html(StatusCode::UNAUTHORIZED, sign_in_page(Some(why), next));
    }
    tracing::info!("console sign-in with the API token");
    with_session(
        gw,
        safe_next(form.next.as_deref()).unwrap_or("/console/approvals"),
    )
}

/// `GET /console/link/{code}`: a one-time sign-in link from `skillbox up`.
pub fn redeem_link(gw: &Gateway, code: &str) -> Response<Full<Bytes>> {
    if !gw.console.sessions.redeem_link(code, unix_ms_now()) {
        tracing::warn!("console sign-in link refused: used, expired or unknown");
        return html(
            StatusCode::FORBIDDEN,
            message(
                "This sign-in link does not work",
                "A sign-in link works once and expires ([console] link_seconds). Sign in with the API token at /console/, or restart skillbox up for a new link.",
            ),
        );
    }
    tracing::info!("console sign-in with a one-time link");
    with_session(gw, "/console/approvals")
}

/// `POST /console/signout`.
pub async fn sign_out(gw: &Gateway, req: ConsoleReq) -> Response<Full<Bytes>> {
    let (id, _, _form) = match guarded::<CsrfForm, _>(req, |f| f.csrf.as_deref()).await {
        Ok(g) => g,
        Err(r) => return r,
    };
    gw.console.sessions.end(&id);
    let mut r = redirect("/console/");
    r.headers_mut().insert(
        http::header::SET_COOKIE,
        HeaderValue::from_str(&clear_cookie()).unwrap_or(HeaderValue::from_static("")),
    );
    r
}

/// `POST /console/approvals/{id}`: approve or deny; `allow_minutes` with an approval
/// also allows the tool for that long. The allowance is written only once the approval is
/// decided, under the allowances' lock ([`Grants::allow_after`]): bounds that refuse it
/// decide nothing, and a decision that fails (the approval was already decided) writes no
/// allowance.
///
/// [`Grants::allow_after`]: crate::approvals::grants::Grants::allow_after
pub async fn decide(gw: &Gateway, req: ConsoleReq, id: &str) -> Response<Full<Bytes>> {
    let (_, _, form) = match guarded::<DecideForm, _>(req, |f| f.csrf.as_deref()).await {
        Ok(g) => g,
        Err(r) => return r,
    };
    let approvals = &gw.approvals.approvals;
    if form.decision == Decision::Approve && form.acknowledge.as_deref() != Some("yes") {
        let warnings = match approvals.get(id) {
            Ok(record) => approval_warnings(&record.args),
            Err(e) => return api_refusal(ApiError::from(e)),
        };
        if !warnings.is_empty() {
            tracing::warn!(approval_id = %id, warnings = warnings.len(), "console approval refused: its warnings were not acknowledged");
            return html(
                StatusCode::BAD_REQUEST,
                message(
                    "Not approved",
                    &format!(
                        "This approval carries {} warning(s) (hidden characters, duplicate JSON keys or numbers a parser would change). Read them on the approval's card, tick \"I have read the warnings\" and approve again, or deny it. It is still pending.",
                        warnings.len()
                    ),
                ),
            );
        }
    }
    let reason = form.reason.filter(|r| !r.trim().is_empty());
    let Some(minutes) = form.allow_minutes else {
        return match approvals.decide(id, form.decision, reason) {
            Ok(record) => decided(&record),
            Err(e) => api_refusal(ApiError::from(e)),
        };
    };
    if form.decision != Decision::Approve {
        return html(
            StatusCode::BAD_REQUEST,
            message(
                "Bad request",
                "an allowance goes with an approval, not a denial",
            ),
        );
    }
    let record = match approvals.get(id) {
        Ok(r) => r,
        Err(e) => return api_refusal(ApiError::from(e)),
    };
    if !is_tool_name(&record.tool) {
        return html(
            StatusCode::BAD_REQUEST,
            message(
                "Allowance refused",
                &format!(
                    "{} is the core's own confirmation, not a skill's tool: it is asked every time; approve it without an allowance",
                    record.tool
                ),
            ),
        );
    }
    let allowed = approvals.grants().allow_after(
        &record.skill,
        &record.tool,
        record.security,
        minutes,
        unix_ms_now(),
        || approvals.decide(id, Decision::Approve, reason),
    );
    match allowed {
        Ok((grant, record)) => {
            tracing::info!(skill = %grant.skill, tool = %grant.tool, minutes, allowance = %grant.id, "operator approved and allowed a tool from the console");
            decided(&record)
        }
        Err(AllowError::Refused(e)) => {
            tracing::warn!(reason = %e, "allowance refused; the approval stays pending");
            html(
                StatusCode::BAD_REQUEST,
                message("Allowance refused", &e.to_string()),
            )
        }
        Err(AllowError::Decision(e)) => api_refusal(ApiError::from(e)),
    }
}

fn decided(record: &ApprovalRecord) -> Response<Full<Bytes>> {
    redirect(&format!(
        "/console/approvals?done={}",
        record.status.as_str()
    ))
}

fn api_refusal(e: ApiError) -> Response<Full<Bytes>> {
    html(e.status(), message("Not done", e.message()))
}

/// `POST /console/allowances/{id}/revoke`.
pub async fn revoke(gw: &Gateway, req: ConsoleReq, id: &str) -> Response<Full<Bytes>> {
    if let Err(r) = guarded::<CsrfForm, _>(req, |f| f.csrf.as_deref()).await {
        return r;
    }
    match gw.approvals.approvals.grants().revoke(id, unix_ms_now()) {
        Ok(g) => {
            tracing::info!(skill = %g.skill, tool = %g.tool, "operator revoked an allowance");
            redirect("/console/approvals?done=revoked")
        }
        Err(e) => html(StatusCode::NOT_FOUND, message("Not done", &e.to_string())),
    }
}
