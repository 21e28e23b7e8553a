//! Graceful drain of `serve`: on SIGTERM (an orchestrator scaling down or rolling an
//! update) the executor stops taking new `tool.execute` requests, refusing them with
//! [`code::EXECUTOR_DRAINING`] before anything of the call runs (so the core sends the call
//! to another executor), answers `health` with status `draining` (so the core stops
//! routing here), finishes the calls it already holds, and only then exits.
//!
//! The executor stays up, refusing, until it is idle and either the core has seen the
//! `draining` health answer or the linger has passed: a core that picked this executor
//! just before the signal then gets a refusal it can retry, not a closed connection.
//! The grace period bounds the whole drain; calls still running at its end are abandoned
//! (the orchestrator's own kill follows shortly anyway).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use skillbox_protocol::jsonrpc::{code, ErrorObject};

/// Default longest drain (`serve --drain-grace-ms`): below the 30 s `stop_grace_period` of
/// deploy/swarm/stack.yaml, so the executor exits on its own before the engine kills it.
pub const DEFAULT_DRAIN_GRACE: Duration = Duration::from_secs(25);
/// Default time an idle draining executor keeps refusing calls when the core has not yet
/// asked `health` (`serve --drain-linger-ms`): above the core's default health interval
/// (2 s), so the core learns of the drain from a health answer or a refusal.
pub const DEFAULT_DRAIN_LINGER: Duration = Duration::from_secs(3);
/// How often the drain looks at the calls in flight.
const POLL: Duration = Duration::from_millis(50);

/// Whether the executor is draining, and the calls it holds.
#[derive(Debug, Default)]
pub struct Drain {
    draining: AtomicBool,
    /// Calls admitted (queued or running) and not yet answered.
    held: AtomicUsize,
    /// A `health` answer said `draining` since the drain began.
    seen: AtomicBool,
}

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainOutcome {
    /// Calls still held when the drain ended (0 unless the grace period ran out).
    pub abandoned: usize,
    /// How long the drain took.
    pub took: Duration,
}

/// A call admitted while the executor was not draining; the drain waits for it until it
/// is dropped.
#[derive(Debug)]
pub struct Held<'a>(&'a Drain);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drain {
    /// Admits a call, or refuses it when the executor is draining. The count goes up
    /// before the flag is read, so a drain that begins at the same moment either sees this
    /// call held or this call sees the drain: no call slips past the drain's wait.
    pub fn admit(&self, call_id: &str) -> Result<Held<'_>, ErrorObject> {
        self.held.fetch_add(1, Ordering::SeqCst);
        let held = Held(self);
        if self.draining.load(Ordering::SeqCst) {
            drop(held);
            return Err(refusal(call_id));
        }
        Ok(held)
    }

    /// Whether a drain has begun.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Notes that a `health` answer is about to tell the core; returns whether draining.
    pub fn report(&self) -> bool {
        let draining = self.is_draining();
        if draining {
            self.seen.store(true, Ordering::SeqCst);
        }
        draining
    }

    /// Calls held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// Begins the drain and waits until no call is held and the core knows (or `linger`
    /// passed), at most `grace`.
    pub async fn run(&self, grace: Duration, linger: Duration) -> DrainOutcome {
        self.draining.store(true, Ordering::SeqCst);
        let started = Instant::now();
        let linger = linger.min(grace);
        loop {
            let took = started.elapsed();
            let idle = self.held() == 0;
            let known = self.seen.load(Ordering::SeqCst) || took >= linger;
            if (idle && known) || took >= grace {
                return DrainOutcome {
                    abandoned: self.held(),
                    took,
                };
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// The refusal of a call that arrives during the drain.
pub fn refusal(call_id: &str) -> ErrorObject {
    ErrorObject::new(
        code::EXECUTOR_DRAINING,
        format!(
            "the executor is draining (it is stopping) and ran nothing of call {call_id}; \
             send the call to another executor"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admit_refuses_calls_once_draining_with_the_draining_code() {
        let drain = Drain::default();
        let held = drain.admit("c1").unwrap();
        assert_eq!(drain.held(), 1);
        drain.draining.store(true, Ordering::SeqCst);
        let refused = drain.admit("c2").unwrap_err();
        assert_eq!(refused.code, code::EXECUTOR_DRAINING);
        assert!(refused.message.contains("ran nothing of call c2"));
        assert!(refused.message.contains("another executor"));
        // The refused call is not counted as held.
        assert_eq!(drain.held(), 1);
        drop(held);
        assert_eq!(drain.held(), 0);
    }

    #[tokio::test]
    async fn drain_waits_for_held_calls_then_ends() {
        let drain = std::sync::Arc::new(Drain::default());
        let d = std::sync::Arc::clone(&drain);
        let call = tokio::spawn(async move {
            let _held = d.admit("slow").unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let outcome = drain
            .run(Duration::from_secs(10), Duration::from_millis(0))
            .await;
        call.await.unwrap();
        assert_eq!(outcome.abandoned, 0);
        assert!(outcome.took >= Duration::from_millis(200), "{outcome:?}");
    }

    #[tokio::test]
    async fn drain_gives_up_on_calls_held_past_the_grace_period() {
        let drain = Drain::default();
        let _held = drain.admit("stuck").unwrap();
        let outcome = drain
            .run(Duration::from_millis(200), Duration::from_millis(0))
            .await;
        assert_eq!(outcome.abandoned, 1);
    }

    #[tokio::test]
    async fn idle_drain_lingers_until_the_core_has_seen_it() {
        let drain = std::sync::Arc::new(Drain::default());
        let d = std::sync::Arc::clone(&drain);
        let health = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            assert!(d.report());
        });
        let outcome = drain
            .run(Duration::from_secs(10), Duration::from_secs(10))
            .await;
        health.await.unwrap();
        assert_eq!(outcome.abandoned, 0);
        // Ended by the health answer, long before the 10 s linger.
        assert!(outcome.took >= Duration::from_millis(100), "{outcome:?}");
        assert!(outcome.took < Duration::from_secs(5), "{outcome:?}");
    }
}
