//! The REST API's request and response bodies (docs/http-api.md), in one place: what a bot
//! sends and gets back on each route, as types. Handlers read requests with
//! [`crate::gateway::web::request::Req::json`] (unknown fields refused) and answer these types; errors
//! have one shape of their own ([`crate::gateway::web::error::ApiError`]).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use skillbox_protocol::methods::HealthResult;
use skillbox_protocol::skill::{Permissions, Security};

use crate::executors::docker::supervisor::SupervisorStatus;
use crate::executors::pool::EndpointStatus;
use crate::skills::install::remove::Removed;
use crate::skills::install::Installed;
use crate::state::store::Decision;
use crate::state::store::RepairRecord;

pub use super::route_execute::ExecuteParams as ExecuteRequest;
pub use super::route_plan::RouteParams as RouteRequest;
pub use crate::repair::RepairProposal;

/// `POST /v1/tools/call`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallRequest {
    /// `skill:tool`, or a built-in disclosure tool.
    pub tool: String,
    /// The tool's arguments (absent or `null` means `{}`).
    #[serde(default)]
    pub args: Value,
    /// The caller's context: the call is refused unless the tool is active in it.
    pub context_id: Option<String>,
}

/// `POST /v1/skills/install`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallRequest {
    /// A skill folder or `.tar.gz` on the core's machine (relative to the workspace), or
    /// a git source: `owner/repo[/folder]`, a git URL, a local repository.
    pub source: String,
    /// The skills to install from a git source holding several (folder names or paths).
    #[serde(default)]
    pub skills: Vec<String>,
    /// Every skill of a git source.
    #[serde(default)]
    pub all: bool,
    /// A branch, tag or commit of a git source.
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
    /// Let the package replace an installed signed skill of another publisher.
    #[serde(default)]
    pub allow_publisher_change: bool,
}

/// `POST /v1/approvals/{id}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    /// `"approve"` or `"deny"`.
    pub decision: Decision,
    /// Why, shown to the caller of a denied call.
    pub reason: Option<String>,
}

/// `GET /healthz`.
#[derive(Debug, Serialize)]
pub struct Health {
    /// Always `"ok"`: the core answers.
    pub status: &'static str,
    /// `"ok"` when an executor answered the last health round, else `"down"`.
    pub executor: &'static str,
    /// What that executor's sandbox can start.
    pub sandbox: Option<HealthResult>,
    /// What the programs of network skills get from the healthy executors (all of them:
    /// a call may go to any): `namespaces: ...` or `none: ...`, the reason in words;
    /// absent until an executor reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<&'static str>,
    /// Every executor endpoint and its last answer.
    pub executors: Vec<EndpointStatus>,
    /// The executor containers' supervisor, when the core has a Docker engine.
    pub supervisor: Option<SupervisorStatus>,
    /// Whether `execution.sandbox: container` skills can run.
    pub container_sandbox: bool,
}

/// One tool of `GET /v1/tools`.
#[derive(Debug, Serialize)]
pub struct ToolEntry {
    /// `skill:tool`.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its arguments' JSON Schema.
    pub parameters: Value,
    /// `read`, `write` or `sign`.
    pub security: Security,
}

/// `GET /v1/tools`: the skills' tools, then the built-in disclosure tools.
#[derive(Debug, Serialize)]
pub struct ToolList {
    /// Every tool.
    pub tools: Vec<Value>,
}

/// One skill of `GET /v1/skills`: offered, or disabled by the trust policy.
#[derive(Debug, Serialize)]
pub struct SkillSummary {
    /// Its name.
    pub name: String,
    /// Its version, when it has one.
    pub version: Option<String>,
    /// Its description (`null` for a disabled skill).
    pub description: Option<String>,
    /// Whether its tools can run now.
    pub available: bool,
    /// Why not, when they cannot.
    pub reason: Option<String>,
    /// `true` for a skill the trust policy disabled (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Its tools as `skill:tool`.
    pub tools: Vec<String>,
    /// `signed` or `local`.
    pub trust: &'static str,
    /// How many warnings its manifest had.
    pub warnings: usize,
    /// What its scripts use that the sandbox lacks (programs not on its `PATH`, imports
    /// no package provides), judged by the executors; absent when nothing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub script_warnings: Vec<String>,
}

/// `GET /v1/skills`.
#[derive(Debug, Serialize)]
pub struct SkillList {
    /// The skills offered, then those the trust policy disabled.
    pub skills: Vec<SkillSummary>,
}

/// `GET /v1/skills/{name}` of an offered skill.
#[derive(Debug, Serialize)]
pub struct SkillDetail {
    /// The summary.
    #[serde(flatten)]
    pub summary: SkillSummary,
    /// The `SKILL.md` body.
    pub body: String,
    /// Every file of the skill folder.
    pub files: Vec<PathBuf>,
    /// The permissions it declares itself.
    pub permissions: Permissions,
    /// What the operator grants it beyond them (`[grants.<skill>]`), when anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub granted: Option<crate::state::config::grants::Grant>,
    /// What it may use: declared plus granted.
    pub effective_permissions: Permissions,
    /// Its routing triggers.
    pub triggers: Vec<String>,
    /// Its dependencies: the Python requirements (with where each came from), the Node
    /// packages of its `package.json`, the environment's digest, and the last build
    /// (`POST /v1/skills/{name}/deps`).
    pub dependencies: SkillDependencies,
}

/// A skill's dependencies and their last build.
#[derive(Debug, Serialize)]
pub struct SkillDependencies {
    /// What it declares plus what the operator adds.
    #[serde(flatten)]
    pub declared: skillbox_protocol::skill::Dependencies,
    /// The last build, if any.
    pub build: Option<crate::state::deps::DepsRecord>,
    /// Why the skill cannot run for want of them, if it cannot.
    pub problem: Option<String>,
    /// How far the build that runs now has come.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<crate::state::deps::BuildProgress>,
}

/// `GET /v1/approvals`.
#[derive(Debug, Serialize)]
pub struct ApprovalList {
    /// Each approval with its arguments and decoded payload.
    pub approvals: Vec<Value>,
}

/// The reload after an install, removal or repair: `"ok"` or `{"error": …}` (the change
/// itself stands either way).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ReloadOutcome {
    /// `"ok"`.
    Ok(&'static str),
    /// `{"error": …}`.
    Failed {
        /// Why the reload failed.
        error: String,
    },
}

/// `POST /v1/skills/install`.
#[derive(Debug, Serialize)]
pub struct InstallResponse {
    /// What was installed.
    pub installed: Installed,
    /// The reload after it.
    pub reload: ReloadOutcome,
    /// Set when the package was not signed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<&'static str>,
}

/// `POST /v1/skills/install` of a git source.
#[derive(Debug, Serialize)]
pub struct AddResponse {
    /// What was fetched and installed.
    pub added: crate::skills::sources::AddOutcome,
    /// The reload after it.
    pub reload: ReloadOutcome,
}

/// `POST /v1/skills/{name}/update`.
#[derive(Debug, Serialize)]
pub struct UpdateResponse {
    /// `up_to_date`, `folder_unchanged` (the ref moved, the skill's folder did not: the
    /// new commit is recorded, nothing installed) or `updated`.
    pub status: &'static str,
    /// The commit installed before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The commit installed now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Whether the update widened permissions.
    pub widens: bool,
    /// What changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<crate::skills::sources::diff::UpdateDiff>,
    /// The approval that confirmed it, when one was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// The reload after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reload: Option<ReloadOutcome>,
}

/// `DELETE /v1/skills/{name}`.
#[derive(Debug, Serialize)]
pub struct RemoveResponse {
    /// What was removed.
    pub removed: Removed,
    /// The reload after it.
    pub reload: ReloadOutcome,
}

/// `POST /v1/skills/{name}/repairs`.
#[derive(Debug, Serialize)]
pub struct RepairResponse {
    /// The repair's record.
    pub repair: RepairRecord,
    /// The reload after it.
    pub reload: ReloadOutcome,
}

/// `GET /v1/calls`: recent calls, newest first.
#[derive(Debug, Serialize)]
pub struct CallList {
    /// The calls.
    pub calls: Vec<crate::state::store::CallRecord>,
}

/// `GET /v1/routes`: recent routing decisions, newest first.
#[derive(Debug, Serialize)]
pub struct RouteList {
    /// The decisions, each with its whole plan.
    pub routes: Vec<crate::state::store::RouteRecord>,
}

/// `GET /v1/routes/{route_id}`: one decision and, when it was executed, its run.
#[derive(Debug, Serialize)]
pub struct RouteDetail {
    /// The decision.
    #[serde(flatten)]
    pub route: crate::state::store::RouteRecord,
    /// Whether `POST /v1/route/execute` ran it.
    pub executed: bool,
    /// The fallback state machine's transitions, in order.
    pub events: Vec<crate::state::store::RouteEvent>,
}

/// `GET /v1/skills/{name}/repairs`: the skill's repair records, oldest first.
#[derive(Debug, Serialize)]
pub struct RepairList {
    /// The records.
    pub repairs: Vec<RepairRecord>,
}
