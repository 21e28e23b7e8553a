//! `run_skill {name, task}` (seed 001 §19): a child context for the agent's sub-agent, with
//! the skill pinned and its instructions loaded.
//!
//! The chain travels in the child context's id: `PARENT::a::b` is the context a sub-agent
//! works in after `a` delegated to `b` from context `PARENT` (a call without a context
//! starts the chain at `run`). So a sub-agent calling `run_skill` from its child context
//! continues the chain, across as many contexts as the depth allows, with nothing kept
//! beside the contexts themselves. A skill already in the chain is a loop; a chain as long
//! as `[routing] max_delegate_depth` takes no more. These limits keep an agent's own
//! sub-agents from recursing; they are not a wall against the caller, who may name any
//! context it may enter.

use serde_json::{json, Value};
use skillbox_protocol::skill::Catalog;

use super::disclosure::{self, DisclosureError};
use super::{pin, validate_id, ContextError, MAX_CONTEXT_ID};
use crate::random::SystemSource;
use crate::state::store::{unix_ms_now, RouteRecord, Store};

/// Between the parts of a child context's id.
pub const SEPARATOR: &str = "::";
/// Where a chain starts when the call has no context.
pub const ROOT: &str = "run";

/// Why a delegation is refused.
#[derive(Debug, thiserror::Error)]
pub enum DelegationError {
    /// The skill is already in the chain.
    #[error("loop: {0} would delegate to a skill already in this chain")]
    Loop(String),
    /// The chain is as long as the depth allows.
    #[error("depth {depth} is over [routing] max_delegate_depth = {max} ({chain})")]
    Depth {
        /// The depth the delegation would have.
        depth: usize,
        /// The limit.
        max: u32,
        /// The chain with the target.
        chain: String,
    },
    /// No task was given.
    #[error("run_skill needs a task (a non-empty string)")]
    NoTask,
    /// The skill or its instructions.
    #[error(transparent)]
    Skill(#[from] DisclosureError),
    /// The child context.
    #[error(transparent)]
    Context(#[from] ContextError),
}

/// The skills of a chain from a context id (empty for a context no delegation made).
pub fn chain_of(context_id: Option<&str>) -> (String, Vec<String>) {
    let Some(id) = context_id else {
        return (ROOT.to_string(), Vec::new());
    };
    let mut parts = id.split(SEPARATOR);
    let root = parts.next().unwrap_or(ROOT).to_string();
    (root, parts.map(str::to_string).collect())
}

/// Delegates `args.task` to the skill `args.name` from `context_id`: pins it in the child
/// context and answers what the sub-agent needs.
pub fn run_skill(
    store: &Store,
    catalog: &Catalog,
    context_id: Option<&str>,
    args: &Value,
    max_depth: u32,
) -> Result<Value, DelegationError> {
    let task = (args.get("task").and_then(Value::as_str))
        .filter(|t| !t.trim().is_empty())
        .ok_or(DelegationError::NoTask)?;
    // The skill and its instructions (load_skill's answer, unknown names refused there).
    let loaded = disclosure::load_skill(catalog, args)?;
    let name = loaded["name"].as_str().unwrap_or_default().to_string();
    let (root, mut chain) = chain_of(context_id);
    let with_target = || {
        let mut all = chain.clone();
        all.push(name.clone());
        all.join(" → ")
    };
    if chain.contains(&name) {
        return Err(DelegationError::Loop(with_target()));
    }
    let depth = chain.len() + 1;
    if depth > usize::try_from(max_depth).unwrap_or(usize::MAX) {
        return Err(DelegationError::Depth {
            depth,
            max: max_depth,
            chain: with_target(),
        });
    }
    chain.push(name.clone());
    let child = std::iter::once(root.as_str())
        .chain(chain.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(SEPARATOR);
    if child.len() > MAX_CONTEXT_ID {
        validate_id(&child)?;
    }
    pin(store, catalog, &child, &name)?;
    Ok(json!({
        "status": "delegated",
        "context_id": child,
        "target_skill": name,
        "call_chain": chain,
        "depth": depth,
        "task": task,
        "skill_file": "SKILL.md",
        "instructions": loaded["body"],
        "tools": loaded["tools"],
        "files": loaded["files"],
        "base_dir": loaded["base_dir"],
    }))
}

/// [`run_skill`] for `caller`, the delegation then [`record`]ed (its `route_id` in the
/// answer; a record that cannot be written is logged, and the delegation stands).
/// `limits`: `[routing] max_delegate_depth` and `[observe] routes_kept`.
pub fn run_and_record(
    store: &Store,
    catalog: &Catalog,
    context_id: Option<&str>,
    caller: &str,
    args: &Value,
    limits: (u32, usize),
) -> Result<Value, DelegationError> {
    let mut answer = run_skill(store, catalog, context_id, args, limits.0)?;
    match record(store, caller, context_id, &answer, limits.1) {
        Ok(route_id) => answer["route_id"] = Value::String(route_id),
        Err(e) => tracing::error!(error = %e, "cannot record the delegation"),
    }
    Ok(answer)
}

/// Records a delegation `run_skill` answered (`answer`) in the route records (`GET
/// /v1/routes`, kept to `keep` newest) beside the routing decisions: the task as the
/// query, the context it was delegated from, the skill as the primary, and a plan of kind
/// `delegation` with the child context and the chain. Returns its route id.
pub fn record(
    store: &Store,
    caller: &str,
    from_context: Option<&str>,
    answer: &Value,
    keep: usize,
) -> Result<String, String> {
    let route_id = crate::random::route_id(&SystemSource::default()).map_err(|e| e.to_string())?;
    let record = RouteRecord {
        route_id: route_id.clone(),
        at: unix_ms_now(),
        query: answer["task"].as_str().unwrap_or_default().to_string(),
        context_id: from_context.map(str::to_string),
        primary: answer["target_skill"].as_str().map(str::to_string),
        plan: json!({
            "kind": "delegation",
            "route_id": route_id,
            "from_context": from_context,
            "context_id": answer["context_id"],
            "target_skill": answer["target_skill"],
            "call_chain": answer["call_chain"],
            "depth": answer["depth"],
        }),
        caller: caller.to_string(),
    };
    store
        .record_route(&record, keep)
        .map_err(|e| e.to_string())?;
    Ok(route_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_is_read_from_the_context_id() {
        assert_eq!(chain_of(None), ("run".to_string(), vec![]));
        assert_eq!(chain_of(Some("chat-1")), ("chat-1".to_string(), vec![]));
        assert_eq!(
            chain_of(Some("chat-1::pdf::docx")),
            (
                "chat-1".to_string(),
                vec!["pdf".to_string(), "docx".to_string()]
            )
        );
    }
}
