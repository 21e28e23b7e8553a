//! Whether a skill can run now, judged where its tools run: the programs and OS that the
//! executors' sandboxes report with `health` ([`SandboxFacts`]), and the env values the core
//! holds. [`SandboxReadiness`] answers the [`Readiness`] questions from them, and
//! [`super::readiness::context_readiness`] turns the answers into the one verdict that
//! routing, `/v1/skills`, the catalogue, `route/execute` and `tools/call` all use.

use std::sync::Arc;

use skillbox_protocol::methods::SandboxFacts;

use super::readiness::{host_os, Readiness};
use crate::state::secrets::Secrets;

/// The executors' sandbox facts and the core's secrets, as the router's readiness.
#[derive(Debug)]
pub struct SandboxReadiness<'a> {
    facts: Option<Arc<SandboxFacts>>,
    secrets: &'a Secrets,
}

impl<'a> SandboxReadiness<'a> {
    /// Readiness from `facts` (`None` before any executor reported) and the core's secrets.
    pub fn new(facts: Option<Arc<SandboxFacts>>, secrets: &'a Secrets) -> Self {
        Self { facts, secrets }
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

    fn os(&self) -> &str {
        match &self.facts {
            Some(facts) => &facts.os,
            None => host_os(),
        }
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
    fn without_a_report_programs_are_not_held_against_a_skill() {
        let secrets = Secrets::default();
        let ready = SandboxReadiness::new(None, &secrets);
        assert!(ready.has_bin("anything"));
        assert!(!ready.has_env("NOT_HELD"));
    }
}
