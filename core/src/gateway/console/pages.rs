//! The console's layout, the sign-in form, and the approvals pages: the landing list
//! (pending first, live; then allowances and recent decisions), one approval, and the
//! fragment the script polls. The cards themselves are [`super::card`]'s.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use maud::{html, Markup, DOCTYPE};
use skillbox_protocol::skill::InstallLock;

use super::card::{card, decided_table, CardContext};
use super::{html as answer, ConsoleReq};
use crate::approvals::grants::Grant;
use crate::approvals::{ApprovalRecord, ApprovalStatus};
use crate::gateway::Gateway;
use crate::state::store::unix_ms_now;

/// Decided approvals shown under the pending ones.
pub const RECENT_DECIDED: usize = 20;

pub use super::time::when;

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

/// The card of `r` under the console's settings.
fn card_of(gw: &Gateway, r: &ApprovalRecord, csrf: &str, lock: Option<&InstallLock>) -> Markup {
    let approvals = &gw.approvals.approvals;
    let skill = gw.approvals.load.current().skill(&r.skill);
    card(
        r,
        &CardContext {
            csrf,
            lock,
            timeout_ms: approvals.policy().timeout_ms,
            max_minutes: approvals.grants().limits().max_minutes,
            skill: skill.as_deref(),
        },
    )
}

fn read_lock(gw: &Gateway) -> Option<InstallLock> {
    InstallLock::read(&gw.skills_root).ok().flatten()
}

/// The pending cards, oldest first (the one closest to expiring on top).
fn pending_cards(gw: &Gateway, csrf: &str) -> Result<(usize, Markup), String> {
    let list = gw
        .approvals
        .approvals
        .list(Some(ApprovalStatus::Pending))
        .map_err(|e| e.to_string())?;
    let lock = read_lock(gw);
    Ok((
        list.len(),
        html! {
            @if list.is_empty() { p.empty { "No approvals are waiting." } }
            @for r in &list { (card_of(gw, r, csrf, lock.as_ref())) }
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
    let mut decided = match gw.approvals.approvals.list(None) {
        Ok(all) => all,
        Err(e) => return unavailable(&e.to_string()),
    };
    decided.retain(|r| r.status != ApprovalStatus::Pending);
    // Newest decision first (an approval asked long ago may be decided last).
    decided.sort_by_key(|r| std::cmp::Reverse((r.decided_at, r.created_at)));
    decided.truncate(RECENT_DECIDED);
    let grants = gw.approvals.approvals.grants().list(unix_ms_now());
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
        (decided_table(&decided))
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
    let record = match gw.approvals.approvals.get(id) {
        Ok(r) => r,
        Err(e) => {
            return answer(
                StatusCode::NOT_FOUND,
                message("No such approval", &e.to_string()),
            )
        }
    };
    let lock = read_lock(gw);
    let body = html! {
        h1 { "Approval" }
        (card_of(gw, &record, csrf, lock.as_ref()))
        p { a href="/console/approvals" { "All approvals" } }
    };
    answer(StatusCode::OK, layout("Approval", Some(csrf), body))
}
