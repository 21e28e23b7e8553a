//! Building a skill's Python and Node dependencies (docs/sandbox.md, "Dependencies"): on install,
//! on `skillbox skill deps NAME` (`POST /v1/skills/{name}/deps`), on load when missing,
//! and again from the lock when an executor joins; never during a call.
//!
//! Every executor builds the environment for itself (they share no disk): the first one
//! resolves the requirements against `[deps] index_url`, and the lock it returns (each
//! package pinned with its SHA-256) is what every other executor installs, without
//! resolving again (`build.rs`). The build runs in an executor's tool sandbox, sent
//! through the [`ExecutorTransport`] like every piece of executor work; its only network
//! is the index, through the egress proxy, under a call identity registered in the calls
//! in flight for it.
//!
//! [`DepsBuilder`] holds only what a build uses: the current load, the build records, the
//! transport and the executors' arrivals, the calls in flight, a random source for the
//! build's identity and the egress CA its sandbox trusts.

mod build;

use std::sync::Arc;
use std::time::Duration;

use crate::calls::{CallError, ExecutorTransport, InFlight, LoadCell};
use crate::executors::ExecutorPool;
use crate::proxy::egress::EgressTrust;
use crate::random::{RandomSource, SystemSource};
use crate::state::deps::{DepsRecord, DepsRecords};

/// Half-seconds a build on load waits for an executor to answer.
const STARTUP_WAIT_ROUNDS: u32 = 120;
/// Pause before a build on load that failed is tried once more.
const LOAD_RETRY_PAUSE: Duration = Duration::from_secs(5);
/// Most times one build goes again for executors that joined while it ran.
const CATCH_UP_ROUNDS: usize = 3;

/// Whether an executor of `now` (by address) is not among those `record` was built on.
fn joined_since(record: &DepsRecord, now: &[String]) -> bool {
    now.iter().any(|addr| !record.executors.contains(addr))
}

/// Builds skills' dependencies on every executor and records the outcome (see the
/// module docs).
#[derive(Debug)]
pub struct DepsBuilder {
    load: Arc<LoadCell>,
    records: Option<Arc<DepsRecords>>,
    transport: Arc<dyn ExecutorTransport>,
    pool: Arc<ExecutorPool>,
    in_flight: Arc<InFlight>,
    rng: Arc<dyn RandomSource>,
    egress_trust: Option<Arc<EgressTrust>>,
}

impl DepsBuilder {
    /// A builder over the skills of `load` that keeps its outcomes in `records` (`None`:
    /// this core keeps no builds), sends builds to the executors of `pool` and registers
    /// each build's identity in `in_flight`.
    pub fn new(
        load: Arc<LoadCell>,
        records: Option<Arc<DepsRecords>>,
        pool: Arc<ExecutorPool>,
        in_flight: Arc<InFlight>,
    ) -> Self {
        Self {
            load,
            records,
            transport: Arc::clone(&pool) as Arc<dyn ExecutorTransport>,
            pool,
            in_flight,
            rng: Arc::new(SystemSource::default()),
            egress_trust: None,
        }
    }

    /// Builds send the certificates of `trust` to trust (the index reached through the
    /// egress proxy, `[egress] extra_roots`).
    pub fn with_egress_trust(mut self, trust: Arc<EgressTrust>) -> Self {
        self.egress_trust = Some(trust);
        self
    }

    /// Builds skill `name`'s dependencies on every executor that answers, and records the
    /// outcome. With `rebuild`, the last record (a failure, a lock) is not reused: the
    /// requirements are resolved again.
    pub async fn build(&self, name: &str, rebuild: bool) -> Result<DepsRecord, CallError> {
        let loaded = self.load.current();
        let skill = loaded
            .skill(name)
            .ok_or_else(|| CallError::NoSuchSkill(name.to_string()))?;
        let Some(digest) = skill.dependencies.digest.clone() else {
            return Err(CallError::Builtin {
                kind: skillbox_protocol::result::ErrorKind::InvalidArgs,
                message: format!(
                    "skill {name:?} declares no dependencies (requirements.txt, \
                     pyproject.toml, PEP 723, [grants.{name}] requirements, package.json \
                     dependencies)"
                ),
            });
        };
        let records = self.records.clone().ok_or_else(|| CallError::Unavailable {
            skill: name.to_string(),
            reason: "this core keeps no dependency builds".into(),
        })?;
        if !records.start(name) {
            return Err(CallError::Builtin {
                kind: skillbox_protocol::result::ErrorKind::ResourceLimit,
                message: format!(
                    "the dependencies of {name:?} are being built; wait for that build"
                ),
            });
        }
        let mut outcome = self.build_on_executors(&skill, &digest, rebuild).await;
        // An executor that joined while the build ran was not in it, and its arrival found
        // the skill being built: build again from the lock, which the others answer at once.
        for _ in 0..CATCH_UP_ROUNDS {
            let Ok(record) = &outcome else { break };
            let now: Vec<String> = (self.transport.placements().iter())
                .map(ToString::to_string)
                .collect();
            if !record.ok || !joined_since(record, &now) {
                break;
            }
            if let Err(e) = records.put(record.clone()) {
                tracing::warn!(skill = %name, error = %e, "dependency record not written");
            }
            tracing::info!(skill = %name, "an executor joined during the build: installing the lock there too");
            outcome = self.build_on_executors(&skill, &digest, false).await;
        }
        records.finish(name);
        let record = outcome?;
        if let Err(e) = records.put(record.clone()) {
            tracing::warn!(skill = %name, error = %e, "dependency record not written");
        }
        Ok(record)
    }

    /// Builds every missing environment of the current load in the background, one skill
    /// at a time (`[deps] build_on_load`).
    pub fn build_missing(self: &Arc<Self>) {
        let loaded = self.load.current();
        if !loaded.config.deps.build_on_load {
            return;
        }
        let Some(records) = self.records.clone() else {
            return;
        };
        let missing: Vec<String> = (loaded.catalog.skills.iter())
            .filter(|s| s.dependencies.digest.is_some())
            .filter(|s| match records.get(&s.name) {
                // Built, or failed for these same requirements: not tried again on load.
                Some(r) => Some(&r.digest) != s.dependencies.digest.as_ref(),
                None => true,
            })
            .map(|s| s.name.clone())
            .collect();
        if missing.is_empty() {
            return;
        }
        for name in &missing {
            records.queue(name);
        }
        let me = Arc::clone(self);
        tokio::spawn(async move {
            // At start the executors may not answer yet.
            for _ in 0..STARTUP_WAIT_ROUNDS {
                if !me.transport.placements().is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            for name in missing {
                let mut built = me.build(&name, false).await;
                if matches!(&built, Ok(r) if !r.ok) {
                    // A deployment that is still starting (the executor's way to the core's
                    // egress proxy not up yet) fails a first build that would succeed a
                    // moment later: one more try before the failure stands.
                    tokio::time::sleep(LOAD_RETRY_PAUSE).await;
                    built = me.build(&name, true).await;
                }
                records.unqueue(&name);
                match built {
                    Ok(r) => tracing::info!(skill = %name, ok = r.ok, "dependencies built on load"),
                    Err(e) => {
                        tracing::warn!(skill = %name, error = %e, "dependencies not built on load")
                    }
                }
            }
        });
    }

    /// Whenever an executor starts taking calls that did not before (a new one, or one
    /// back from down: `ExecutorPool::arrivals`), builds every environment the records hold
    /// as built again, from its lock: an executor that has it answers at once (`reused`),
    /// one that lacks it (a new replica, a scratch that did not survive) installs exactly
    /// the locked packages. Meanwhile the skill is "being built", never "not built: run
    /// skill deps". Runs until the builder is dropped.
    pub fn rebuild_on_arrival(self: &Arc<Self>) {
        let mut arrivals = self.pool.arrivals();
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            while arrivals.changed().await.is_ok() {
                let Some(me) = me.upgrade() else { break };
                me.rebuild_built().await;
            }
        });
    }

    /// [`Self::rebuild_on_arrival`]'s round: each skill whose environment is built for
    /// its current requirements, built again on every executor.
    async fn rebuild_built(&self) {
        let loaded = self.load.current();
        let Some(records) = self.records.clone() else {
            return;
        };
        let built: Vec<String> = (loaded.catalog.skills.iter())
            .filter(|s| {
                let digest = s.dependencies.digest.as_ref();
                records
                    .get(&s.name)
                    .is_some_and(|r| r.ok && Some(&r.digest) == digest)
            })
            .map(|s| s.name.clone())
            .collect();
        for name in built {
            match self.build(&name, false).await {
                Ok(r) if r.ok => {
                    tracing::info!(skill = %name, executors = ?r.executors, "dependencies in place on every executor")
                }
                Ok(r) => {
                    tracing::warn!(skill = %name, log = %r.log_tail, "dependencies failed to build on an executor that joined")
                }
                Err(e) => {
                    tracing::info!(skill = %name, error = %e, "dependencies not checked on an executor that joined")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_executor_not_in_the_build_has_joined_since() {
        let record = DepsRecord {
            skill: "thumbnail".into(),
            digest: "d".into(),
            ok: true,
            requirements: Vec::new(),
            packages: Vec::new(),
            log_tail: String::new(),
            executors: vec!["10.0.0.1:7071".into()],
            finished_ms: 1,
            egress_refused: Vec::new(),
            not_taken: Vec::new(),
            from_cache: Vec::new(),
        };
        assert!(!joined_since(&record, &["10.0.0.1:7071".into()]));
        assert!(!joined_since(&record, &[]), "one that left is no reason");
        assert!(joined_since(
            &record,
            &["10.0.0.1:7071".into(), "10.0.0.2:7071".into()]
        ));
    }
}
