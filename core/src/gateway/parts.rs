//! What each family of handlers is given of the core.
//!
//! Whoever builds the core ([`crate::app`]) hands the gateway one [`CoreParts`]; the
//! gateway never passes it on. It cuts it into one view per job instead, each holding only
//! the parts its handlers use, and a handler reads its own family's view (`gw.calls`,
//! `gw.contexts`, ...), never the whole set:
//!
//! | view | handlers | parts |
//! |---|---|---|
//! | [`SkillParts`] | REST `skills`, `health`, `repairs`, `install`, `deps`; MCP skills | load, availability, executors, Docker, store, approvals (update confirmations), the dependency builder |
//! | [`CallParts`] | REST `tools`, `route*`; MCP `tools/*` and its approval links | pipeline, load, availability, approvals, store (route records), metrics |
//! | [`ContextParts`] | REST `contexts`, `files`; MCP context resources | pipeline (a context's view, its sessions), load, store, files |
//! | [`ApprovalParts`] | REST `approvals`; the console's cards, pages and actions | approvals, load |
//! | [`TokenParts`] | REST `tokens` | pipeline (a bot's sessions), approvals |
//! | [`RecordParts`] | REST `observe` (metrics, history); the console's lists | store, load, metrics, approvals, executors, availability |
//!
//! The shape is the simplest that says who uses what: plain structs of shared handles,
//! cloned once when the gateway is built (and by a handler that moves its work off the
//! async threads). A part a family does not hold is one its handlers cannot reach.

use std::sync::Arc;

use crate::approvals::Approvals;
use crate::auth::Caller;
use crate::calls::{Dispatcher, LoadCell};
use crate::contexts::files::ContextFiles;
use crate::deps::DepsBuilder;
use crate::executors::availability::SkillAvailability;
use crate::executors::ExecutorPool;
use crate::observe::Metrics;
use crate::state::store::Store;

/// The parts of the core the gateway is built from, handed in when the core is built
/// ([`crate::app`]); cut into one view per handler family ([`CoreParts::views`]).
#[derive(Debug, Clone)]
pub struct CoreParts {
    /// The call pipeline: its one entry, and what a context shows its caller.
    pub pipeline: Arc<Dispatcher>,
    /// The current load of the skills.
    pub load: Arc<LoadCell>,
    /// The state store.
    pub store: Store,
    /// The approvals.
    pub approvals: Arc<Approvals>,
    /// The metrics `GET /metrics` serves.
    pub metrics: Arc<Metrics>,
    /// The executors.
    pub executors: Arc<ExecutorPool>,
    /// Whether a skill can run now.
    pub availability: SkillAvailability,
    /// Whether `execution.sandbox: container` calls can run (a Docker engine).
    pub container_sandbox: bool,
    /// The contexts' working folders.
    pub files: ContextFiles,
    /// The skills' dependency builds.
    pub deps: Arc<DepsBuilder>,
}

/// The skills, as the skill store's handlers see them (see the module docs).
#[derive(Debug, Clone)]
pub struct SkillParts {
    pub(crate) load: Arc<LoadCell>,
    pub(crate) availability: SkillAvailability,
    pub(crate) executors: Arc<ExecutorPool>,
    pub(crate) container_sandbox: bool,
    pub(crate) store: Store,
    pub(crate) approvals: Arc<Approvals>,
    pub(crate) deps: Arc<DepsBuilder>,
}

/// Tool calls and routing (see the module docs).
#[derive(Debug, Clone)]
pub struct CallParts {
    pub(crate) pipeline: Arc<Dispatcher>,
    pub(crate) load: Arc<LoadCell>,
    pub(crate) availability: SkillAvailability,
    pub(crate) approvals: Arc<Approvals>,
    pub(crate) store: Store,
    pub(crate) metrics: Arc<Metrics>,
}

/// Contexts and their files (see the module docs).
#[derive(Debug, Clone)]
pub struct ContextParts {
    pub(crate) pipeline: Arc<Dispatcher>,
    pub(crate) load: Arc<LoadCell>,
    pub(crate) store: Store,
    pub(crate) files: ContextFiles,
}

/// The operator's approvals (see the module docs).
#[derive(Debug, Clone)]
pub struct ApprovalParts {
    pub(crate) approvals: Arc<Approvals>,
    pub(crate) load: Arc<LoadCell>,
}

/// Bot tokens: what revoking one ends (see the module docs).
#[derive(Debug, Clone)]
pub struct TokenParts {
    pub(crate) pipeline: Arc<Dispatcher>,
    pub(crate) approvals: Arc<Approvals>,
}

/// Metrics and history (see the module docs).
#[derive(Debug, Clone)]
pub struct RecordParts {
    pub(crate) store: Store,
    pub(crate) load: Arc<LoadCell>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) approvals: Arc<Approvals>,
    pub(crate) executors: Arc<ExecutorPool>,
    pub(crate) availability: SkillAvailability,
}

/// One view per handler family.
#[derive(Debug, Clone)]
pub struct Views {
    /// The skill store's handlers.
    pub skills: SkillParts,
    /// Tool calls and routing.
    pub calls: CallParts,
    /// Contexts and their files.
    pub contexts: ContextParts,
    /// Approvals.
    pub approvals: ApprovalParts,
    /// Bot tokens.
    pub tokens: TokenParts,
    /// Metrics and history.
    pub records: RecordParts,
}

impl CoreParts {
    /// The views of the handler families.
    pub fn views(&self) -> Views {
        Views {
            skills: SkillParts {
                load: Arc::clone(&self.load),
                availability: self.availability.clone(),
                executors: Arc::clone(&self.executors),
                container_sandbox: self.container_sandbox,
                store: self.store.clone(),
                approvals: Arc::clone(&self.approvals),
                deps: Arc::clone(&self.deps),
            },
            calls: CallParts {
                pipeline: Arc::clone(&self.pipeline),
                load: Arc::clone(&self.load),
                availability: self.availability.clone(),
                approvals: Arc::clone(&self.approvals),
                store: self.store.clone(),
                metrics: Arc::clone(&self.metrics),
            },
            contexts: ContextParts {
                pipeline: Arc::clone(&self.pipeline),
                load: Arc::clone(&self.load),
                store: self.store.clone(),
                files: self.files.clone(),
            },
            approvals: ApprovalParts {
                approvals: Arc::clone(&self.approvals),
                load: Arc::clone(&self.load),
            },
            tokens: TokenParts {
                pipeline: Arc::clone(&self.pipeline),
                approvals: Arc::clone(&self.approvals),
            },
            records: RecordParts {
                store: self.store.clone(),
                load: Arc::clone(&self.load),
                metrics: Arc::clone(&self.metrics),
                approvals: Arc::clone(&self.approvals),
                executors: Arc::clone(&self.executors),
                availability: self.availability.clone(),
            },
        }
    }

    /// What the reload needs of them.
    pub fn reload_parts(&self) -> crate::reload::ReloadParts {
        crate::reload::ReloadParts {
            load: Arc::clone(&self.load),
            secrets: self.availability.secrets().clone(),
            executors: Arc::clone(&self.executors),
            deps: Some(Arc::clone(&self.deps)),
        }
    }
}

impl CallParts {
    /// The skills of `catalog` that `caller` may use and that can run now, by name (what
    /// the built-in tools offer to load or run, in `GET /v1/tools` and MCP `tools/list`).
    pub fn usable_skills(
        &self,
        catalog: &skillbox_protocol::skill::Catalog,
        caller: &Caller,
    ) -> Vec<String> {
        (catalog.skills.iter())
            .filter(|s| caller.may_use_skill(&s.name))
            .filter(|s| self.availability.of(s).is_ready())
            .map(|s| s.name.clone())
            .collect()
    }
}
