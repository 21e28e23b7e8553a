//! The observability routes (docs/observability.md): `GET /metrics` (Prometheus text),
//! `GET /v1/calls` (recent calls), `GET /v1/calls/{id}` (one call, with its egress), `GET /v1/routes` and `GET /v1/routes/{route_id}` (every
//! routing decision, with the state machine's events when it was executed), and
//! `GET /v1/skills/{name}/repairs` (a skill's repair records).

use skillbox_protocol::result::ErrorKind;

use super::api::{CallList, RepairList, RouteDetail, RouteList};
use crate::approvals::ApprovalStatus;
use crate::gateway::web::error::ApiError;
use crate::gateway::web::list::{parse_outcome, DEFAULT_LIMIT};
use crate::gateway::web::request::{ok_of, ok_text, Reply, Req};
use crate::gateway::Gateway;
use crate::gateway::RecordParts;
use crate::observe::exposition::Format;
use crate::observe::Scrape;
use crate::state::store::{CallFilter, StoreError};

/// `GET /metrics`: OpenMetrics when the `Accept` header asks for it, else the Prometheus
/// text format 0.0.4.
pub async fn metrics(gw: &Gateway, req: Req) -> Reply {
    let accept = req
        .headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let d = gw.records.clone();
    let (content_type, text) =
        tokio::task::spawn_blocking(move || exposition(&d, accept.as_deref())).await?;
    Ok(ok_text(content_type, text))
}

/// The metrics text in the format `accept` asks for, with its content type.
pub fn exposition(d: &RecordParts, accept: Option<&str>) -> (&'static str, String) {
    let format = Format::negotiate(accept);
    (
        format.content_type(),
        d.metrics.encode_as(&scrape(d), format),
    )
}

/// What the gauges show now: pending approvals, executor health, disabled skills.
pub fn scrape(d: &RecordParts) -> Scrape {
    let approvals_pending = match d.approvals.list(Some(ApprovalStatus::Pending)) {
        Ok(list) => i64::try_from(list.len()).unwrap_or(i64::MAX),
        Err(e) => {
            tracing::warn!(error = %e, "metrics: cannot count pending approvals");
            0
        }
    };
    let executors = executor_names(
        d.executors
            .status()
            .into_iter()
            .map(|s| (s.url, s.address, s.healthy))
            .collect(),
    );
    let catalog = d.load.catalog();
    let disabled = crate::skills::install::disabled::list(&catalog).len();
    let tools = (catalog.skills.iter())
        .flat_map(|s| s.tools.iter().map(|t| (s.name.clone(), t.name.clone())))
        .collect();
    Scrape {
        approvals_pending,
        executors,
        disabled_skills: i64::try_from(disabled).unwrap_or(i64::MAX),
        tools,
    }
}

/// A stable name for each executor, from `(configured url, address, healthy)`: the URL's
/// host (`local` for a loopback address, whose port `skillbox up` picks anew at each start)
/// and the executor's place among those of that host, ordered by URL and address:
/// `local-0`, `executor-0`, `executor-1`. An address or a port never becomes a label, so a
/// restart adds no series.
pub fn executor_names(mut endpoints: Vec<(String, String, bool)>) -> Vec<(String, bool)> {
    endpoints.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    let mut seen: Vec<(String, usize)> = Vec::new();
    endpoints
        .into_iter()
        .map(|(url, _, healthy)| {
            let host = url_host(&url);
            let base = if is_loopback(host) { "local" } else { host };
            let n = match seen.iter_mut().find(|(b, _)| b == base) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    seen.push((base.to_string(), 0));
                    0
                }
            };
            (format!("{base}-{n}"), healthy)
        })
        .collect()
}

/// The host of `https://host:port/...` (an IPv6 literal without its brackets).
fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The `limit` query parameter: 1 to `[observe] max_list_limit`, default [`DEFAULT_LIMIT`].
fn limit(gw: &Gateway, req: &Req) -> Result<usize, ApiError> {
    let max = gw.records.load.config().observe.max_list_limit;
    let Some(raw) = req.query_param("limit") else {
        return Ok(DEFAULT_LIMIT.min(max));
    };
    match raw.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(ApiError::new(
            ErrorKind::InvalidArgs,
            format!(
                "limit must be a number from 1 to {max} ([observe] max_list_limit), not {raw:?}"
            ),
        )),
    }
}

fn store_error(e: StoreError) -> ApiError {
    ApiError::new(ErrorKind::Unavailable, e.to_string())
}

/// `GET /v1/calls?limit=K[&skill=S][&outcome=success|<error_kind>]`: newest first.
pub async fn calls(gw: &Gateway, req: Req) -> Reply {
    let limit = limit(gw, &req)?;
    let filter = CallFilter {
        // A bot reads its own calls only.
        caller: (!req.caller.is_operator()).then(|| req.caller.name().to_owned()),
        skill: req.query_param("skill").filter(|s| !s.is_empty()),
        outcome: match req.query_param("outcome").as_deref() {
            None | Some("") => None,
            Some(o) => Some(parse_outcome(o)?),
        },
    };
    let store = gw.records.store.clone();
    let calls = tokio::task::spawn_blocking(move || store.recent_calls(&filter, limit))
        .await?
        .map_err(store_error)?;
    Ok(ok_of(&CallList { calls }))
}

/// `GET /v1/calls/{id}`: one finished call, with `egress`: the connections its programs
/// made through the egress proxy. A bot reads its own calls only.
pub async fn call(gw: &Gateway, req: Req) -> Reply {
    let id = req.param("id")?.to_string();
    let store = gw.records.store.clone();
    let found = tokio::task::spawn_blocking(move || store.get_call(&id))
        .await?
        .map_err(store_error)?;
    match found.filter(|c| req.caller.sees(&c.caller)) {
        Some(call) => Ok(ok_of(&call)),
        None => Err(ApiError::new(
            ErrorKind::NotFound,
            format!(
                "no finished call {}; a call is recorded when it ends. List them with GET /v1/calls",
                req.param("id")?
            ),
        )),
    }
}

/// `GET /v1/routes?limit=K`: newest first.
pub async fn routes(gw: &Gateway, req: Req) -> Reply {
    let limit = limit(gw, &req)?;
    let store = gw.records.store.clone();
    let caller = (!req.caller.is_operator()).then(|| req.caller.name().to_owned());
    let routes = tokio::task::spawn_blocking(move || store.recent_routes(caller.as_deref(), limit))
        .await?
        .map_err(store_error)?;
    Ok(ok_of(&RouteList { routes }))
}

/// `GET /v1/routes/{route_id}`: the decision with candidates and breakdown, and the
/// events of its run when it was executed.
pub async fn route(gw: &Gateway, req: Req) -> Reply {
    let id = req.param("route_id")?.to_string();
    let store = gw.records.store.clone();
    let found = tokio::task::spawn_blocking(move || {
        let route = store.get_route(&id)?;
        let events = store.route_events(&id)?;
        Ok::<_, StoreError>(route.map(|r| (r, events)))
    })
    .await?
    .map_err(store_error)?;
    let found = found.filter(|(r, _)| req.caller.sees(&r.caller));
    let Some((route, events)) = found else {
        let id = req.param("route_id")?;
        return Err(ApiError::new(
            ErrorKind::NotFound,
            format!("no routing decision {id}; it may be older than the [observe] routes_kept newest. List them with GET /v1/routes"),
        ));
    };
    Ok(ok_of(&RouteDetail {
        route,
        executed: !events.is_empty(),
        events,
    }))
}

/// `GET /v1/skills/{name}/repairs`: the skill's repair records, oldest first.
pub async fn repairs(gw: &Gateway, req: Req) -> Reply {
    let name = req.param("name")?.to_string();
    let store = gw.records.store.clone();
    let records = tokio::task::spawn_blocking(move || store.repairs_of(&name))
        .await?
        .map_err(store_error)?;
    Ok(ok_of(&RepairList { repairs: records }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn metrics_answer_prometheus_text_unless_openmetrics_is_asked_for() {
        let ws = tempfile::tempdir().unwrap();
        let d = crate::gateway::test_parts(crate::calls::test_dispatcher(
            ws.path(),
            Default::default(),
        ))
        .views()
        .records;
        for accept in [None, Some("text/plain;version=0.0.4"), Some("*/*")] {
            let (content_type, text) = exposition(&d, accept);
            assert_eq!(
                content_type, "text/plain; version=0.0.4; charset=utf-8",
                "{accept:?}"
            );
            assert!(!text.contains("# EOF"), "{text}");
            assert!(
                text.contains("# TYPE skillbox_routes_total counter"),
                "{text}"
            );
        }
        let prometheus =
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
        let (content_type, text) = exposition(&d, Some(prometheus));
        assert!(
            content_type.starts_with("application/openmetrics-text"),
            "{content_type}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    fn names(endpoints: &[(&str, &str, bool)]) -> Vec<(String, bool)> {
        executor_names(
            endpoints
                .iter()
                .map(|(u, a, h)| (u.to_string(), a.to_string(), *h))
                .collect(),
        )
    }

    #[test]
    fn executors_are_named_without_their_ephemeral_port_or_address() {
        // `skillbox up`: a loopback executor on a port picked at each start.
        for port in ["41234", "39001"] {
            let url = format!("https://127.0.0.1:{port}");
            let addr = format!("127.0.0.1:{port}");
            assert_eq!(
                names(&[(&url, &addr, true)]),
                [("local-0".to_string(), true)]
            );
        }
        // Compose: one service name scaled to two containers, ordered by address.
        assert_eq!(
            names(&[
                ("https://executor:7071", "172.18.0.5:7071", false),
                ("https://executor:7071", "172.18.0.4:7071", true),
            ]),
            [
                ("executor-0".to_string(), true),
                ("executor-1".to_string(), false)
            ]
        );
        assert_eq!(
            names(&[("https://[::1]:7071", "[::1]:7071", true)]),
            [("local-0".to_string(), true)]
        );
    }
}
