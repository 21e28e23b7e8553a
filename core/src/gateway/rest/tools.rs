//! `GET /v1/tools` and `POST /v1/tools/call`: the tools of the available skills plus the
//! built-in disclosure tools, and one call, handed to the pipeline's one entry (which
//! gates it by the caller's skills and context).

use std::time::Instant;

use serde_json::Value;
use skillbox_protocol::result::ErrorKind;
use skillbox_protocol::{Target, ToolRef};

use super::api::{CallRequest, ToolEntry, ToolList};
use crate::auth::CallOrigin;
use crate::calls::ToolCall;
use crate::gateway::web::error::ApiError;
use crate::gateway::web::request::{ok_of, Reply, Req};
use crate::gateway::Gateway;

/// `GET /v1/tools`: those of the skills the caller may use.
pub async fn list(gw: &Gateway, req: Req) -> Reply {
    let catalog = gw.calls.load.catalog();
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
    let available = gw.calls.usable_skills(&catalog, caller);
    let exec = gw.calls.load.config().exec.enabled;
    out.extend(crate::contexts::builtins::listed(&available, exec));
    Ok(ok_of(&ToolList { tools: out }))
}

/// `POST /v1/tools/call`: the call's result (a failed call is a 200 with its error kind).
/// The tool's name is parsed here, at the edge: a name that is neither `skill:tool` nor a
/// built-in is a bad request (400 `invalid_args`).
pub async fn call(gw: &Gateway, req: Req) -> Reply {
    let entered = Instant::now();
    let trace = req.traceparent();
    let caller = req.caller.clone();
    let body: CallRequest = req.json().await?;
    let target = Target::parse(&body.tool)
        .map_err(|e| ApiError::new(ErrorKind::InvalidArgs, format!("\"tool\": {e}")))?;
    let origin = CallOrigin::new(caller, body.context_id);
    let call = ToolCall::new(target, body.args, origin).traced(trace);
    let called = Instant::now();
    let result = gw.calls.pipeline.call(call).await;
    let in_call = called.elapsed();
    let reply = ok_of(&result);
    gw.calls
        .metrics
        .observe_stage("gateway", entered.elapsed().saturating_sub(in_call));
    Ok(reply)
}
