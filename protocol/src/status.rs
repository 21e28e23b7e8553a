//! What the executor tells the core about itself: `tool.list` (the tools it can run),
//! `skill.reload` (its registry reloaded) and `health` (liveness, the sandbox in force and
//! what that sandbox can start).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::skill::Security;

/// One tool as `tool.list` and `GET /v1/tools` describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolInfo {
    /// `skill:tool`.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
    /// Security level.
    pub security: Security,
}

/// `tool.list` params (none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolListParams {}

/// `tool.list` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolListResult {
    /// Every runnable tool.
    pub tools: Vec<ToolInfo>,
}

/// `skill.reload` params (none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillReloadParams {}

/// `skill.reload` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillReloadResult {
    /// Skills loaded.
    pub loaded: usize,
    /// Skills skipped, with reasons.
    pub skipped: Vec<String>,
}

/// `health` params (none).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthParams {}

/// The `health` status of an executor that was told to stop: it refuses new
/// `tool.execute` requests with [`crate::jsonrpc::code::EXECUTOR_DRAINING`] and finishes the
/// calls it holds.
pub const HEALTH_DRAINING: &str = "draining";

/// `health` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthResult {
    /// `ok`, `degraded` (no kernel sandbox) or [`HEALTH_DRAINING`] (stopping: finishes the
    /// calls it holds, takes no new ones).
    pub status: String,
    /// Landlock ABI in force, 0 when none.
    pub landlock_abi: u32,
    /// Whether seccomp filters are applied.
    pub seccomp: bool,
    /// Calls in flight.
    pub in_flight: usize,
    /// What this executor's sandbox can start (absent from executors that predate it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxFacts>,
}

/// What a tool started by an executor would find: the OS and, for every program its skills
/// name (prerequisites and tool commands), whether the program is on the sandbox `PATH`.
/// Skill availability is judged from this, where the tools run, not from the core's host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxFacts {
    /// The OS in the prerequisites' words (`linux`, `darwin`, `win32`).
    pub os: String,
    /// The `PATH` tools run with.
    pub path: String,
    /// Program name → found as an executable file on `path`.
    pub programs: std::collections::BTreeMap<String, bool>,
    /// Whether the executor can give a call a network namespace of its own, which the
    /// programs of a skill that declares (or is granted) `permissions.network` reach the
    /// network through; without it they would get no network at all, so the core holds
    /// such skills unavailable, saying why. Absent (false) from executors that predate it.
    #[serde(default)]
    pub network_namespaces: bool,
    /// Whether the executor can give a call a `/tmp` of its own (a mount namespace), which
    /// a skill with UNIX sockets needs (`execution.unix_sockets`). Absent (false) from
    /// executors that predate it.
    #[serde(default)]
    pub unix_sockets: bool,
    /// How the executor limits a call's memory: `cgroup_v2` or `cgroup_v1` (a memory
    /// cgroup per call: what its processes use), or `rlimit` (per process, with room for
    /// the address space runtimes reserve). Empty from executors that predate it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub memory_limit: String,
    /// Whether the executor watches the context folders it keeps between calls with
    /// inotify: a call in a context whose files did not change then walks nothing after
    /// it ends. Without it every such call walks its folder (as correct, slower). Absent
    /// (false) from executors that predate it.
    #[serde(default)]
    pub watched_folders: bool,
    /// Skill name → what its scripts use that is missing where they run
    /// (`crate::skill::script_uses`): only skills with something missing. A diagnostic
    /// for `skillbox doctor` and `skill info`, never a reason to hold a skill unavailable.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub scripts: std::collections::BTreeMap<String, ScriptFacts>,
}

impl SandboxFacts {
    /// Adds another executor's facts: a call may go to any of them, so a program or a
    /// kind of namespace counts only when every one has it, and what a skill's scripts
    /// miss on any of them is missing.
    pub fn merge(&mut self, other: &SandboxFacts) {
        self.network_namespaces &= other.network_namespaces;
        self.unix_sockets &= other.unix_sockets;
        self.watched_folders &= other.watched_folders;
        for (program, present) in &other.programs {
            let entry = self.programs.entry(program.clone()).or_insert(*present);
            *entry &= *present;
        }
        for (skill, missing) in &other.scripts {
            let entry = self.scripts.entry(skill.clone()).or_default();
            for (into, from) in [
                (&mut entry.missing_programs, &missing.missing_programs),
                (&mut entry.unprovided_imports, &missing.unprovided_imports),
            ] {
                into.extend(from.iter().cloned());
                into.sort();
                into.dedup();
            }
        }
    }
}

/// What one skill's scripts use that the sandbox lacks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptFacts {
    /// Programs its scripts or its `SKILL.md` commands start that are not on the sandbox
    /// `PATH`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_programs: Vec<String>,
    /// Python modules its scripts import that neither the sandbox's Python nor the
    /// skill's built environment provides (a requirement it never declared).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unprovided_imports: Vec<String>,
}

impl ScriptFacts {
    /// Whether nothing is missing.
    pub fn is_empty(&self) -> bool {
        self.missing_programs.is_empty() && self.unprovided_imports.is_empty()
    }

    /// One sentence per kind, for `doctor` and `skill info`.
    pub fn sentences(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.missing_programs.is_empty() {
            out.push(format!(
                "its scripts run {}, not on the sandbox PATH",
                self.missing_programs.join(", ")
            ));
        }
        if !self.unprovided_imports.is_empty() {
            out.push(format!(
                "its scripts import {}, which neither the sandbox's Python nor its requirements provide",
                self.unprovided_imports.join(", ")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kind of namespace and the watched folders count only when every executor has
    /// them; a program only when every one finds it.
    #[test]
    fn merged_facts_hold_only_what_every_executor_has() {
        let watching = SandboxFacts {
            network_namespaces: true,
            unix_sockets: true,
            watched_folders: true,
            programs: [("python3".to_string(), true)].into(),
            ..SandboxFacts::default()
        };
        let mut both = watching.clone();
        both.merge(&watching);
        assert!(both.watched_folders && both.network_namespaces && both.unix_sockets);
        let walking = SandboxFacts {
            watched_folders: false,
            programs: [("python3".to_string(), false)].into(),
            ..watching.clone()
        };
        both.merge(&walking);
        assert!(!both.watched_folders, "one executor walks its folders");
        assert!(both.network_namespaces);
        assert!(!both.programs["python3"]);
    }
}
