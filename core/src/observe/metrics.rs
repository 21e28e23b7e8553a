//! The core's Prometheus metrics (`GET /metrics`, docs/observability.md), kept in one
//! [`prometheus_client`] registry and written in the OpenMetrics text format or, for a
//! client that does not ask for OpenMetrics, the Prometheus text format 0.0.4
//! ([`super::exposition`]).
//!
//! Every outcome label the core can give is set to 0 from the start (and each tool of the
//! catalogue with every call outcome, at each scrape), so a rate or an alert on an outcome
//! that has not happened yet reads 0 rather than nothing.
//!
//! Counters and histograms move where the event happens (the call pipeline's record step,
//! the approvals, the router, the fetch proxy). Gauges of state the core already holds
//! elsewhere (pending approvals in the store, executor health in the pool, disabled skills
//! in the catalogue) are set from a [`Scrape`] at each scrape, so they cannot drift.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use skillbox_protocol::result::{ErrorKind, ToolResult};

use super::exposition::{prometheus_text, Format};

/// The content type of the OpenMetrics answer of `GET /metrics`.
pub const CONTENT_TYPE: &str = super::exposition::OPENMETRICS_CONTENT_TYPE;

/// The `outcome` of a tool call: `success` or one of these error kinds.
pub const CALL_ERROR_KINDS: [ErrorKind; 10] = [
    ErrorKind::InvalidArgs,
    ErrorKind::NotFound,
    ErrorKind::PermissionDenied,
    ErrorKind::ApprovalDenied,
    ErrorKind::Timeout,
    ErrorKind::ResourceLimit,
    ErrorKind::Sandbox,
    ErrorKind::ToolError,
    ErrorKind::Protocol,
    ErrorKind::Unavailable,
];

/// The `outcome` of a routing decision.
pub const ROUTE_OUTCOMES: [&str; 3] = ["selected", "no_skill", "error"];

/// The `outcome` of a fetch-proxy request: `ok` or its refusal.
pub const FETCH_OUTCOMES: [&str; 8] = [
    "ok",
    "permission_denied",
    "invalid_params",
    "too_large",
    "timeout",
    "upstream",
    "too_many_redirects",
    "unavailable",
];

/// The `outcome` of an approval's decision.
pub const DECISION_OUTCOMES: [&str; 3] = ["approved", "denied", "expired"];

/// A tool call's labels: its skill, tool, outcome (`success` or the error kind) and the
/// bot that asked (`operator` for the operator; bounded by the number of bot tokens).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
    /// `success`, or the call's `error_kind`.
    pub outcome: String,
    /// The bot's name, or `operator`.
    pub bot: String,
}

/// A tool's labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabels {
    /// The skill.
    pub skill: String,
    /// The tool.
    pub tool: String,
}

/// One outcome label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// What happened.
    pub outcome: String,
}

/// One stage of a tool call's way through skillbox (docs/observability.md).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StageLabels {
    /// The stage: one of [`CALL_STAGES`].
    pub stage: &'static str,
}

/// The stages of a call, in order: the gateway's own work (request body, response), the
/// pipeline's (admission, token, record; an approval's wait excluded), the channel round
/// trip less the executor's own time (TLS, HTTP, both sides' wake-ups), and the
/// executor's stages (queue, start: arguments checked and sandbox prepared and process
/// started, the tool at work, end: processes killed and reaped).
pub const CALL_STAGES: [&str; 7] = [
    "gateway",
    "pipeline",
    "channel",
    "executor_queue",
    "executor_start",
    "tool",
    "executor_end",
];

/// One executor's label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExecutorLabels {
    /// The executor's stable name (docs/observability.md), not its address.
    pub executor: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Buckets of a call's duration: 5 ms to about 655 s (18 buckets), past the approval
/// timeout (120 s by default) a `write` call may wait plus the executor's call timeout.
pub const CALL_BUCKETS: (f64, u16) = (0.005, 18);

fn call_seconds() -> Histogram {
    Histogram::new(exponential_buckets(CALL_BUCKETS.0, 2.0, CALL_BUCKETS.1))
}

fn stage_seconds() -> Histogram {
    // 10 us .. ~10 s.
    Histogram::new(exponential_buckets(0.000_01, 2.0, 21))
}

fn decision_seconds() -> Histogram {
    // 1 s .. ~68 min.
    Histogram::new(exponential_buckets(1.0, 2.0, 13))
}

/// What the gauges read at a scrape.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    /// Approvals waiting for a decision.
    pub approvals_pending: i64,
    /// Each executor's stable name and whether its last health round answered.
    pub executors: Vec<(String, bool)>,
    /// Skills the trust policy disabled at the last load.
    pub disabled_skills: i64,
    /// Each tool of the catalogue, as `(skill, tool)`: its call outcomes are set to 0.
    pub tools: Vec<(String, String)>,
}

/// Every metric of the core; share it behind an `Arc`.
#[derive(Debug)]
pub struct Metrics {
    /// The registry; behind a lock only because encoding needs it while gauges are set.
    registry: Mutex<Registry>,
    calls: Family<CallLabels, Counter>,
    call_duration: HistogramFamily<ToolLabels>,
    spawn: Histogram,
    stages: HistogramFamily<StageLabels>,
    /// The histograms of [`CALL_STAGES`], in that order, made once: a call observes seven
    /// stages, and looking each up in the family takes its lock and hashes its label.
    stage_histograms: Vec<Histogram>,
    approvals_pending: Gauge,
    approval_decision: HistogramFamily<OutcomeLabels>,
    route_latency: Histogram,
    routes: Family<OutcomeLabels, Counter>,
    fetch: Family<OutcomeLabels, Counter>,
    executor_healthy: Family<ExecutorLabels, Gauge>,
    disabled_skills: Gauge,
}

/// Makes the series of every outcome of `family`, so that a scrape shows each one from the
/// start (at zero) instead of only after it first happens.
fn zero_outcomes<M, C>(family: &Family<OutcomeLabels, M, C>, outcomes: &[&str])
where
    C: prometheus_client::metrics::family::MetricConstructor<M>,
{
    for outcome in outcomes {
        drop(family.get_or_create(&OutcomeLabels {
            outcome: (*outcome).into(),
        }));
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("skillbox");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "tool_calls",
            "Tool calls by skill, tool and outcome (success or the error kind)",
            calls.clone(),
        );
        let call_duration: HistogramFamily<ToolLabels> =
            Family::new_with_constructor(call_seconds as fn() -> Histogram);
        registry.register(
            "tool_call_duration_seconds",
            "Tool call duration, approval wait included, by skill and tool",
            call_duration.clone(),
        );
        // 0.5 ms .. ~8 s.
        let spawn = Histogram::new(exponential_buckets(0.0005, 2.0, 15));
        registry.register(
            "executor_spawn_seconds",
            "Time the executor took to prepare the sandbox and start a tool process",
            spawn.clone(),
        );
        let stages: HistogramFamily<StageLabels> =
            Family::new_with_constructor(stage_seconds as fn() -> Histogram);
        registry.register(
            "call_stage_seconds",
            "Time a tool call spent in each stage of its way through skillbox (gateway, pipeline, channel, executor_queue, executor_start, tool, executor_end)",
            stages.clone(),
        );
        let approvals_pending = Gauge::default();
        registry.register(
            "approvals_pending",
            "Approvals waiting for an operator's decision",
            approvals_pending.clone(),
        );
        let approval_decision: HistogramFamily<OutcomeLabels> =
            Family::new_with_constructor(decision_seconds as fn() -> Histogram);
        registry.register(
            "approval_decision_seconds",
            "Time from an approval's request to its decision (approved, denied, expired)",
            approval_decision.clone(),
        );
        // 20 us .. ~330 ms.
        let route_latency = Histogram::new(exponential_buckets(0.00002, 2.0, 15));
        registry.register(
            "route_latency_seconds",
            "Time one routing decision took",
            route_latency.clone(),
        );
        let routes = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "routes",
            "Routing decisions by outcome (selected, no_skill, error)",
            routes.clone(),
        );
        let fetch = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "fetch_requests",
            "Fetch-proxy requests by outcome (ok or the refusal)",
            fetch.clone(),
        );
        let executor_healthy = Family::<ExecutorLabels, Gauge>::default();
        registry.register(
            "executor_healthy",
            "1 when the executor answered its last health round, else 0",
            executor_healthy.clone(),
        );
        let disabled_skills = Gauge::default();
        registry.register(
            "disabled_skills",
            "Skills the trust policy disabled at the last load",
            disabled_skills.clone(),
        );
        zero_outcomes(&routes, &ROUTE_OUTCOMES);
        zero_outcomes(&fetch, &FETCH_OUTCOMES);
        zero_outcomes(&approval_decision, &DECISION_OUTCOMES);
        Self {
            registry: Mutex::new(registry),
            calls,
            call_duration,
            spawn,
            stage_histograms: CALL_STAGES
                .iter()
                .map(|&stage| stages.get_or_create(&StageLabels { stage }).clone())
                .collect(),
            stages,
            approvals_pending,
            approval_decision,
            route_latency,
            routes,
            fetch,
            executor_healthy,
            disabled_skills,
        }
    }

    /// Counts one finished tool call and its duration.
    pub fn observe_call(
        &self,
        skill: &str,
        tool: &str,
        bot: &str,
        result: &ToolResult,
        took: Duration,
    ) {
        let outcome = match (result.success, result.error_kind) {
            (true, _) => "success".to_string(),
            (false, Some(kind)) => kind.as_str().to_string(),
            (false, None) => "failed".to_string(),
        };
        self.calls
            .get_or_create(&CallLabels {
                skill: skill.to_string(),
                tool: tool.to_string(),
                outcome,
                bot: bot.to_string(),
            })
            .inc();
        self.call_duration
            .get_or_create(&ToolLabels {
                skill: skill.to_string(),
                tool: tool.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// Records the executor's time to start a tool process.
    pub fn observe_spawn(&self, took: Duration) {
        self.spawn.observe(took.as_secs_f64());
    }

    /// Records the time one call spent in `stage` (one of [`CALL_STAGES`]).
    pub fn observe_stage(&self, stage: &'static str, took: Duration) {
        match CALL_STAGES.iter().position(|s| *s == stage) {
            Some(i) => self.stage_histograms[i].observe(took.as_secs_f64()),
            None => self
                .stages
                .get_or_create(&StageLabels { stage })
                .observe(took.as_secs_f64()),
        }
    }

    /// Records an approval decided `after` its request; `outcome` is `approved`,
    /// `denied` or `expired`.
    pub fn observe_decision(&self, outcome: &str, after: Duration) {
        self.approval_decision
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_string(),
            })
            .observe(after.as_secs_f64());
    }

    /// Records one routing decision: its latency and outcome (`selected`, `no_skill`,
    /// `error`).
    pub fn observe_route(&self, outcome: &str, took: Duration) {
        self.route_latency.observe(took.as_secs_f64());
        self.count(&self.routes, outcome);
    }

    /// Counts one fetch-proxy request by outcome (`ok`, or the refusal).
    pub fn observe_fetch(&self, outcome: &str) {
        self.count(&self.fetch, outcome);
    }

    fn count(&self, family: &Family<OutcomeLabels, Counter>, outcome: &str) {
        family
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// Sets every call outcome of `skill:tool` (and its duration histogram) to 0, if not
    /// there yet. The only place call series are made without a call: a label added to
    /// [`CallLabels`] gets its preset value here. Series are preset for the operator; a
    /// bot's appear with its first call.
    fn preset_tool(&self, skill: &str, tool: &str) {
        let outcomes = std::iter::once("success").chain(CALL_ERROR_KINDS.map(ErrorKind::as_str));
        for outcome in outcomes {
            drop(self.calls.get_or_create(&CallLabels {
                skill: skill.to_string(),
                tool: tool.to_string(),
                outcome: outcome.to_string(),
                bot: crate::state::store::OPERATOR.to_string(),
            }));
        }
        drop(self.call_duration.get_or_create(&ToolLabels {
            skill: skill.to_string(),
            tool: tool.to_string(),
        }));
    }

    /// The OpenMetrics text of every metric, the gauges set from `scrape` first.
    pub fn encode(&self, scrape: &Scrape) -> String {
        self.encode_as(scrape, Format::OpenMetrics)
    }

    /// The text of every metric in `format`, the gauges set from `scrape` first.
    pub fn encode_as(&self, scrape: &Scrape, format: Format) -> String {
        for (skill, tool) in &scrape.tools {
            self.preset_tool(skill, tool);
        }
        self.approvals_pending.set(scrape.approvals_pending);
        self.disabled_skills.set(scrape.disabled_skills);
        self.executor_healthy.clear();
        for (executor, healthy) in &scrape.executors {
            self.executor_healthy
                .get_or_create(&ExecutorLabels {
                    executor: executor.clone(),
                })
                .set(i64::from(*healthy));
        }
        let registry = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &registry);
        match format {
            Format::OpenMetrics => out,
            Format::Prometheus => prometheus_text(&out),
        }
    }
}

/// The outcome labels set to 0, the call buckets, the Prometheus text format.
#[cfg(test)]
mod scrape_tests;

#[cfg(test)]
mod tests {
    use skillbox_protocol::result::ErrorKind;

    use super::*;

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn calls_are_counted_by_skill_tool_and_outcome() {
        let m = Metrics::new();
        let ok = ToolResult::ok("c1", serde_json::json!({}), 3);
        let denied = ToolResult::failed("c2", ErrorKind::ApprovalDenied, "no", 1);
        m.observe_call("notes", "add", "operator", &ok, Duration::from_millis(3));
        m.observe_call("notes", "add", "tg", &ok, Duration::from_millis(4));
        m.observe_call(
            "notes",
            "add",
            "operator",
            &denied,
            Duration::from_millis(1),
        );
        let text = m.encode(&Scrape::default());
        let ok_of = |bot: &str| {
            format!("skillbox_tool_calls_total{{skill=\"notes\",tool=\"add\",outcome=\"success\",bot=\"{bot}\"}}")
        };
        assert_eq!(
            line(&text, &ok_of("operator")),
            Some(format!("{} 1", ok_of("operator")).as_str())
        );
        assert_eq!(
            line(&text, &ok_of("tg")),
            Some(format!("{} 1", ok_of("tg")).as_str())
        );
        assert!(
            text.contains("skillbox_tool_calls_total{skill=\"notes\",tool=\"add\",outcome=\"approval_denied\",bot=\"operator\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "skillbox_tool_call_duration_seconds_count{skill=\"notes\",tool=\"add\"} 3"
            ),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn gauges_follow_each_scrape_and_forget_gone_executors() {
        let m = Metrics::new();
        let text = m.encode(&Scrape {
            approvals_pending: 2,
            executors: vec![
                ("10.0.0.1:7071".into(), true),
                ("10.0.0.2:7071".into(), false),
            ],
            disabled_skills: 1,
            tools: Vec::new(),
        });
        assert!(text.contains("skillbox_approvals_pending 2\n"), "{text}");
        assert!(text.contains("skillbox_disabled_skills 1\n"), "{text}");
        assert!(text.contains("skillbox_executor_healthy{executor=\"10.0.0.1:7071\"} 1\n"));
        assert!(text.contains("skillbox_executor_healthy{executor=\"10.0.0.2:7071\"} 0\n"));
        let text = m.encode(&Scrape {
            executors: vec![("10.0.0.1:7071".into(), true)],
            ..Scrape::default()
        });
        assert!(text.contains("skillbox_approvals_pending 0\n"), "{text}");
        assert!(!text.contains("10.0.0.2"), "{text}");
    }

    #[test]
    fn routes_fetches_spawns_and_decisions_are_recorded() {
        let m = Metrics::new();
        m.observe_route("selected", Duration::from_micros(80));
        m.observe_route("no_skill", Duration::from_micros(40));
        m.observe_fetch("ok");
        m.observe_fetch("permission_denied");
        m.observe_fetch("permission_denied");
        m.observe_spawn(Duration::from_millis(2));
        m.observe_decision("approved", Duration::from_secs(5));
        let text = m.encode(&Scrape::default());
        for want in [
            "skillbox_routes_total{outcome=\"selected\"} 1",
            "skillbox_route_latency_seconds_count 2",
            "skillbox_fetch_requests_total{outcome=\"permission_denied\"} 2",
            "skillbox_executor_spawn_seconds_count 1",
            "skillbox_approval_decision_seconds_count{outcome=\"approved\"} 1",
        ] {
            assert!(text.contains(want), "{want} missing from\n{text}");
        }
    }
}
