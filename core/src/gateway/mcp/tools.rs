//! `tools/list` and `tools/call`: each skill tool as the MCP tool `<skill>.<tool>` (MCP
//! names have no colon), plus the built-in `load_skill` and `run_skill_script`. A call
//! runs through the same path as `POST /v1/tools/call` (context gate, pipeline) and its
//! result becomes a `CallToolResult`.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use skillbox_protocol::result::ToolResult;
use skillbox_protocol::skill::{Catalog, Security, Skill, Tool};
use skillbox_protocol::{Target, ToolRef};

use super::elicitation::{self, Next};
use super::eras::Era;
use super::errors::McpError;
use crate::auth::{CallOrigin, Caller};
use crate::calls::ToolCall;
use crate::contexts::ContextView;
use crate::gateway::Gateway;

/// The MCP name of `skill:tool`.
pub fn mcp_name(skill: &str, tool: &str) -> String {
    format!("{skill}.{tool}")
}

/// The tool an MCP name names: a built-in's own name, or `skill:tool` for `skill.tool`
/// (split at the last dot: tool names have none). `Err` says what is missing, or that the
/// caller may not use the skill (before anything about the skill is looked up).
pub fn resolve(catalog: &Catalog, caller: &Caller, name: &str) -> Result<Target, String> {
    if let Some(builtin) = Target::parse(name).ok().filter(Target::is_builtin) {
        return Ok(builtin);
    }
    let Some((skill, tool)) = name.rsplit_once('.') else {
        return Err("tool names are <skill>.<tool> (or a built-in: load_skill, run_skill_script, exec_command, write_stdin, close_context)".into());
    };
    if let Some(why) = caller.skill_refusal(skill) {
        return Err(why);
    }
    let Some(s) = catalog.get(skill) else {
        return Err(format!("no skill named {skill:?}"));
    };
    if s.tool(tool).is_none() {
        return Err(format!("skill {skill:?} has no tool {tool:?}"));
    }
    Ok(Target::Tool(ToolRef::new(skill, tool)))
}

/// The annotations of a skill tool: its security level, and whether its skill may reach
/// the network.
pub fn annotations(skill: &Skill, tool: &Tool) -> Value {
    let read = tool.security == Security::Read;
    json!({
        "readOnlyHint": read,
        "destructiveHint": !read,
        "openWorldHint": skill.permissions.is_network(),
    })
}

/// The context `context_id` as it is now, once `caller` is let in (a blocking store read).
pub async fn context(
    gw: &Gateway,
    caller: &Caller,
    context_id: &str,
) -> Result<ContextView, McpError> {
    let d = Arc::clone(&gw.calls.pipeline);
    let id = context_id.to_string();
    let caller = caller.clone();
    match tokio::task::spawn_blocking(move || d.context_view(&caller, &id)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(McpError::BadParams(e.to_string())),
        Err(e) => Err(McpError::Internal(e.to_string())),
    }
}

/// `tools/list`: every tool of the caller's skills (or the context's active ones), sorted
/// by name, the built-ins last.
pub async fn list(gw: &Gateway, origin: &CallOrigin) -> Result<Value, McpError> {
    let caller = &origin.caller;
    let view = match origin.context_id.as_deref() {
        Some(id) => Some(context(gw, caller, id).await?),
        None => None,
    };
    let allowed = |t: &Target| view.as_ref().is_none_or(|v| v.allows(t));
    let catalog = gw.calls.load.catalog();
    let mut tools: Vec<Value> = Vec::new();
    for skill in (catalog.skills.iter()).filter(|s| caller.may_use_skill(&s.name)) {
        for tool in &skill.tools {
            if !allowed(&Target::Tool(ToolRef::new(&skill.name, &tool.name))) {
                continue;
            }
            let mut listed = json!({
                "name": mcp_name(&skill.name, &tool.name),
                "title": format!("{} {}", skill.name, tool.name),
                "description": tool.description,
                "inputSchema": input_schema(&tool.parameters),
                "annotations": annotations(skill, tool),
            });
            if let Some(schema) = &tool.output_schema {
                listed["outputSchema"] = schema.clone();
            }
            tools.push(listed);
        }
    }
    tools.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let available = gw.calls.usable_skills(&catalog, caller);
    // The command sessions need a context: listed on /mcp/{context_id} only.
    let exec = gw.calls.load.config().exec.enabled && origin.context_id.is_some();
    for builtin in crate::contexts::builtins::ALL {
        if (builtin.session && !exec) || !allowed(&builtin.target) {
            continue;
        }
        tools.push(json!({
            "name": builtin.name(),
            "description": builtin.description,
            "inputSchema": (builtin.schema)(&available),
            "annotations": builtin.annotations(),
        }));
    }
    Ok(json!({ "tools": tools }))
}

/// A tool's `parameters` as an MCP `inputSchema`, which must be an object schema: a
/// schema without a `type` gets `"type": "object"`.
fn input_schema(parameters: &Value) -> Value {
    match parameters {
        Value::Object(p) if p.contains_key("type") => parameters.clone(),
        Value::Object(p) => {
            let mut p = p.clone();
            p.insert("type".into(), "object".into());
            Value::Object(p)
        }
        _ => json!({"type": "object"}),
    }
}

/// The `name` and `arguments` of a `tools/call`.
pub fn call_params(params: &Map<String, Value>) -> Result<(String, Value), McpError> {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err(McpError::BadParams(
            "tools/call needs \"name\" (a string)".into(),
        ));
    };
    let args = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(a @ Value::Object(_)) => a.clone(),
        Some(_) => {
            return Err(McpError::BadParams(
                "tools/call \"arguments\" must be an object".into(),
            ))
        }
    };
    Ok((name.to_string(), args))
}

/// `tools/call`: the tool runs as `POST /v1/tools/call` runs it (with the context when the
/// endpoint names one), its result as MCP's `CallToolResult`. A client that takes URL
/// elicitation gets each approval the call waits for as a link first ([`elicitation`]).
pub async fn call(
    gw: &Gateway,
    asked: &super::Asked<'_>,
    era: &Era,
    params: &Map<String, Value>,
) -> Result<Value, McpError> {
    let origin = asked.origin;
    let (name, args) = call_params(params)?;
    let catalog = gw.calls.load.catalog();
    let target = resolve(&catalog, &origin.caller, &name).map_err(|why| McpError::UnknownTool {
        name: name.clone(),
        why,
    })?;
    if !era.client_takes_url_elicitation() {
        let call = ToolCall::new(target, args, origin.clone()).traced(asked.trace.clone());
        let result = gw.calls.pipeline.call(call).await;
        return Ok(call_result(&result, origin.context_id.as_deref()));
    }
    // A waiting call is resumed only by the caller that started it, in the same context.
    let resumed = params
        .get("requestState")
        .and_then(Value::as_str)
        .and_then(|state| gw.mcp_waiting.take(state, origin, &name, &args));
    let waiting = resumed.unwrap_or_else(|| {
        let call = ToolCall::new(target, args, origin.clone()).traced(asked.trace.clone());
        elicitation::start(gw, &name, call)
    });
    match elicitation::next(waiting).await {
        Next::Done(result) => Ok(call_result(&result, origin.context_id.as_deref())),
        Next::Asked(record, waiting) => {
            let state = elicitation::new_state()?;
            let answer = elicitation::input_required(&record, &state, &asked.console_base);
            let keep = std::time::Duration::from_millis(gw.calls.approvals.policy().timeout_ms);
            gw.mcp_waiting.put(state, *waiting, keep);
            Ok(answer)
        }
    }
}

/// A tool result as MCP's `CallToolResult`: success → the data as `structuredContent`
/// (when an object) and as a JSON text block, then a `resource_link` for each file of
/// context `context_id` the call created or changed; failure → `isError` with the
/// message the REST call gives.
pub fn call_result(result: &ToolResult, context_id: Option<&str>) -> Value {
    let mut meta = json!({"dev.skillbox/callId": result.call_id});
    if let Some(id) = &result.approval_id {
        meta["dev.skillbox/approvalId"] = id.clone().into();
    }
    if !result.success {
        if let Some(kind) = result.error_kind {
            meta["dev.skillbox/errorKind"] = json!(kind);
        }
        let message = result
            .error
            .clone()
            .unwrap_or_else(|| "the call failed".into());
        return json!({
            "content": [{"type": "text", "text": message}],
            "isError": true,
            "_meta": meta,
        });
    }
    let data = result.data.clone().unwrap_or(Value::Null);
    let mut content = vec![json!({"type": "text", "text": data.to_string()})];
    if let (Some(id), Some(files)) = (context_id, &result.files) {
        content.extend(files.iter().map(|f| {
            json!({
                "type": "resource_link",
                "uri": super::context_files::uri(id, &f.path),
                "name": f.path,
                "mimeType": crate::contexts::files::content_type(&f.path),
                "size": f.size,
            })
        }));
    }
    let mut out = json!({
        "content": content,
        "isError": false,
        "_meta": meta,
    });
    if data.is_object() {
        out["structuredContent"] = data;
    }
    out
}
