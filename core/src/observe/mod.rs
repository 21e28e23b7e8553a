//! Observability (docs/observability.md): the Prometheus metrics of the core ([`metrics`],
//! served as OpenMetrics or Prometheus text, [`exposition`]),
//! the log format chosen in `[log]` ([`log`]), W3C trace context carried from a bot into
//! the executor ([`trace`]), and the `[observe]` limits on the history the core keeps.

pub mod exposition;
pub mod log;
pub mod metrics;
pub mod trace;

pub use crate::state::config::observe::{
    ObserveSection, DEFAULT_MAX_LIST_LIMIT, DEFAULT_ROUTES_KEPT,
};
pub use metrics::{Metrics, Scrape};
pub use trace::TraceParent;
