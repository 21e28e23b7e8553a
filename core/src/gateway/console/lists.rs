//! The console's read-only lists: skills (trust, availability, disabled reasons, pinned
//! contexts), recent calls (filtered by skill and outcome), and routing decisions with
//! their score breakdown.

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use maud::{html, Markup};
use serde_json::Value;
use skillbox_protocol::skill::InstallLock;

use super::pages::{layout, message, when};
use super::{html as answer, ConsoleReq};
use crate::gateway::web::list::{parse_outcome, DEFAULT_LIMIT};
use crate::gateway::Gateway;
use crate::skills::install::{disabled, verify};
use crate::state::store::CallFilter;

fn page(req: &ConsoleReq, title: &str, body: Markup) -> Response<Full<Bytes>> {
    answer(StatusCode::OK, layout(title, Some(req.csrf()), body))
}

fn failed(e: impl std::fmt::Display) -> Response<Full<Bytes>> {
    answer(
        StatusCode::SERVICE_UNAVAILABLE,
        message("The state database failed", &e.to_string()),
    )
}

/// `GET /console/skills`.
pub async fn skills(gw: &Gateway, req: &ConsoleReq) -> Response<Full<Bytes>> {
    let catalog = gw.records.load.catalog();
    let lock = InstallLock::read(&gw.skills_root).ok().flatten();
    let mut pins: BTreeMap<String, Vec<String>> = BTreeMap::new();
    match gw.records.store.all_pins() {
        Ok(all) => {
            for p in all {
                pins.entry(p.skill).or_default().push(p.context_id);
            }
        }
        Err(e) => return failed(e),
    }
    let gone = disabled::list(&catalog);
    let bots = gw.bots.list();
    // The bots whose token reaches a skill (those without `--skills` reach every one).
    let bots_of = |skill: &str| -> String {
        let names: Vec<&str> = (bots.iter())
            .filter(|b| {
                b.skills
                    .as_ref()
                    .is_none_or(|s| s.iter().any(|x| x == skill))
            })
            .map(|b| b.name.as_str())
            .collect();
        names.join(", ")
    };
    let body = html! {
        h1 { "Skills" }
        table #skills {
            thead { tr { th { "Skill" } th { "Version" } th { "Trust" } th { "Publisher" }
                th { "Available" } th { "Bots" } th { "Pinned in contexts" } } }
            tbody {
                @for s in &catalog.skills {
                    @let reason = gw.records.availability.of(s).reason().map(str::to_string);
                    @let locked = lock.as_ref().and_then(|l| l.get(&s.name));
                    tr data-skill=(s.name) {
                        td { (s.name) br; span.meta { (s.description) } }
                        td { (s.version.as_deref().unwrap_or("")) }
                        td { span.label { (verify::trust_label(lock.as_ref(), &s.name)) } }
                        td { (locked.and_then(|l| l.publisher.as_deref()).unwrap_or("")) }
                        td {
                            @match &reason {
                                None => span.label.success { "available" },
                                Some(r) => { span.label.failed { "unavailable" } br; span.meta { (r) } }
                            }
                        }
                        td.bots { (bots_of(&s.name)) }
                        td { (pins.get(&s.name).map(|c| c.join(", ")).unwrap_or_default()) }
                    }
                }
                @for d in gone.iter().filter(|d| catalog.get(&d.name).is_none()) {
                    tr data-skill=(d.name) {
                        td { (d.name) }
                        td {}
                        td { span.label { (verify::trust_label(lock.as_ref(), &d.name)) } }
                        td {}
                        td { span.label.failed { "disabled" } br; span.meta { (d.reason) } }
                        td {}
                        td { (pins.get(&d.name).map(|c| c.join(", ")).unwrap_or_default()) }
                    }
                }
            }
        }
    };
    page(req, "Skills", body)
}

/// `GET /console/calls[?skill=S&outcome=O]`.
pub async fn calls(gw: &Gateway, req: &ConsoleReq) -> Response<Full<Bytes>> {
    let skill = req.query_param("skill").filter(|s| !s.is_empty());
    let outcome_raw = req.query_param("outcome").filter(|s| !s.is_empty());
    let outcome = match outcome_raw.as_deref().map(parse_outcome) {
        None => None,
        Some(Ok(o)) => Some(o),
        Some(Err(e)) => return answer(StatusCode::BAD_REQUEST, message("Bad filter", e.message())),
    };
    let filter = CallFilter {
        skill: skill.clone(),
        outcome,
        caller: None,
    };
    let calls = match gw.records.store.recent_calls(&filter, DEFAULT_LIMIT * 2) {
        Ok(c) => c,
        Err(e) => return failed(e),
    };
    let catalog = gw.records.load.catalog();
    let outcomes = [
        "success",
        "invalid_args",
        "permission_denied",
        "approval_denied",
        "timeout",
        "tool_error",
        "sandbox",
        "unavailable",
        "not_found",
        "resource_limit",
        "protocol",
    ];
    let body = html! {
        h1 { "Calls" }
        form method="get" action="/console/calls" {
            label { "Skill " select name="skill" {
                option value="" { "any" }
                @for s in &catalog.skills {
                    option value=(s.name) selected[skill.as_deref() == Some(s.name.as_str())] { (s.name) }
                }
            } }
            " "
            label { "Outcome " select name="outcome" {
                option value="" { "any" }
                @for o in outcomes {
                    option value=(o) selected[outcome_raw.as_deref() == Some(o)] { (o) }
                }
            } }
            " " button type="submit" { "Filter" }
        }
        @if calls.is_empty() { p.empty { "No calls match." } }
        @else {
            table #calls {
                thead { tr { th { "Started" } th { "Call" } th { "Asked by" } th { "Skill" } th { "Tool" } th { "Outcome" } th { "Duration" } } }
                tbody {
                    @for c in &calls {
                        tr data-call=(c.call_id) {
                            td { (when(c.started_at)) }
                            td { code { (c.call_id) } }
                            td.caller { (c.caller) }
                            td { (c.skill) }
                            td { (c.tool) }
                            td {
                                @match c.error_kind {
                                    None => span.label.success { "success" },
                                    Some(k) => span.label.failed { (k.as_str()) },
                                }
                            }
                            td { (c.duration_ms) " ms" }
                        }
                    }
                }
            }
        }
    };
    page(req, "Calls", body)
}

/// `GET /console/routes`.
pub async fn routes(gw: &Gateway, req: &ConsoleReq) -> Response<Full<Bytes>> {
    let routes = match gw.records.store.recent_routes(None, DEFAULT_LIMIT) {
        Ok(r) => r,
        Err(e) => return failed(e),
    };
    let body = html! {
        h1 { "Routing decisions" }
        @if routes.is_empty() { p.empty { "No query was routed yet." } }
        @else {
            table #routes {
                thead { tr { th { "When" } th { "Route" } th { "Query" } th { "Primary" } th { "Candidates" } th { "Latency" } } }
                tbody {
                    @for r in &routes {
                        tr data-route=(r.route_id) {
                            td { (when(r.at)) }
                            td { a href={"/console/routes/" (r.route_id)} { code { (r.route_id) } } }
                            td { (r.query) }
                            td { (r.primary.as_deref().unwrap_or("none")) }
                            td { (r.plan["candidates"].as_array().map_or(0, Vec::len)) }
                            td { (r.plan["latency_us"].as_u64().unwrap_or(0)) " µs" }
                        }
                    }
                }
            }
        }
    };
    page(req, "Routes", body)
}

fn number(v: &Value) -> String {
    v.as_f64().map(|f| format!("{f:.3}")).unwrap_or_default()
}

/// `GET /console/routes/{id}`: candidates with the score breakdown, and the run's events.
pub async fn route(gw: &Gateway, req: &ConsoleReq, id: &str) -> Response<Full<Bytes>> {
    let store = &gw.records.store;
    let route = match store.get_route(id) {
        Ok(Some(r)) => r,
        Ok(None) => {
            return answer(
                StatusCode::NOT_FOUND,
                message(
                    "No such routing decision",
                    "It may be older than the [observe] routes_kept newest.",
                ),
            )
        }
        Err(e) => return failed(e),
    };
    let events = store.route_events(id).unwrap_or_default();
    let terms = [
        "intent_match",
        "trigger_match",
        "success_rate",
        "context_readiness",
        "cost_penalty",
        "conflict_penalty",
    ];
    let empty = Vec::new();
    let candidates = route.plan["candidates"].as_array().unwrap_or(&empty);
    let body = html! {
        h1 { "Route " code { (route.route_id) } }
        dl {
            dt { "Query" } dd { (route.query) }
            dt { "When" } dd { (when(route.at)) }
            dt { "Primary" } dd { (route.primary.as_deref().unwrap_or("none")) }
            dt { "Reason" } dd { (route.plan["routing_reason"].as_str().unwrap_or("")) }
            dt { "Threshold" } dd { (number(&route.plan["threshold"])) }
        }
        h2 { "Candidates" }
        table #candidates {
            thead { tr { th { "Skill" } th { "Status" } th { "Score" }
                @for t in terms { th { (t) } } } }
            tbody {
                @for c in candidates {
                    tr {
                        td { (c["skill"].as_str().unwrap_or("")) }
                        td { (c["status"].as_str().unwrap_or("")) }
                        td { (number(&c["score"])) }
                        @for t in terms { td { (number(&c["breakdown"][t])) } }
                    }
                }
            }
        }
        h2 { "Run" }
        @if events.is_empty() { p.empty { "Not executed (planned only)." } }
        @else {
            table #events {
                thead { tr { th { "#" } th { "From" } th { "To" } th { "Skill" } th { "Tool" } th { "Why" } } }
                tbody {
                    @for e in &events {
                        tr { td { (e.seq) } td { (e.from_state) } td { (e.to_state) }
                            td { (e.skill.as_deref().unwrap_or("")) } td { (e.tool.as_deref().unwrap_or("")) }
                            td { (e.reason) } }
                    }
                }
            }
        }
    };
    page(req, "Route", body)
}
