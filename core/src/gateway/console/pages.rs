//! The console's layout, the sign-in form, and the approvals pages: the landing list
//! (pending first, live), one approval, and the fragment the script polls.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use maud::{html, Markup, DOCTYPE};
use serde_json::Value;
use skillbox_protocol::skill::{InstallLock, Security};

use super::{html as answer, ConsoleReq};
use crate::approvals::grants::Grant;
use crate::approvals::payload::sign_payload;
use crate::approvals::{ApprovalRecord, ApprovalStatus};
use crate::gateway::Gateway;
use crate::skills::install::verify;
use crate::state::store::unix_ms_now;

/// Decided approvals shown under the pending ones.
pub const RECENT_DECIDED: usize = 20;

/// `YYYY-MM-DD HH:MM:SS UTC` of a Unix-milliseconds time.
pub fn when(ms: i64) -> String {
    match time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000)) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        Err(_) => ms.to_string(),
    }
}

/// The page around `body`, with the navigation and the sign-out form of a session.
pub fn layout(title: &str, csrf: Option<&str>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · skillbox console" }
                link rel="stylesheet" href="/console/assets/console.css";
                script src="/console/assets/console.js" defer {}
            }
            body {
                header {
                    span.brand { "skillbox" }
                    @if let Some(csrf) = csrf {
                        nav {
                            a href="/console/approvals" { "Approvals" }
                            a href="/console/skills" { "Skills" }
                            a href="/console/calls" { "Calls" }
                            a href="/console/routes" { "Routes" }
                        }
                        form method="post" action="/console/signout" {
                            input type="hidden" name="csrf" value=(csrf);
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// The sign-in form, with `error` above it when a sign-in failed; `next` is the console
/// page to go to afterwards (already checked by [`super::safe_next`]).
pub fn sign_in(error: Option<&str>, next: Option<&str>) -> Markup {
    layout(
        "Sign in",
        None,
        html! {
            div.signin.card {
                h1 { "Sign in" }
                @if let Some(e) = error { p.flash.error role="alert" { (e) } }
                form method="post" action="/console/signin" {
                    @if let Some(next) = next { input type="hidden" name="next" value=(next); }
                    label for="token" { "API token" }
                    input id="token" type="password" name="token" autocomplete="current-password" required;
                    button type="submit" { "Sign in" }
                }
                p.meta { "The token is in " code { "<workspace>/.skillbox/api-token" } "; "
                    code { "skillbox up" } " also prints a one-time sign-in link." }
            }
        },
    )
}

/// A page that only says something (a refusal, a missing page).
pub fn message(title: &str, text: &str) -> Markup {
    layout(
        title,
        None,
        html! {
            div.card {
                h1 { (title) }
                p role="alert" { (text) }
                p { a href="/console/" { "Back to the console" } }
            }
        },
    )
}

/// What the live fragment answers without a session.
pub fn signed_out_fragment() -> Markup {
    html! { p.flash.error { "Signed out: sign in again at /console/." } }
}

/// What an approval card needs beyond the record.
struct CardContext<'a> {
    csrf: &'a str,
    lock: Option<&'a InstallLock>,
    timeout_ms: u64,
    max_minutes: u64,
}

fn status_label(status: ApprovalStatus) -> Markup {
    html! { span class={"label " (status.as_str())} { (status.as_str()) } }
}

fn security_name(s: Security) -> &'static str {
    match s {
        Security::Read => "read",
        Security::Write => "write",
        Security::Sign => "sign",
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn payload_block(payload: &Value) -> Markup {
    html! {
        section.payload data-payload {
            h4 { "What will be signed" }
            dl {
                dt { "Type" } dd { (payload["type"].as_str().unwrap_or("message")) }
                @if let Some(n) = payload["bytes"].as_u64() { dt { "Size" } dd { (n) " bytes" } }
                @if let Some(sha) = payload["sha256"].as_str() {
                    dt { "SHA-256" } dd { code data-payload-sha256 { (sha) } }
                }
            }
            @if let Some(e) = payload["error"].as_str() {
                p.flash.error { (e) }
            } @else if payload.get("json").is_some() {
                p.meta { "Decoded as JSON:" }
                pre data-payload-json { (pretty(&payload["json"])) }
            } @else if let Some(t) = payload["text"].as_str() {
                p.meta { "Decoded as UTF-8 text:" }
                pre data-payload-text { (t) }
            } @else if let Some(h) = payload["hex"].as_str() {
                p.meta { "Not text; hex:" }
                pre data-payload-hex { (h) }
            }
            @if payload["truncated"].as_bool() == Some(true) {
                p.meta { "Only the start is shown; the hash covers all of it." }
            }
        }
    }
}

fn card(r: &ApprovalRecord, ctx: &CardContext<'_>) -> Markup {
    let locked = ctx.lock.and_then(|l| l.get(&r.skill));
    let publisher = locked.and_then(|l| l.publisher.clone());
    let expires = r
        .created_at
        .saturating_add(i64::try_from(ctx.timeout_ms).unwrap_or(i64::MAX));
    let payload = sign_payload(&r.args);
    html! {
        article.card data-approval=(r.id) data-status=(r.status.as_str()) {
            h3 {
                a href={"/console/approvals/" (r.id)} { (r.skill) ":" (r.tool) }
                " " (status_label(r.status))
                " " span.label { (security_name(r.security)) }
            }
            dl {
                dt { "Skill" } dd data-skill { (r.skill) }
                dt { "Publisher" } dd { (publisher.as_deref().unwrap_or("none (unsigned)")) }
                dt { "Trust" } dd data-trust { (verify::trust_label(ctx.lock, &r.skill)) }
                dt { "Tool" } dd data-tool { (r.tool) }
                dt { "Requested" } dd { (when(r.created_at)) }
                @if r.status == ApprovalStatus::Pending {
                    dt { "Expires" } dd { (when(expires)) }
                }
                @if let Some(at) = r.decided_at { dt { "Decided" } dd { (when(at)) } }
                @if let Some(reason) = &r.reason { dt { "Reason" } dd { (reason) } }
                dt { "Approval" } dd { code { (r.id) } }
            }
            @if let Some(p) = &payload {
                (payload_block(p))
            } @else {
                h4 { "Arguments" }
                pre data-args { (pretty(&r.args)) }
            }
            @if r.status == ApprovalStatus::Pending {
                form.decide method="post" action={"/console/approvals/" (r.id)} {
                    input type="hidden" name="csrf" value=(ctx.csrf);
                    input type="text" name="reason" placeholder="Reason (optional)" aria-label="Reason";
                    button.approve type="submit" name="decision" value="approve" { "Approve" }
                    button.deny type="submit" name="decision" value="deny" { "Deny" }
                }
                @if r.security == Security::Write {
                    form.decide method="post" action={"/console/approvals/" (r.id)} {
                        input type="hidden" name="csrf" value=(ctx.csrf);
                        input type="hidden" name="decision" value="approve";
                        label { "Approve, and allow " (r.skill) ":" (r.tool) " without asking for "
                            input type="number" name="allow_minutes" value="15" min="1"
                                max=(ctx.max_minutes) aria-label="minutes";
                            " minutes" }
                        button type="submit" { "Allow this tool" }
                    }
                }
            }
        }
    }
}

fn context<'a>(gw: &'a Gateway, csrf: &'a str, lock: Option<&'a InstallLock>) -> CardContext<'a> {
    let approvals = gw.dispatcher.approvals();
    CardContext {
        csrf,
        lock,
        timeout_ms: approvals.policy().timeout_ms,
        max_minutes: approvals.grants().limits().max_minutes,
    }
}

fn read_lock(gw: &Gateway) -> Option<InstallLock> {
    InstallLock::read(&gw.skills_root).ok().flatten()
}

/// The pending cards, oldest first (the one closest to expiring on top).
fn pending_cards(gw: &Gateway, csrf: &str) -> Result<(usize, Markup), String> {
    let list = gw
        .dispatcher
        .approvals()
        .list(Some(ApprovalStatus::Pending))
        .map_err(|e| e.to_string())?;
    let lock = read_lock(gw);
    let ctx = context(gw, csrf, lock.as_ref());
    Ok((
        list.len(),
        html! {
            @if list.is_empty() { p.empty { "No approvals are waiting." } }
            @for r in &list { (card(r, &ctx)) }
        },
    ))
}

fn unavailable(e: &str) -> Response<Full<Bytes>> {
    answer(
        StatusCode::SERVICE_UNAVAILABLE,
        message("The state database failed", e),
    )
}

/// `GET /console/approvals`: pending first, then allowances, then recent decisions.
pub async fn approvals(gw: &Gateway, req: &ConsoleReq) -> Response<Full<Bytes>> {
    let csrf = req.csrf();
    let (count, pending) = match pending_cards(gw, csrf) {
        Ok(p) => p,
        Err(e) => return unavailable(&e),
    };
    let mut decided = match gw.dispatcher.approvals().list(None) {
        Ok(all) => all,
        Err(e) => return unavailable(&e.to_string()),
    };
    decided.retain(|r| r.status != ApprovalStatus::Pending);
    decided.reverse();
    decided.truncate(RECENT_DECIDED);
    let lock = read_lock(gw);
    let ctx = context(gw, csrf, lock.as_ref());
    let grants = gw.dispatcher.approvals().grants().list(unix_ms_now());
    // Only the outcomes the console's own redirects name: no text from the URL is echoed.
    let done = req.query_param("done").and_then(|d| {
        ["approved", "denied", "revoked"]
            .into_iter()
            .find(|k| *k == d)
    });
    let body = html! {
        h1 { "Approvals " span.label #pending-count { (count) } }
        @if let Some(done) = done {
            p.flash role="status" {
                @if done == "revoked" { "Allowance revoked." } @else { "Approval " (done) "." }
            }
        }
        p.meta #live-status { "Pending approvals refresh on their own." }
        h2 { "Waiting for a decision" }
        div #pending data-live { (pending) }
        h2 { "Allowances in force" }
        (grants_table(&grants, csrf))
        h2 { "Decided recently" }
        @if decided.is_empty() { p.empty { "Nothing decided yet." } }
        @for r in &decided { (card(r, &ctx)) }
    };
    answer(StatusCode::OK, layout("Approvals", Some(csrf), body))
}

fn grants_table(grants: &[Grant], csrf: &str) -> Markup {
    html! {
        @if grants.is_empty() {
            p.empty { "None: every write call asks." }
        } @else {
            table #allowances {
                thead { tr { th { "Tool" } th { "Allowed until" } th {} } }
                tbody {
                    @for g in grants {
                        tr data-allowance=(g.id) {
                            td { (g.skill) ":" (g.tool) }
                            td { (when(g.until)) }
                            td {
                                form method="post" action={"/console/allowances/" (g.id) "/revoke"} {
                                    input type="hidden" name="csrf" value=(csrf);
                                    button type="submit" { "Revoke" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /console/approvals/live`: the pending cards alone, for the script.
pub async fn approvals_live(gw: &Gateway, req: &ConsoleReq) -> Response<Full<Bytes>> {
    match pending_cards(gw, req.csrf()) {
        Ok((_, cards)) => answer(StatusCode::OK, cards),
        Err(e) => unavailable(&e),
    }
}

/// `GET /console/approvals/{id}`: one approval (the link MCP clients and the CLI print).
pub async fn approval(gw: &Gateway, req: &ConsoleReq, id: &str) -> Response<Full<Bytes>> {
    let csrf = req.csrf();
    let record = match gw.dispatcher.approvals().get(id) {
        Ok(r) => r,
        Err(e) => {
            return answer(
                StatusCode::NOT_FOUND,
                message("No such approval", &e.to_string()),
            )
        }
    };
    let lock = read_lock(gw);
    let ctx = context(gw, csrf, lock.as_ref());
    let body = html! {
        h1 { "Approval" }
        (card(&record, &ctx))
        p { a href="/console/approvals" { "All approvals" } }
    };
    answer(StatusCode::OK, layout("Approval", Some(csrf), body))
}
