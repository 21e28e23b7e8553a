//! Delegation (`runSkill`): a tool's program calls a tool of another skill through the
//! core. The child is a call like any other — the caller's identity (its bot's skills),
//! the gate, admission, approvals, its own sandbox and its own permissions, never the
//! parent's — made only when the parent declared it (`permissions.delegate`), within the
//! limits the whole tree of calls shares: `[routing] max_delegate_depth` levels, no skill
//! twice in one chain (`a → b → a`), `max_delegated_calls` calls, and the top call's time.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use skillbox_protocol::methods::{Capability, RunSkillParams};
use skillbox_protocol::result::{DelegatedCall, ToolResult};
use skillbox_protocol::ToolRef;

use super::{ActiveCall, Dispatcher, ToolCall};
use crate::proxy::ProxyError;

/// What a call inherits from the calls above it.
#[derive(Debug, Clone, Default)]
pub struct Delegation {
    /// The skills above it, the caller's first; empty for a call the caller made.
    pub chain: Vec<String>,
    /// When the top call's time runs out.
    pub deadline: Option<Instant>,
    /// The calls the tree may still delegate (shared by every call in it).
    pub budget: Option<Arc<AtomicU32>>,
}

impl Delegation {
    /// A top call's: its deadline and a fresh budget.
    pub fn top(timeout: Duration, max_calls: u32) -> Self {
        Self {
            chain: Vec::new(),
            deadline: Some(Instant::now() + timeout),
            budget: Some(Arc::new(AtomicU32::new(max_calls))),
        }
    }

    /// What the call of `skill` hands its children.
    fn child_of(&self, skill: &str) -> Self {
        let mut chain = self.chain.clone();
        chain.push(skill.to_string());
        Self {
            chain,
            deadline: self.deadline,
            budget: self.budget.clone(),
        }
    }

    /// This call's deadline: its own time, cut to what the top call has left.
    pub fn deadline_for(&self, timeout: Duration) -> Instant {
        let own = Instant::now() + timeout;
        self.deadline.map_or(own, |d| d.min(own))
    }
}

fn refused(reason: String) -> ProxyError {
    ProxyError::PermissionDenied {
        capability: Capability::RunSkill.as_str(),
        reason,
    }
}

impl Dispatcher {
    /// Runs `req` for `parent`'s program, after checking the declaration and the shared
    /// limits; the child's result is the answer, success or not. A refusal is noted on the
    /// parent too, so its result lists every delegation it tried.
    pub(super) async fn delegate(
        &self,
        parent: &ActiveCall,
        req: RunSkillParams,
    ) -> Result<ToolResult, ProxyError> {
        let depth = u32::try_from(parent.delegation.chain.len() + 1).unwrap_or(u32::MAX);
        let note = |call_id: String, success: bool, kind| {
            if let Ok(mut notes) = parent.delegated.lock() {
                notes.push(DelegatedCall {
                    tool: req.tool.clone(),
                    call_id,
                    success,
                    error_kind: kind,
                    depth,
                });
            }
        };
        let checked = self.check_delegation(parent, &req, depth);
        let (target, deadline) = match checked {
            Ok(ok) => ok,
            Err(e) => {
                tracing::warn!(skill = %parent.skill.name, tool = %req.tool, reason = %e, "runSkill refused");
                note(
                    String::new(),
                    false,
                    Some(skillbox_protocol::result::ErrorKind::PermissionDenied),
                );
                return Err(e);
            }
        };
        tracing::info!(skill = %parent.skill.name, child = %req.tool, depth, "runSkill");
        let mut call = ToolCall::new(target, req.args.clone(), parent.origin.clone());
        // The child runs outside the parent's context: a context's active tools are the
        // caller's choice, and a delegation is the parent skill's.
        call.origin.context_id = None;
        call.delegation = Some(parent.delegation.child_of(&parent.skill.name));
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, self.call(call)).await {
            Ok(result) => {
                note(result.call_id.clone(), result.success, result.error_kind);
                Ok(result)
            }
            Err(_) => {
                note(
                    String::new(),
                    false,
                    Some(skillbox_protocol::result::ErrorKind::Timeout),
                );
                Err(ProxyError::Unavailable {
                    capability: Capability::RunSkill.as_str(),
                    reason: format!(
                        "{} did not answer within the {} ms the calling tool had left",
                        req.tool,
                        left.as_millis()
                    ),
                })
            }
        }
    }

    /// The target and the deadline of a delegation, or why it may not be made.
    fn check_delegation(
        &self,
        parent: &ActiveCall,
        req: &RunSkillParams,
        depth: u32,
    ) -> Result<(ToolRef, Instant), ProxyError> {
        let target = ToolRef::parse(&req.tool).map_err(|e| ProxyError::InvalidParams {
            capability: Capability::RunSkill.as_str(),
            reason: format!("tool {:?}: {e}; name it as skill:tool", req.tool),
        })?;
        let me = &parent.skill.name;
        if !parent
            .skill
            .permissions
            .may_delegate(&target.skill, &target.tool)
        {
            return Err(refused(format!(
                "{me} does not declare {} in permissions.delegate",
                req.tool
            )));
        }
        let d = &parent.delegation;
        let (Some(deadline), Some(budget)) = (d.deadline, &d.budget) else {
            return Err(refused(
                "only a tool call may delegate (not a command session or a build)".into(),
            ));
        };
        if target.skill == *me || d.chain.contains(&target.skill) {
            let mut chain = d.chain.clone();
            chain.extend([me.clone(), target.skill.clone()]);
            return Err(refused(format!(
                "loop: {} would call a skill already running in this chain",
                chain.join(" → ")
            )));
        }
        let routing = &self.load.current().config.routing;
        if depth > routing.max_delegate_depth {
            return Err(refused(format!(
                "depth {depth} is over [routing] max_delegate_depth = {} ({} → {})",
                routing.max_delegate_depth,
                d.chain.join(" → "),
                target.skill
            )));
        }
        let taken = budget.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
            left.checked_sub(1)
        });
        if taken.is_err() {
            return Err(refused(format!(
                "the calls of this request used all {} delegations of [routing] max_delegated_calls",
                routing.max_delegated_calls
            )));
        }
        if deadline <= Instant::now() {
            return Err(refused("the calling tool has no time left".into()));
        }
        Ok((target, deadline))
    }
}
