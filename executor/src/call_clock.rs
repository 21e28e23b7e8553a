//! When a call passed its stages in the executor, for the [`ExecutorStages`] it reports
//! to the core (`skillbox_call_stage_seconds`, docs/observability.md).

use std::time::Instant;

use skillbox_protocol::result::ExecutorStages;

/// When a call passed its stages (the rest of [`ExecutorStages`] is measured around it).
#[derive(Debug, Default)]
pub(crate) struct CallClock {
    /// The tool's process started (or a prestarted one taken).
    pub(crate) spawned: Option<Instant>,
    /// Its answer read and the process exited, or the call given up.
    pub(crate) answered: Option<Instant>,
}

impl CallClock {
    /// The stages of a call that arrived at the handler at `arrived`, started at
    /// `started` and ended now.
    pub(crate) fn stages(&self, arrived: Instant, started: Instant) -> ExecutorStages {
        let ended = Instant::now();
        let us = |from: Instant, to: Instant| {
            u64::try_from(to.saturating_duration_since(from).as_micros()).unwrap_or(u64::MAX)
        };
        let spawned = self.spawned.unwrap_or(ended);
        let answered = self.answered.unwrap_or(ended).max(spawned);
        ExecutorStages {
            queue_us: us(arrived, started),
            start_us: us(started, spawned),
            tool_us: us(spawned, answered),
            end_us: us(answered, ended),
        }
    }
}
