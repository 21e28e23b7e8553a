//! Whether a skill can run now, judged where its tools run: the programs and OS that the
//! executors' sandboxes report with `health` ([`SandboxFacts`]), and the env values the core
//! holds. [`SandboxReadiness`] answers the [`Readiness`] questions from them, and
//! [`super::readiness::context_readiness`] turns the answers into the one verdict that
//! routing, `/v1/skills`, the catalogue, `route/execute` and `tools/call` all use.

use std::sync::Arc;

use skillbox_protocol::methods::SandboxFacts;

use skillbox_protocol::skill::Skill;

use super::readiness::{context_readiness, host_os, Availability, Readiness};
use super::ExecutorPool;
use crate::state::deps::DepsRecords;
use crate::state::secrets::Secrets;

/// The executors' sandbox facts and the core's secrets, as the router's readiness.
#[derive(Debug)]
pub struct SandboxReadiness<'a> {
    facts: Option<Arc<SandboxFacts>>,
    secrets: &'a Secrets,
    deps: Option<&'a DepsRecords>,
}

impl<'a> SandboxReadiness<'a> {
    /// Readiness from `facts` (`None` before any executor reported) and the core's secrets.
    pub fn new(facts: Option<Arc<SandboxFacts>>, secrets: &'a Secrets) -> Self {
        Self {
            facts,
            secrets,
            deps: None,
        }
    }
}

/// Whether a skill can run now, asked of the executors' sandbox facts and the core's
/// secrets: the one verdict, shared by the call pipeline, the router and the gateway.
#[derive(Debug, Clone)]
pub struct SkillAvailability {
    pool: Arc<ExecutorPool>,
    secrets: Secrets,
    deps: Option<Arc<DepsRecords>>,
}

impl SkillAvailability {
    /// The availability `pool`'s executors and `secrets` give.
    pub fn new(pool: Arc<ExecutorPool>, secrets: Secrets) -> Self {
        Self {
            pool,
            secrets,
            deps: None,
        }
    }

    /// Judges skills' dependencies by `deps`, the outcome of their builds.
    pub fn with_deps(mut self, deps: Arc<DepsRecords>) -> Self {
        self.deps = Some(deps);
        self
    }

    /// The outcome of the dependency builds, when the core keeps them.
    pub fn deps(&self) -> Option<&Arc<DepsRecords>> {
        self.deps.as_ref()
    }

    /// What the executors' sandboxes can start and the env values the core holds.
    pub fn readiness(&self) -> SandboxReadiness<'_> {
        let mut r = SandboxReadiness::new(self.pool.sandbox_facts(), &self.secrets);
        r.deps = self.deps.as_deref();
        r
    }

    /// What `skill`'s scripts use that the executors' sandboxes lack, as sentences (a
    /// diagnostic: never a reason to hold it unavailable).
    pub fn script_warnings(&self, skill: &str) -> Vec<String> {
        (self.pool.sandbox_facts())
            .and_then(|f| f.scripts.get(skill).map(|s| s.sentences()))
            .unwrap_or_default()
    }

    /// Whether `skill` can be used now ([`context_readiness`], the one verdict).
    pub fn of(&self, skill: &Skill) -> Availability {
        context_readiness(skill, &self.readiness()).1
    }

    /// The core's secrets (a reload reads `secrets.env` into them again).
    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }
}

impl Readiness for SandboxReadiness<'_> {
    /// A program the executors reported absent is missing. One they did not report (no
    /// executor answered yet, or it has not loaded the skill yet) is not held against the
    /// skill: the call itself then says what is wrong.
    fn has_bin(&self, bin: &str) -> bool {
        match &self.facts {
            Some(facts) => facts.programs.get(bin).copied().unwrap_or(true),
            None => true,
        }
    }

    fn has_env(&self, name: &str) -> bool {
        self.secrets.has(name)
    }

    fn deps_problem(&self, skill: &Skill) -> Option<String> {
        self.deps.and_then(|d| d.problem(skill))
    }

    fn os(&self) -> &str {
        match &self.facts {
            Some(facts) => &facts.os,
            None => host_os(),
        }
    }

    /// As the executors reported (an executor that predates the fact reports none, so
    /// false: it cannot run a network call behind the egress proxy). Assumed before any
    /// report, as programs are.
    fn network_namespaces(&self) -> bool {
        self.facts.as_ref().is_none_or(|f| f.network_namespaces)
    }
    fn unix_sockets(&self) -> bool {
        self.facts.as_ref().is_none_or(|f| f.unix_sockets)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn facts(programs: &[(&str, bool)]) -> SandboxFacts {
        SandboxFacts {
            os: "linux".into(),
            path: "/usr/local/bin:/usr/bin:/bin".into(),
            programs: programs
                .iter()
                .map(|(p, present)| (p.to_string(), *present))
                .collect::<BTreeMap<_, _>>(),
            ..SandboxFacts::default()
        }
    }

    #[test]
    fn programs_are_judged_by_the_executors_report_not_the_core_path() {
        let secrets = Secrets::default();
        // `sh` is on the core's PATH, but the executors said their sandbox lacks it.
        let ready = SandboxReadiness::new(
            Some(Arc::new(facts(&[("sh", false), ("python3", true)]))),
            &secrets,
        );
        assert!(!ready.has_bin("sh"));
        assert!(ready.has_bin("python3"));
        assert!(ready.has_bin("not-reported"));
        assert_eq!(ready.os(), "linux");
    }

    #[test]
    fn a_network_skill_is_unavailable_where_executors_cannot_make_namespaces() {
        let secrets = Secrets::default();
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("netty");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("skill.yaml"),
            "name: netty\ndescription: d\npermissions:\n  network: [\"api.test\"]\n\
             tools:\n  - name: go\n    description: d\n    command: [\"true\"]\n",
        )
        .unwrap();
        let opts = skillbox_protocol::skill::DiscoveryOptions::default();
        let mut found = skillbox_protocol::skill::discover(&[root.path().to_path_buf()], opts);
        let skill = found.skills.remove(0);
        let without = facts(&[("true", true)]);
        let mut with = without.clone();
        with.network_namespaces = true;
        let verdict = |f: SandboxFacts| {
            let ready = SandboxReadiness::new(Some(Arc::new(f)), &secrets);
            context_readiness(&skill, &ready).1
        };
        assert!(verdict(with).is_ready());
        // Without namespaces its programs would get no network at all: never silently
        // offline, the skill is unavailable and says what the executor lacks.
        let reason = verdict(without).reason().unwrap().to_string();
        assert!(reason.contains("permissions.network"), "{reason}");
        assert!(
            reason.contains("CAP_SYS_ADMIN and CAP_NET_ADMIN"),
            "{reason}"
        );
    }

    #[test]
    fn a_loopback_skill_is_unavailable_where_executors_cannot_make_namespaces() {
        let secrets = Secrets::default();
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("webapp");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("skill.yaml"),
            "name: webapp\ndescription: d\nexecution: { loopback: true }\n\
             tools:\n  - name: go\n    description: d\n    command: [\"true\"]\n",
        )
        .unwrap();
        let opts = skillbox_protocol::skill::DiscoveryOptions::default();
        let mut found = skillbox_protocol::skill::discover(&[root.path().to_path_buf()], opts);
        let skill = found.skills.remove(0);
        let without = facts(&[("true", true)]);
        let mut with = without.clone();
        with.network_namespaces = true;
        let verdict = |f: SandboxFacts| {
            let ready = SandboxReadiness::new(Some(Arc::new(f)), &secrets);
            context_readiness(&skill, &ready).1
        };
        assert!(verdict(with).is_ready());
        match verdict(without) {
            Availability::Unavailable(why) => {
                assert!(why.contains("execution.loopback"), "{why}");
                assert!(why.contains("CAP_SYS_ADMIN"), "{why}");
            }
            ready => panic!("{ready:?}"),
        }
    }

    #[test]
    fn without_a_report_programs_are_not_held_against_a_skill() {
        let secrets = Secrets::default();
        let ready = SandboxReadiness::new(None, &secrets);
        assert!(ready.has_bin("anything"));
        assert!(!ready.has_env("NOT_HELD"));
    }
}
