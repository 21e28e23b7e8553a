//! `GET /v1/tools` and `POST /v1/tools/call`: the tools of the available skills plus the
//! built-in disclosure tools, and one call, gated by the caller's context when it names one.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::ToolRef;

use super::api::{CallRequest, ToolEntry, ToolList};
use super::request::{ok_of, Reply, Req};
use super::Gateway;
use crate::auth::CallOrigin;
use crate::calls::Dispatcher;
use crate::contexts::disclosure;

/// `GET /v1/tools`: those of the skills the caller may use.
pub async fn list(gw: &Gateway, req: Req) -> Reply {
    let catalog = gw.dispatcher.catalog();
    let caller = &req.caller;
    let mut out: Vec<Value> = catalog
        .skills
        .iter()
        .filter(|s| caller.may_use_skill(&s.name))
        .flat_map(|s| {
            s.tools.iter().map(move |t| {
                serde_json::to_value(ToolEntry {
                    name: ToolRef::new(&s.name, &t.name).to_string(),
                    description: t.description.clone(),
                    parameters: t.parameters.clone(),
                    security: t.security,
                })
                .unwrap_or_default()
            })
        })
        .collect();
    out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let available: Vec<String> = catalog
        .skills
        .iter()
        .filter(|s| caller.may_use_skill(&s.name))
        .filter(|s| gw.dispatcher.unavailable_reason(s).is_none())
        .map(|s| s.name.clone())
        .collect();
    out.extend(disclosure::builtin_tools(&available));
    Ok(ok_of(&ToolList { tools: out }))
}

/// `POST /v1/tools/call`: the call's result (a failed call is a 200 with its error kind).
pub async fn call(gw: &Gateway, req: Req) -> Reply {
    let entered = Instant::now();
    let trace = req.traceparent();
    let caller = req.caller.clone();
    let body: CallRequest = req.json().await?;
    let args = if body.args.is_null() {
        json!({})
    } else {
        body.args
    };
    let called = Instant::now();
    let origin = CallOrigin::new(caller, body.context_id);
    let result = call_tool_traced(&gw.dispatcher, &origin, body.tool, args, trace).await;
    let in_call = called.elapsed();
    let reply = ok_of(&result);
    gw.dispatcher
        .metrics()
        .observe_stage("gateway", entered.elapsed().saturating_sub(in_call));
    Ok(reply)
}

/// A built-in tool or a skill's tool for `origin`, refused when its caller may not use the
/// skill, or a context is given that the caller may not enter or whose active tools do
/// not hold the tool.
pub(super) async fn call_tool(
    dispatcher: &Arc<Dispatcher>,
    origin: &CallOrigin,
    tool: String,
    args: Value,
) -> ToolResult {
    call_tool_traced(dispatcher, origin, tool, args, None).await
}

/// [`call_tool`] with the caller's W3C trace context, carried into the executor.
pub(super) async fn call_tool_traced(
    dispatcher: &Arc<Dispatcher>,
    origin: &CallOrigin,
    tool: String,
    args: Value,
    trace: Option<crate::observe::TraceParent>,
) -> ToolResult {
    // Results answered here (built-ins, refusals) get an id of their own, as dispatched
    // calls do; dispatched calls draw theirs in the dispatcher.
    let call_id = match dispatcher.new_call_id() {
        Ok(id) => id,
        Err(e) => return ToolResult::failed("", ErrorKind::Unavailable, e.to_string(), 0),
    };
    let refused = |e: &dyn std::fmt::Display, kind: ErrorKind| {
        ToolResult::failed(call_id.clone(), kind, e.to_string(), 0)
    };
    let catalog = dispatcher.catalog();
    let view = match origin.context_id.clone() {
        Some(id) => {
            let d = Arc::clone(dispatcher);
            let c = Arc::clone(&catalog);
            let caller = origin.caller.clone();
            match tokio::task::spawn_blocking(move || {
                crate::router::context_view(&d, &c, &caller, &id)
            })
            .await
            {
                Ok(Ok(v)) => Some(v),
                Ok(Err(e)) => return refused(&e, e.error_kind()),
                Err(e) => return refused(&e, ErrorKind::Unavailable),
            }
        }
        None => None,
    };
    if let Some(v) = view.as_ref().filter(|v| !v.allows(&tool)) {
        return refused(&v.refusal(&tool), ErrorKind::PermissionDenied);
    }
    // The built-ins name their skill in `name`: a bot's skills bound them too.
    if tool == disclosure::LOAD_SKILL || tool == disclosure::RUN_SKILL_SCRIPT {
        let named = args.get("name").and_then(Value::as_str).unwrap_or_default();
        if let Some(why) = origin.caller.skill_refusal(named) {
            return refused(&why, ErrorKind::PermissionDenied);
        }
    }
    match tool.as_str() {
        disclosure::LOAD_SKILL => match disclosure::load_skill(&catalog, &args) {
            Ok(data) => ToolResult::ok(call_id.clone(), data, 0),
            Err(e) => refused(&e, e.error_kind()),
        },
        disclosure::RUN_SKILL_SCRIPT => match disclosure::resolve_script(&catalog, &args) {
            Ok((full, call_args)) => {
                // In a context, the script's tool must be active or its skill pinned.
                let skill = ToolRef::parse(&full).map(|r| r.skill).unwrap_or_default();
                if let Some(v) = view
                    .as_ref()
                    .filter(|v| !v.allows(&full) && !v.pinned.iter().any(|p| p.name == skill))
                {
                    return refused(&v.refusal(&full), ErrorKind::PermissionDenied);
                }
                dispatcher.call_as(origin, &full, call_args, trace).await
            }
            Err(e) => refused(&e, e.error_kind()),
        },
        _ => dispatcher.call_as(origin, &tool, args, trace).await,
    }
}
