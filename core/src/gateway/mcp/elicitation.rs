//! Approval links by URL-mode elicitation (docs/mcp.md, "Approvals"). A `write` or `sign`
//! call waits for an operator as the REST call does. A 2026-07-28 client that declares
//! `elicitation.url` also gets the console link of each approval its call asks for: the
//! call goes on waiting in the core, and the request answers an `InputRequiredResult`
//! whose elicitation names `/console/approvals/{id}` and whose `requestState` names the
//! waiting call. The client's retry (with that state) waits for the same call and gets
//! its result; a retry with a state the core does not know (a restart) calls afresh, and
//! an approval given meanwhile lets that fresh call run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use serde_json::{json, Value};
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::skill::Security;
use skillbox_protocol::Target;
use tokio::sync::{broadcast, watch};

use super::errors::McpError;
use crate::approvals::{args_hash, ApprovalRecord};
use crate::auth::CallOrigin;
use crate::calls::ToolCall;
use crate::contexts::disclosure;
use crate::gateway::Gateway;

/// The calls that answered an approval link and go on waiting, by `requestState`.
#[derive(Debug, Default)]
pub struct WaitingCalls {
    calls: Mutex<HashMap<String, Waiting>>,
}

/// The approvals of which call: a `write` approval carries the call's arguments, a `sign`
/// approval the payload (matched by skill and tool alone).
#[derive(Debug, Clone)]
struct Watched {
    /// The skill the approval names; `None`: whichever the pipeline picks (an
    /// `exec_command` without `skill` runs under the context's only pinned skill, or none:
    /// that rule is the pipeline's alone, `calls/sessions.rs`).
    skill: Option<String>,
    tool: String,
    args_hash: String,
    requested_by: String,
}

impl Watched {
    fn matches(&self, r: &ApprovalRecord) -> bool {
        r.requested_by == self.requested_by
            && self.skill.as_ref().is_none_or(|s| *s == r.skill)
            && r.tool == self.tool
            && (r.security == Security::Sign || r.args_hash == self.args_hash)
    }
}

/// One call running in the core on behalf of an MCP request.
#[derive(Debug)]
pub struct Waiting {
    origin: CallOrigin,
    name: String,
    args: Value,
    target: Option<Watched>,
    result: watch::Receiver<Option<ToolResult>>,
    asked: broadcast::Receiver<ApprovalRecord>,
    done_since: Option<Instant>,
}

/// What a waiting call did next.
#[derive(Debug)]
pub enum Next {
    /// It ended.
    Done(ToolResult),
    /// It asked for this approval and waits.
    Asked(ApprovalRecord, Box<Waiting>),
}

impl WaitingCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The waiting call `state` names, when it is the same caller, context, tool and
    /// arguments (a state is never another caller's way into a call).
    pub fn take(
        &self,
        state: &str,
        origin: &CallOrigin,
        name: &str,
        args: &Value,
    ) -> Option<Waiting> {
        let mut calls = self.lock();
        let same = calls
            .get(state)
            .is_some_and(|w| w.origin == *origin && w.name == name && w.args == *args);
        if same {
            calls.remove(state)
        } else {
            None
        }
    }

    /// Keeps `waiting` under `state`, and forgets results nobody came back for within
    /// `keep` of the call's end (the server passes `[approvals] timeout_ms`: as long as an
    /// operator had to decide, the client has to come back).
    pub fn put(&self, state: String, waiting: Waiting, keep: Duration) {
        let mut calls = self.lock();
        let now = Instant::now();
        calls.retain(|_, w| {
            if w.done_since.is_none() && w.result.borrow().is_some() {
                w.done_since = Some(now);
            }
            w.done_since.is_none_or(|t| now.duration_since(t) < keep)
        });
        calls.insert(state, waiting);
    }
}

/// What the approvals a call of `target` may wait for name: the tool's skill and name, or
/// for a built-in run under a skill's envelope the skill (when the arguments fix it) and
/// the built-in; `None` for built-ins that ask no approval.
fn watched_for(
    catalog: &skillbox_protocol::skill::Catalog,
    target: &Target,
    args: &serde_json::Value,
) -> Option<(Option<String>, String)> {
    match target {
        Target::Tool(r) => Some((Some(r.skill.clone()), r.tool.clone())),
        Target::RunSkillScript => disclosure::resolve_script(catalog, args)
            .ok()
            .map(|s| (Some(s.skill.clone()), Target::RUN_SKILL_SCRIPT.to_string())),
        Target::ExecCommand => Some((
            args.get("skill")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string),
            Target::EXEC_COMMAND.to_string(),
        )),
        Target::LoadSkill | Target::RunSkill | Target::WriteStdin | Target::CloseContext => None,
    }
}

/// Starts `call` (the MCP tool `name`) in the core, detached from the request.
pub fn start(gw: &Gateway, name: &str, call: ToolCall) -> Waiting {
    let catalog = gw.calls.load.catalog();
    let (origin, args) = (call.origin.clone(), call.args.clone());
    let watched = watched_for(&catalog, &call.target, &args).map(|(skill, tool)| Watched {
        skill,
        tool,
        args_hash: args_hash(&args),
        requested_by: origin.caller.name().to_owned(),
    });
    // Subscribed before the call starts: its first approval cannot be missed.
    let asked = gw.calls.approvals.watch_asked();
    let (tx, result) = watch::channel(None);
    let dispatcher = Arc::clone(&gw.calls.pipeline);
    tokio::spawn(async move {
        let r = dispatcher.call(call).await;
        let _ = tx.send(Some(r));
    });
    Waiting {
        origin: origin.clone(),
        name: name.to_string(),
        args,
        target: watched,
        result,
        asked,
        done_since: None,
    }
}

/// What a waiting call's two channels said.
enum Event {
    Ended(Option<ToolResult>),
    Asked(ApprovalRecord),
    Missed,
    NoMoreApprovals,
}

/// Waits until the call ends or asks for an approval of its own.
pub async fn next(mut w: Waiting) -> Next {
    loop {
        let event = tokio::select! {
            ended = w.result.wait_for(Option::is_some) => {
                Event::Ended(ended.ok().and_then(|r| r.clone()))
            }
            asked = w.asked.recv() => match asked {
                Ok(record) => Event::Asked(record),
                Err(broadcast::error::RecvError::Lagged(_)) => Event::Missed,
                Err(broadcast::error::RecvError::Closed) => Event::NoMoreApprovals,
            },
        };
        let ended = match event {
            Event::Ended(r) => r,
            Event::Asked(record) if w.target.as_ref().is_some_and(|t| t.matches(&record)) => {
                return Next::Asked(record, Box::new(w));
            }
            Event::Asked(_) | Event::Missed => continue,
            // No approval can be announced any more; the result still comes.
            Event::NoMoreApprovals => w
                .result
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|r| r.clone()),
        };
        return Next::Done(ended.unwrap_or_else(|| {
            ToolResult::failed(
                "",
                ErrorKind::Unavailable,
                "the call ended without a result (the core is shutting down?); call again",
                0,
            )
        }));
    }
}

/// The `InputRequiredResult` that links the client to approval `record` and names the
/// waiting call by `state`.
pub fn input_required(record: &ApprovalRecord, state: &str, console_base: &str) -> Value {
    let id = &record.id;
    let url = format!("{console_base}/console/approvals/{id}");
    json!({
        "resultType": "input_required",
        "inputRequests": {
            "approval": {
                "method": "elicitation/create",
                "params": {
                    "mode": "url",
                    "elicitationId": id,
                    "url": url,
                    "message": format!(
                        "{}:{} waits for an operator's approval {id}: approve or deny it at {url}, \
                         or with `skillbox approvals approve {id}` / POST /v1/approvals/{id}",
                        record.skill, record.tool
                    ),
                },
            },
        },
        "requestState": state,
    })
}

/// A fresh `requestState`.
pub fn new_state() -> Result<String, McpError> {
    crate::random::token(&crate::random::SystemSource::default(), "MCP request state")
        .map_err(|e| McpError::Internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn waiting(ended: bool) -> (Waiting, watch::Sender<Option<ToolResult>>) {
        let (tx, result) = watch::channel(None);
        if ended {
            tx.send_replace(Some(ToolResult::ok("c", json!({}), 0)));
        }
        let (_asked_tx, asked) = broadcast::channel(1);
        let w = Waiting {
            origin: CallOrigin::operator(),
            name: "notes.edit".into(),
            args: json!({"text": "a"}),
            target: None,
            result,
            asked,
            done_since: None,
        };
        (w, tx)
    }

    #[tokio::test(start_paused = true)]
    async fn result_nobody_comes_back_for_is_dropped_after_the_keep_time() {
        let calls = WaitingCalls::default();
        let keep = Duration::from_secs(120);
        let (ended, _t1) = waiting(true);
        let (running, _t2) = waiting(false);
        calls.put("ended".into(), ended, keep);
        calls.put("running".into(), running, keep);
        // Its end is noticed at the next put; kept for `keep` from then.
        let (other, _t3) = waiting(false);
        calls.put("other".into(), other, keep);
        tokio::time::advance(keep - Duration::from_secs(1)).await;
        let (again, _t4) = waiting(false);
        calls.put("again".into(), again, keep);
        assert_eq!(calls.lock().len(), 4, "within the keep time");
        tokio::time::advance(Duration::from_secs(2)).await;
        let (last, _t5) = waiting(false);
        calls.put("last".into(), last, keep);
        let kept = calls.lock();
        assert!(!kept.contains_key("ended"), "dropped after the keep time");
        assert!(kept.contains_key("running"), "a call still running is kept");
    }

    /// An `exec_command` without `skill` in a context with one pinned skill asks its
    /// approval under that skill (the pipeline's rule): the link must watch for it, not for
    /// a made-up "no skill" name it would never see.
    #[test]
    fn exec_command_without_a_skill_watches_the_approval_the_pipeline_asks() {
        let args = json!({"cmd": "rm -rf out"});
        let catalog = skillbox_protocol::skill::Catalog::default();
        let (skill, tool) = watched_for(&catalog, &Target::ExecCommand, &args).unwrap();
        let watched = Watched {
            skill,
            tool,
            args_hash: args_hash(&args),
            requested_by: "bot-a".into(),
        };
        let record = |skill: &str| ApprovalRecord {
            id: "a1".into(),
            skill: skill.into(),
            tool: Target::EXEC_COMMAND.into(),
            args_hash: args_hash(&args),
            args: args.clone(),
            security: Security::Write,
            status: crate::state::store::ApprovalStatus::Pending,
            created_at: 0,
            decided_at: None,
            reason: None,
            requested_by: "bot-a".into(),
            context_id: Some("c1".into()),
            decided_by: None,
        };
        assert!(watched.matches(&record("notes")), "the only pinned skill");
        assert!(watched.matches(&record("-")), "no skill");
        let named = json!({"cmd": "rm -rf out", "skill": "notes"});
        let (skill, _) = watched_for(&catalog, &Target::ExecCommand, &named).unwrap();
        assert_eq!(skill.as_deref(), Some("notes"));
        assert!(watched_for(&catalog, &Target::WriteStdin, &args).is_none());
    }

    #[test]
    fn resume_needs_the_same_tool_and_arguments() {
        let calls = WaitingCalls::default();
        let (w, _t) = waiting(false);
        calls.put("s1".into(), w, Duration::from_secs(1));
        let op = CallOrigin::operator();
        assert!(calls
            .take("s1", &op, "notes.edit", &json!({"text": "b"}))
            .is_none());
        assert!(calls
            .take("s1", &op, "notes.search", &json!({"text": "a"}))
            .is_none());
        assert!(calls
            .take("s2", &op, "notes.edit", &json!({"text": "a"}))
            .is_none());
        assert!(calls
            .take("s1", &op, "notes.edit", &json!({"text": "a"}))
            .is_some());
        assert!(
            calls
                .take("s1", &op, "notes.edit", &json!({"text": "a"}))
                .is_none(),
            "taken once"
        );
    }

    #[test]
    fn another_caller_cannot_resume_a_waiting_call_with_its_state() {
        let calls = WaitingCalls::default();
        let (w, _t) = waiting(false);
        calls.put("s1".into(), w, Duration::from_secs(1));
        let bot = crate::auth::Caller::Bot(std::sync::Arc::new(crate::auth::Bot {
            name: "mallory".into(),
            skills: None,
        }));
        let args = json!({"text": "a"});
        let as_bot = CallOrigin::new(bot, None);
        assert!(calls.take("s1", &as_bot, "notes.edit", &args).is_none());
        let other_context = CallOrigin::new(crate::auth::Caller::Operator, Some("c2".into()));
        assert!(calls
            .take("s1", &other_context, "notes.edit", &args)
            .is_none());
        let op = CallOrigin::operator();
        assert!(calls.take("s1", &op, "notes.edit", &args).is_some());
    }
}
