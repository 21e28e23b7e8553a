//! `protocol: jsonrpc` (docs/skill-format.md): one `tool.invoke` request on stdin, capability
//! requests (ids >= 1) answered on stdin, and one final response (id 0) on stdout.

use serde_json::Value;
use skillbox_protocol::jsonrpc::{self, code, ErrorObject, Id, Message, Request, Response};
use skillbox_protocol::methods::{method, Capability, ToolInvokeParams};
use skillbox_protocol::ndjson::{self, trim_line, Line};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use super::output::Budget;
use super::StdioFailure;
use crate::broker::{CallInfo, CapabilityBroker};

/// The line the executor writes first.
pub fn invoke_line(call: &CallInfo, args: &Value) -> String {
    let params = ToolInvokeParams {
        tool: call.tool.clone(),
        args: args.clone(),
        call_id: call.call_id.clone(),
    };
    let msg = Message::Request(Request {
        id: Id::Number(0),
        method: method::TOOL_INVOKE.into(),
        params: serde_json::to_value(params).ok(),
    });
    let mut line = msg.to_line();
    line.push('\n');
    line
}

/// Runs the conversation; returns the tool's final answer (its result or its error).
pub async fn converse<W, R, B>(
    mut stdin: W,
    stdout: R,
    call: &CallInfo,
    args: &Value,
    broker: &B,
    budget: &Budget,
) -> Result<Result<Value, ErrorObject>, StdioFailure>
where
    W: AsyncWrite + Unpin,
    R: AsyncRead + Unpin,
    B: CapabilityBroker,
{
    // A tool that exits without reading its request is reported by its exit, not here.
    let _ = stdin.write_all(invoke_line(call, args).as_bytes()).await;
    let _ = stdin.flush().await;
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    let mut number = 0usize;
    loop {
        number += 1;
        let read = ndjson::read_line(&mut reader, &mut line, jsonrpc::MAX_MESSAGE_BYTES)
            .await
            .map_err(|e| StdioFailure::Protocol(format!("reading stdout: {e}")))?;
        let (Line::Complete { bytes } | Line::TooLong { bytes }) = read else {
            return Err(StdioFailure::Eof);
        };
        if !budget.charge(bytes) {
            return Err(StdioFailure::OutputLimit);
        }
        if matches!(read, Line::TooLong { .. }) {
            return Err(StdioFailure::Protocol(format!(
                "stdout line {number} is longer than {} bytes",
                jsonrpc::MAX_MESSAGE_BYTES
            )));
        }
        let text = trim_line(&line);
        if text.is_empty() {
            continue;
        }
        let msg = jsonrpc::decode(text).map_err(|e| {
            StdioFailure::Protocol(format!(
                "stdout line {number} is not JSON-RPC 2.0 ({e}); write logs to stderr: {}",
                preview(text)
            ))
        })?;
        match msg {
            Message::Response(Response {
                id: Some(Id::Number(0)),
                outcome,
            }) => return Ok(outcome),
            Message::Request(req) => {
                let reply = answer(req, call, broker).await;
                let _ = ndjson::write_message(&mut stdin, &Message::Response(reply)).await;
            }
            Message::Notification(_) => {}
            Message::Response(r) => {
                return Err(StdioFailure::Protocol(format!(
                    "stdout line {number}: a response with id {:?}; the final answer uses id 0",
                    r.id
                )))
            }
        }
    }
}

async fn answer<B: CapabilityBroker>(req: Request, call: &CallInfo, broker: &B) -> Response {
    if req.id == Id::Number(0) {
        return Response::error(
            Some(req.id),
            ErrorObject::new(
                code::INVALID_REQUEST,
                "id 0 belongs to tool.invoke; use ids >= 1",
            ),
        );
    }
    if Capability::parse(&req.method).is_none() {
        return Response::error(
            Some(req.id),
            ErrorObject::new(
                code::METHOD_NOT_FOUND,
                format!(
                    "unknown capability {:?}; available: {}",
                    req.method,
                    Capability::names()
                ),
            ),
        );
    }
    match broker.request(call, &req.method, req.params).await {
        Ok(v) => Response::ok(req.id, v),
        Err(e) => Response::error(Some(req.id), e),
    }
}

fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut s: String = text.chars().take(120).collect();
    if text.chars().count() > 120 {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::OneShotBroker;
    use serde_json::json;

    use crate::broker::test_support::sample_call as call;

    async fn run(tool_output: &str) -> (Result<Result<Value, ErrorObject>, StdioFailure>, String) {
        let mut written = Vec::new();
        let budget = Budget::new(1 << 20);
        let r = converse(
            &mut written,
            tool_output.as_bytes(),
            &call(),
            &json!({"a": 1}),
            &OneShotBroker,
            &budget,
        )
        .await;
        (r, String::from_utf8(written).unwrap())
    }

    #[tokio::test]
    async fn converse_returns_final_result_and_sends_invoke() {
        let (r, written) = run("{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"ok\":true}}\n").await;
        assert_eq!(r.unwrap().unwrap(), json!({"ok": true}));
        let first: Value = serde_json::from_str(written.lines().next().unwrap()).unwrap();
        assert_eq!(first["method"], "tool.invoke");
        assert_eq!(first["params"]["args"], json!({"a": 1}));
        assert_eq!(first["params"]["call_id"], "c1");
    }

    #[tokio::test]
    async fn converse_answers_capability_with_unavailable_in_one_shot_mode() {
        let out = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"fetch\",\"params\":{\"url\":\"https://x\"}}\n\
                   {\"jsonrpc\":\"2.0\",\"id\":0,\"result\":1}\n";
        let (r, written) = run(out).await;
        assert!(r.unwrap().is_ok());
        let reply: Value = serde_json::from_str(written.lines().nth(1).unwrap()).unwrap();
        assert_eq!(reply["id"], 1);
        assert_eq!(reply["error"]["code"], code::CAPABILITY_UNAVAILABLE);
    }

    #[tokio::test]
    async fn converse_rejects_non_jsonrpc_line() {
        let (r, _) = run("hello world\n").await;
        assert!(matches!(r, Err(StdioFailure::Protocol(ref m)) if m.contains("not JSON-RPC")));
    }

    #[tokio::test]
    async fn converse_reports_eof_before_final_answer() {
        let (r, _) = run("").await;
        assert!(matches!(r, Err(StdioFailure::Eof)));
    }

    #[tokio::test]
    async fn converse_refuses_unknown_capability() {
        let out = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"exec\"}\n{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":1}\n";
        let (_, written) = run(out).await;
        let reply: Value = serde_json::from_str(written.lines().nth(1).unwrap()).unwrap();
        assert_eq!(reply["error"]["code"], code::METHOD_NOT_FOUND);
    }

    #[tokio::test]
    async fn converse_stops_at_output_budget() {
        let mut written = Vec::new();
        let budget = Budget::new(10);
        let out = format!("{}\n", "x".repeat(100));
        let r = converse(
            &mut written,
            out.as_bytes(),
            &call(),
            &json!({}),
            &OneShotBroker,
            &budget,
        )
        .await;
        assert!(matches!(r, Err(StdioFailure::OutputLimit)));
    }
}
