//! Building a skill's Python dependencies (docs/sandbox.md, "Dependencies"): on install,
//! on `skillbox skill deps NAME` (`POST /v1/skills/{name}/deps`) and on load when missing;
//! never during a call.
//!
//! Every executor builds the environment for itself (they share no disk): the first one
//! resolves the requirements against `[deps] index_url`, and the lock it returns (each
//! package pinned with its SHA-256) is what every other executor installs, without
//! resolving again. The build runs in an executor's tool sandbox; its only network is the
//! index, through the egress proxy, under a call identity registered here for it.

use std::sync::Arc;
use std::time::Duration;

use skillbox_protocol::methods::{DepsBuildParams, LockedPackage, SecretValue};
use skillbox_protocol::skill::{Security, Skill};

use super::inflight::ActiveCall;
use super::{CallError, Dispatcher};
use crate::auth::CallOrigin;
use crate::random;
use crate::state::deps::DepsRecord;
use crate::state::store::unix_ms_now;

/// Half-seconds a build on load waits for an executor to answer.
const STARTUP_WAIT_ROUNDS: u32 = 120;

/// Slack on top of `[deps] build_timeout_ms` for the executor's answer.
const ANSWER_SLACK: Duration = Duration::from_secs(10);

impl Dispatcher {
    /// Builds skill `name`'s dependencies on every executor that answers, and records the
    /// outcome. With `rebuild`, the last record (a failure, a lock) is not reused: the
    /// requirements are resolved again.
    pub async fn build_deps(&self, name: &str, rebuild: bool) -> Result<DepsRecord, CallError> {
        let loaded = self.load.current();
        let skill = loaded
            .skill(name)
            .ok_or_else(|| CallError::NoSuchSkill(name.to_string()))?;
        let Some(digest) = skill.dependencies.digest.clone() else {
            return Err(CallError::Builtin {
                kind: skillbox_protocol::result::ErrorKind::InvalidArgs,
                message: format!(
                    "skill {name:?} declares no Python dependencies (requirements.txt, \
                     pyproject.toml, PEP 723, [grants.{name}] requirements)"
                ),
            });
        };
        let records = self
            .availability
            .deps()
            .cloned()
            .ok_or_else(|| CallError::Unavailable {
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
        let outcome = self.build_on_executors(&skill, &digest, rebuild).await;
        records.finish(name);
        let record = outcome?;
        if let Err(e) = records.put(record.clone()) {
            tracing::warn!(skill = %name, error = %e, "dependency record not written");
        }
        Ok(record)
    }

    /// Builds every missing environment of the current load in the background, one skill
    /// at a time (`[deps] build_on_load`).
    pub fn build_missing_deps(self: &Arc<Self>) {
        let loaded = self.load.current();
        if !loaded.config.deps.build_on_load {
            return;
        }
        let Some(records) = self.availability.deps().cloned() else {
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
        let me = Arc::clone(self);
        tokio::spawn(async move {
            // At start the executors may not answer yet.
            for _ in 0..STARTUP_WAIT_ROUNDS {
                if !me.transports.process.placements().is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            for name in missing {
                match me.build_deps(&name, false).await {
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
    /// skill deps". Runs until the pipeline is dropped.
    pub fn rebuild_deps_on_arrival(self: &Arc<Self>) {
        let mut arrivals = self.transports.pool.arrivals();
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            while arrivals.changed().await.is_ok() {
                let Some(me) = me.upgrade() else { break };
                me.rebuild_built_deps().await;
            }
        });
    }

    /// [`Self::rebuild_deps_on_arrival`]'s round: each skill whose environment is built for
    /// its current requirements, built again on every executor.
    async fn rebuild_built_deps(&self) {
        let loaded = self.load.current();
        let Some(records) = self.availability.deps().cloned() else {
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
            match self.build_deps(&name, false).await {
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

    async fn build_on_executors(
        &self,
        skill: &Arc<Skill>,
        digest: &str,
        rebuild: bool,
    ) -> Result<DepsRecord, CallError> {
        let loaded = self.load.current();
        let config = &loaded.config.deps;
        let records = self.availability.deps().cloned();
        let previous = records.and_then(|r| r.get(&skill.name));
        // A lock of these same requirements: every executor installs exactly it.
        let mut lock: Option<Vec<LockedPackage>> = match previous {
            Some(r) if r.ok && r.digest == digest && !rebuild => Some(r.packages),
            _ => None,
        };
        let addrs = self.transports.process.placements();
        if addrs.is_empty() {
            return Err(CallError::Unavailable {
                skill: skill.name.clone(),
                reason: "no executor answers to build its dependencies; retry once one is up"
                    .into(),
            });
        }
        // The build's identity at the egress proxy: a skill that reaches the index only.
        let mut builder = (**skill).clone();
        builder.permissions = Default::default();
        builder.permissions.network = config.build_network();
        let builder = Arc::new(builder);
        let mut built_on = Vec::new();
        let mut tail = String::new();
        let mut egress_refused = Vec::new();
        for addr in addrs {
            let call_id = format!("deps_{}", random::hex(self.rng.as_ref(), 12, "build id")?);
            let token = SecretValue(random::token(self.rng.as_ref(), "capability token")?);
            let active = Arc::new(ActiveCall::new(
                Arc::clone(&builder),
                "deps.build",
                Security::Read,
                CallOrigin::operator(),
                token.clone(),
            ));
            let _registered = self.in_flight.register(&call_id, Arc::clone(&active));
            let (requirements, no_deps) = match &lock {
                Some(packages) => (packages.iter().map(LockedPackage::pin).collect(), true),
                None => (skill.dependencies.specs(), false),
            };
            let params = DepsBuildParams {
                call_id,
                capability_token: token,
                skill: skill.name.clone(),
                digest: digest.to_string(),
                requirements: requirements.clone(),
                constraints: skill.dependencies.constraints.clone(),
                index_url: config.index_url.clone(),
                allow_source: skill.dependencies.allow_source,
                no_deps,
                trust_pem: self
                    .egress_trust
                    .as_ref()
                    .and_then(|t| t.sandbox_pem(false)),
                timeout_ms: config.build_timeout_ms,
                memory_mb: config.memory_mb,
            };
            let timeout = Duration::from_millis(config.build_timeout_ms) + ANSWER_SLACK;
            let answer = (self.transports.process)
                .deps_build(addr, params, timeout)
                .await;
            egress_refused.extend(refusals(&active));
            match answer {
                Ok(result) => {
                    tail = result.log_tail;
                    lock.get_or_insert(result.packages);
                    built_on.push(addr.to_string());
                }
                Err(e) => {
                    tracing::warn!(skill = %skill.name, executor = %addr, error = %e, "dependency build failed");
                    let mut log_tail = e.to_string();
                    for refused in &egress_refused {
                        log_tail.push_str(&format!("\negress refused: {refused}"));
                    }
                    return Ok(DepsRecord {
                        skill: skill.name.clone(),
                        digest: digest.to_string(),
                        ok: false,
                        requirements,
                        packages: Vec::new(),
                        log_tail,
                        executors: vec![addr.to_string()],
                        finished_ms: unix_ms_now(),
                        egress_refused,
                    });
                }
            }
        }
        Ok(DepsRecord {
            skill: skill.name.clone(),
            digest: digest.to_string(),
            ok: true,
            requirements: skill.dependencies.specs(),
            packages: lock.unwrap_or_default(),
            log_tail: tail,
            executors: built_on,
            finished_ms: unix_ms_now(),
            egress_refused,
        })
    }
}

/// The connections of a build's identity that the egress proxy refused, as
/// `host:port: reason`.
fn refusals(build: &ActiveCall) -> Vec<String> {
    (build.egress.snapshot().connections.into_iter())
        .filter(|c| c.verdict == crate::state::store::EgressVerdict::Refused)
        .map(|c| {
            let reason = c.reason.unwrap_or_default();
            format!("{}:{}: {reason}", c.host, c.port)
        })
        .collect()
}
