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
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::skill::Security;
use skillbox_protocol::ToolRef;
use tokio::sync::{broadcast, watch};

use super::errors::McpError;
use crate::approvals::{args_hash, ApprovalRecord};
use crate::contexts::disclosure;
use crate::gateway::Gateway;

/// How long the result of a call whose client never came back for it is kept.
pub const UNCLAIMED_RESULT_TTL: Duration = Duration::from_secs(600);

/// The calls that answered an approval link and go on waiting, by `requestState`.
#[derive(Debug, Default)]
pub struct WaitingCalls {
    calls: Mutex<HashMap<String, Waiting>>,
}

/// The approvals of which call: a `write` approval carries the call's arguments, a `sign`
/// approval the payload (matched by skill and tool alone).
#[derive(Debug, Clone)]
struct Target {
    skill: String,
    tool: String,
    args_hash: String,
}

impl Target {
    fn matches(&self, r: &ApprovalRecord) -> bool {
        r.skill == self.skill
            && r.tool == self.tool
            && (r.security == Security::Sign || r.args_hash == self.args_hash)
    }
}

/// One call running in the core on behalf of an MCP request.
#[derive(Debug)]
pub struct Waiting {
    name: String,
    args: Value,
    target: Option<Target>,
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

    /// The waiting call `state` names, when it is the same tool and arguments.
    pub fn take(&self, state: &str, name: &str, args: &Value) -> Option<Waiting> {
        let mut calls = self.lock();
        let same = calls
            .get(state)
            .is_some_and(|w| w.name == name && w.args == *args);
        if same {
            calls.remove(state)
        } else {
            None
        }
    }

    /// Keeps `waiting` under `state`, and forgets results nobody came back for.
    pub fn put(&self, state: String, waiting: Waiting) {
        let mut calls = self.lock();
        let now = Instant::now();
        calls.retain(|_, w| {
            if w.done_since.is_none() && w.result.borrow().is_some() {
                w.done_since = Some(now);
            }
            w.done_since
                .is_none_or(|t| now.duration_since(t) < UNCLAIMED_RESULT_TTL)
        });
        calls.insert(state, waiting);
    }
}

/// Starts `name` (`full` in the pipeline's terms) in the core, detached from the request.
pub fn start(
    gw: &Gateway,
    context_id: Option<&str>,
    name: &str,
    full: String,
    args: Value,
) -> Waiting {
    let catalog = gw.dispatcher.catalog();
    let (pipeline_name, pipeline_args) = if full == disclosure::RUN_SKILL_SCRIPT {
        disclosure::resolve_script(&catalog, &args).unwrap_or_default()
    } else {
        (full.clone(), args.clone())
    };
    let target = ToolRef::parse(&pipeline_name).ok().map(|r| Target {
        skill: r.skill,
        tool: r.tool,
        args_hash: args_hash(&pipeline_args),
    });
    // Subscribed before the call starts: its first approval cannot be missed.
    let asked = gw.dispatcher.approvals().watch_asked();
    let (tx, result) = watch::channel(None);
    let dispatcher = Arc::clone(&gw.dispatcher);
    let context = context_id.map(str::to_string);
    let call_args = args.clone();
    tokio::spawn(async move {
        let r = crate::gateway::tools::call_tool(&dispatcher, full, call_args, context).await;
        let _ = tx.send(Some(r));
    });
    Waiting {
        name: name.to_string(),
        args,
        target,
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
pub fn new_state(gw: &Gateway) -> Result<String, McpError> {
    gw.dispatcher
        .new_call_id()
        .map_err(|e| McpError::Internal(e.to_string()))
}
