//! One approval as the console draws it: who asks, what the tool does and what its skill
//! may do, the arguments or the exact payload to be signed with what must be read before
//! approving, and the decision forms. Also the compact table of recent decisions.

use maud::{html, Markup};
use serde_json::Value;
use skillbox_protocol::skill::{InstallLock, Security, Skill};

use super::time::when;
use crate::approvals::inspect::{segments, Segment};
use crate::approvals::payload::{approval_warnings, sign_payload};
use crate::approvals::{ApprovalRecord, ApprovalStatus};
use crate::skills::install::verify;
use skillbox_protocol::skill::validate::is_tool_name;

/// What an approval card needs beyond the record.
pub struct CardContext<'a> {
    /// The session's CSRF token, for the forms.
    pub csrf: &'a str,
    /// The install lock (publisher, trust label).
    pub lock: Option<&'a InstallLock>,
    /// `[approvals] timeout_ms`.
    pub timeout_ms: u64,
    /// `[approvals] allow_max_minutes`.
    pub max_minutes: u64,
    /// The skill as loaded now, when it still is.
    pub skill: Option<&'a Skill>,
}

fn status_label(status: ApprovalStatus) -> Markup {
    html! { span class={"label " (status.as_str())} { (status.as_str()) } }
}

/// The security level's word.
pub fn security_name(s: Security) -> &'static str {
    match s {
        Security::Read => "read",
        Security::Write => "write",
        Security::Sign => "sign",
    }
}

/// `text` exactly, with every hidden or direction-changing character drawn as a
/// `<U+XXXX>` badge instead of itself.
pub fn shown(text: &str) -> Markup {
    html! {
        @for s in segments(text) {
            @match s {
                Segment::Plain(p) => (p),
                Segment::Hidden(c) => span.cp data-hidden-char title="invisible or direction-changing character" {
                    "<U+" (format!("{:04X}", u32::from(c))) ">"
                },
            }
        }
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
            } @else if let Some(t) = payload["text"].as_str() {
                p.meta {
                    @if payload["json"].as_bool() == Some(true) { "The exact text (JSON), as it will be signed:" }
                    @else { "The exact text (UTF-8), as it will be signed:" }
                }
                pre data-payload-text { (shown(t)) }
            } @else if let Some(h) = payload["hex"].as_str() {
                p.meta { "Not text; hex:" }
                pre data-payload-hex { (h) }
            }
            @if payload["truncated"].as_bool() == Some(true) {
                p.meta { "Only the start is shown; the hash and the warnings cover all of it." }
            }
        }
    }
}

fn warnings_block(warnings: &[Value]) -> Markup {
    html! {
        @if !warnings.is_empty() {
            div.warnings role="alert" data-warnings {
                h4 { "Read this before approving" }
                ul {
                    @for w in warnings {
                        li data-warning=(w["kind"].as_str().unwrap_or("")) { (w["detail"].as_str().unwrap_or("")) }
                    }
                }
            }
        }
    }
}

fn list_or_none(items: &[String]) -> Markup {
    html! {
        @if items.is_empty() { span.meta { "none" } }
        @else { @for (i, item) in items.iter().enumerate() { @if i > 0 { ", " } code { (item) } } }
    }
}

/// Each bound secret as `NAME → host, host` (the hosts that receive its value).
fn secret_lines(p: &skillbox_protocol::skill::Permissions) -> Vec<String> {
    (p.secrets.iter())
        .map(|s| format!("{} → {}", s.name, s.hosts.join(", ")))
        .collect()
}

/// What the tool does and what its skill declared it may use.
fn declared(r: &ApprovalRecord, skill: Option<&Skill>) -> Markup {
    let Some(skill) = skill else {
        return html! { p.meta data-permissions { "The skill is no longer loaded: its declaration cannot be shown." } };
    };
    let description = skill.tool(&r.tool).map(|t| t.description.as_str());
    let p = &skill.permissions;
    html! {
        section.declared data-permissions {
            h4 { "What the tool does and what its skill may use" }
            dl {
                dt { "Does" } dd data-tool-description { (description.unwrap_or("(no longer declared)")) }
                dt { "Security" } dd data-security { (security_name(r.security)) }
                dt { "Network" } dd data-network { (list_or_none(&p.network)) }
                dt { "Env" } dd data-env { (list_or_none(&p.env)) }
                dt { "Secrets" } dd data-secrets { (list_or_none(&secret_lines(p))) }
                dt { "Workspace" } dd data-workspace { (list_or_none(&p.workspace.read)) }
            }
        }
    }
}

/// Who asked for the approval (a bot's name, or the operator), in which context, and who
/// decided it.
fn requester_rows(r: &ApprovalRecord) -> Markup {
    html! {
        dt { "Asked by" } dd data-requested-by { (r.requested_by) }
        dt { "Context" } dd data-context { (r.context_id.as_deref().unwrap_or("none")) }
        @if let Some(by) = &r.decided_by { dt { "Decided by" } dd data-decided-by { (by) } }
    }
}

/// One approval's card.
pub fn card(r: &ApprovalRecord, ctx: &CardContext<'_>) -> Markup {
    let locked = ctx.lock.and_then(|l| l.get(&r.skill));
    let publisher = locked.and_then(|l| l.publisher.clone());
    let expires = r
        .created_at
        .saturating_add(i64::try_from(ctx.timeout_ms).unwrap_or(i64::MAX));
    let payload = sign_payload(&r.args);
    let warnings = approval_warnings(&r.args);
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
                (requester_rows(r))
                dt { "Requested" } dd { (when(r.created_at)) }
                @if r.status == ApprovalStatus::Pending {
                    dt { "Expires" } dd { (when(expires)) }
                }
                @if let Some(at) = r.decided_at { dt { "Decided" } dd { (when(at)) } }
                @if let Some(reason) = &r.reason { dt { "Reason" } dd { (reason) } }
                dt { "Approval" } dd { code { (r.id) } }
            }
            (declared(r, ctx.skill))
            @if let Some(p) = &payload {
                (payload_block(p))
            } @else {
                h4 { "Arguments" }
                pre data-args { (shown(&pretty(&r.args))) }
            }
            (warnings_block(&warnings))
            @if r.status == ApprovalStatus::Pending {
                (decision_forms(r, ctx, !warnings.is_empty()))
            }
        }
    }
}

fn acknowledge(warned: bool) -> Markup {
    html! {
        @if warned {
            label.ack {
                input type="checkbox" name="acknowledge" value="yes" required;
                " I have read the warnings"
            }
        }
    }
}

fn decision_forms(r: &ApprovalRecord, ctx: &CardContext<'_>, warned: bool) -> Markup {
    html! {
        form.decide method="post" action={"/console/approvals/" (r.id)} {
            input type="hidden" name="csrf" value=(ctx.csrf);
            input type="text" name="reason" placeholder="Reason (optional)" aria-label="Reason";
            (acknowledge(warned))
            button.approve type="submit" name="decision" value="approve" { "Approve" }
            // Denying needs no acknowledgement: `formnovalidate` skips the form's checks
            // for this button only.
            button.deny type="submit" name="decision" value="deny" formnovalidate { "Deny" }
        }
        // An allowance covers a skill's tool; a core action's confirmation (a dotted name
        // such as `skillbox.update`) is asked every time.
        @if r.security == Security::Write && is_tool_name(&r.tool) {
            form.decide method="post" action={"/console/approvals/" (r.id)} {
                input type="hidden" name="csrf" value=(ctx.csrf);
                input type="hidden" name="decision" value="approve";
                label { "Approve, and allow " (r.skill) ":" (r.tool) " without asking for "
                    input type="number" name="allow_minutes" value="15" min="1"
                        max=(ctx.max_minutes) aria-label="minutes";
                    " minutes" }
                (acknowledge(warned))
                button type="submit" { "Allow this tool" }
            }
        }
    }
}

/// The recent decisions, newest decision first, one line each.
pub fn decided_table(decided: &[ApprovalRecord]) -> Markup {
    html! {
        @if decided.is_empty() { p.empty { "Nothing decided yet." } }
        @else {
            table #decided {
                thead { tr { th { "Decided" } th { "Tool" } th { "Outcome" } th { "Reason" } } }
                tbody {
                    @for r in decided {
                        tr data-approval=(r.id) data-status=(r.status.as_str()) {
                            td { (r.decided_at.map(when).unwrap_or_default()) }
                            td { a href={"/console/approvals/" (r.id)} { (r.skill) ":" (r.tool) } }
                            td { (status_label(r.status)) }
                            td { (r.reason.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
    }
}
