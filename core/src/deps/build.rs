//! One build of a skill's dependencies on every executor that answers: the first one
//! resolves (unless a lock of the same requirements exists), the others install its lock;
//! the first failure ends the build with its record.

use std::sync::Arc;
use std::time::Duration;

use skillbox_protocol::methods::{
    DepsBuildParams, Ecosystem, LockedPackage, NodeBuild, SecretValue,
};
use skillbox_protocol::skill::{Security, Skill};

use super::DepsBuilder;
use crate::auth::CallOrigin;
use crate::calls::{ActiveCall, CallError};
use crate::random;
use crate::state::deps::{BuildProgress, DepsRecord};
use crate::state::store::unix_ms_now;

/// Slack on top of `[deps] build_timeout_ms` for the executor's answer.
const ANSWER_SLACK: Duration = Duration::from_secs(10);

/// What one executor's build came to.
enum Step {
    /// Built: the installer's last lines and the lock.
    Built {
        log_tail: String,
        packages: Vec<LockedPackage>,
    },
    /// Failed: why.
    Failed(String),
}

impl DepsBuilder {
    /// Builds `skill`'s dependencies (of requirements `digest`) on every executor that
    /// answers, reusing the last lock of the same requirements unless `rebuild`.
    pub(super) async fn build_on_executors(
        &self,
        skill: &Arc<Skill>,
        digest: &str,
        rebuild: bool,
    ) -> Result<DepsRecord, CallError> {
        let loaded = self.load.current();
        let config = &loaded.config.deps;
        let previous = self.records.as_ref().and_then(|r| r.get(&skill.name));
        // A lock of these same requirements: every executor installs exactly it.
        let mut lock: Option<Vec<LockedPackage>> = match previous {
            Some(r) if r.ok && r.digest == digest && !rebuild => Some(r.packages),
            _ => None,
        };
        let addrs = self.transport.placements();
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
        builder.permissions.network = config.build_network(skill.dependencies.node.is_some());
        let builder = Arc::new(builder);
        let mut built_on = Vec::new();
        let mut tail = String::new();
        let mut egress_refused = Vec::new();
        let mut from_cache = Vec::new();
        for addr in addrs {
            let (requirements, no_deps) = match &lock {
                // npm installs its part from the skill's own lock, or resolves again.
                Some(packages) => (python_pins(packages), true),
                None => (skill.dependencies.specs(), false),
            };
            let step = self
                .build_at(
                    addr.clone(),
                    skill,
                    &builder,
                    digest,
                    requirements.clone(),
                    no_deps,
                )
                .await?;
            egress_refused.extend(step.1.refused);
            from_cache.extend(step.1.from_cache);
            match step.0 {
                Step::Built { log_tail, packages } => {
                    tail = log_tail;
                    lock.get_or_insert(packages);
                    built_on.push(addr.to_string());
                }
                Step::Failed(mut log_tail) => {
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
                        not_taken: skill.dependencies.problems.clone(),
                        from_cache,
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
            not_taken: skill.dependencies.problems.clone(),
            from_cache,
        })
    }

    /// Builds `skill`'s `requirements` on the executor `addr` under a fresh identity of
    /// `builder` (registered in the calls in flight while it runs): what it came to, and
    /// what the egress proxy saw of it.
    async fn build_at(
        &self,
        addr: crate::calls::transport::Placement,
        skill: &Skill,
        builder: &Arc<Skill>,
        digest: &str,
        requirements: Vec<String>,
        no_deps: bool,
    ) -> Result<(Step, Seen), CallError> {
        let loaded = self.load.current();
        let config = &loaded.config.deps;
        let call_id = format!("deps_{}", random::hex(self.rng.as_ref(), 12, "build id")?);
        let token = SecretValue(random::token(self.rng.as_ref(), "capability token")?);
        let active = Arc::new(ActiveCall::new(
            Arc::clone(builder),
            crate::proxy::egress::DEPS_BUILD_TOOL,
            Security::Read,
            CallOrigin::operator(),
            token.clone(),
        ));
        let _registered = self.in_flight.register(&call_id, Arc::clone(&active));
        let params = DepsBuildParams {
            call_id,
            capability_token: token,
            skill: skill.name.clone(),
            digest: digest.to_string(),
            requirements,
            constraints: skill.dependencies.constraints.clone(),
            index_url: config.index_url.clone(),
            allow_source: skill.dependencies.allow_source,
            no_deps,
            node: skill.dependencies.node.as_ref().map(|n| NodeBuild {
                manifest: n.manifest.clone(),
                lock: n.lock.clone(),
                registry: n.registry.clone(),
                allow_scripts: n.allow_scripts,
            }),
            // The egress CA too: with the download cache on, the proxy reads the build's
            // connections to answer package files from the cache.
            trust_pem: self.egress_trust.as_ref().and_then(|t| t.sandbox_pem(true)),
            timeout_ms: config.build_timeout_ms,
            memory_mb: config.memory_mb,
        };
        let timeout = Duration::from_millis(config.build_timeout_ms) + ANSWER_SLACK;
        let reporter = self.report_progress(&skill.name, &active);
        let answer = self
            .transport
            .deps_build(addr.clone(), params, timeout)
            .await;
        if let Some(reporter) = reporter {
            reporter.abort();
        }
        let seen = Seen {
            refused: refusals(&active),
            from_cache: active.egress.from_cache(),
        };
        let step = match answer {
            Ok(result) => Step::Built {
                log_tail: result.log_tail,
                packages: result.packages,
            },
            Err(e) => {
                tracing::warn!(skill = %skill.name, executor = %addr, error = %e, "dependency build failed");
                Step::Failed(e.to_string())
            }
        };
        Ok((step, seen))
    }
}

impl DepsBuilder {
    /// Notes in the records, every half second while the build runs, what its egress
    /// proxy has seen of it (`GET /v1/skills/{name}`'s `dependencies.progress`, which
    /// `skill deps` and `skill add --wait` draw).
    fn report_progress(
        &self,
        name: &str,
        active: &Arc<ActiveCall>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let records = self.records.clone()?;
        let (name, active) = (name.to_string(), Arc::clone(active));
        let started = std::time::Instant::now();
        Some(tokio::spawn(async move {
            loop {
                let egress = &active.egress;
                let ended = egress.snapshot();
                let asked = egress.asked_so_far();
                records.set_progress(
                    &name,
                    BuildProgress {
                        bytes: egress.bytes_so_far(),
                        connections: ended.connections.len() as u64 + ended.unlisted,
                        from_cache: egress.from_cache_count() as u64,
                        pages: asked.pages,
                        files: asked.files,
                        elapsed_s: started.elapsed().as_secs(),
                    },
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }))
    }
}

/// What the egress proxy saw of one executor's build.
struct Seen {
    /// The connections it refused, as `host:port: reason`.
    refused: Vec<String>,
    /// The URLs the download cache answered.
    from_cache: Vec<String>,
}

/// The Python packages of a lock, each pinned with its hash (pip `--no-deps`).
fn python_pins(packages: &[LockedPackage]) -> Vec<String> {
    (packages.iter())
        .filter(|p| p.ecosystem == Ecosystem::Python)
        .map(LockedPackage::pin)
        .collect()
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
