//! Observability (docs/observability.md): the Prometheus metrics of the core ([`metrics`],
//! served as OpenMetrics or Prometheus text, [`exposition`]),
//! the log format chosen in `[log]` ([`log`]), W3C trace context carried from a bot into
//! the executor ([`trace`]), and the `[observe]` limits on the history the core keeps.

pub mod exposition;
pub mod log;
pub mod metrics;
pub mod trace;

use serde::{Deserialize, Serialize};

pub use metrics::{Metrics, Scrape};
pub use trace::TraceParent;

/// `[observe]`: how much history the core keeps and lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ObserveSection {
    /// Routing decisions kept (every `POST /v1/route`); older ones are dropped.
    pub routes_kept: usize,
    /// Largest `limit` of `GET /v1/calls` and `GET /v1/routes`.
    pub max_list_limit: usize,
}

/// The default of `[observe] routes_kept`.
pub const DEFAULT_ROUTES_KEPT: usize = 1000;
/// The default of `[observe] max_list_limit`.
pub const DEFAULT_MAX_LIST_LIMIT: usize = 500;

impl Default for ObserveSection {
    fn default() -> Self {
        Self {
            routes_kept: DEFAULT_ROUTES_KEPT,
            max_list_limit: DEFAULT_MAX_LIST_LIMIT,
        }
    }
}
