//! The core's side of `skillbox-executor exec --stdio` in a per-call container: attach,
//! start, write the `tool.execute` request, answer each `core.*` request the container
//! writes with the channel's callback handler, and take the `id: 0` response as the
//! result. stdout is split into lines as it comes, each line at most
//! [`jsonrpc::MAX_MESSAGE_BYTES`].

use bollard::container::LogOutput;
use bollard::query_parameters::AttachContainerOptionsBuilder;
use futures_util::StreamExt;
use skillbox_protocol::jsonrpc::{self, Id, Message, Request, Response};
use skillbox_protocol::methods::{method, ToolExecuteParams};
use skillbox_protocol::ndjson::{self, LineSplitter};
use skillbox_protocol::result::ToolResult;
use tokio::io::AsyncWrite;

use super::{ContainerRunner, OneOffError};

/// Most stderr kept for an error message.
const STDERR_TAIL: usize = 4096;

impl ContainerRunner {
    /// Attaches, starts, sends the request, answers capability requests until the result.
    pub(super) async fn converse(
        &self,
        id: &str,
        params: &ToolExecuteParams,
    ) -> Result<ToolResult, OneOffError> {
        let options = AttachContainerOptionsBuilder::new()
            .stream(true)
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .build();
        let mut attached = self
            .engine
            .docker
            .attach_container(id, Some(options))
            .await
            .map_err(|source| OneOffError::Api {
                step: "attaching to the call's container",
                source,
            })?;
        self.engine
            .docker
            .start_container(id, None)
            .await
            .map_err(|source| OneOffError::Api {
                step: "starting the call's container",
                source,
            })?;
        let request = Message::Request(Request {
            id: Id::Number(0),
            method: method::TOOL_EXECUTE.to_string(),
            params: Some(
                serde_json::to_value(params).map_err(|e| OneOffError::Protocol(e.to_string()))?,
            ),
        });
        write_line(&mut attached.input, &request).await?;

        let mut stdout = LineSplitter::new(jsonrpc::MAX_MESSAGE_BYTES);
        let mut stderr = Vec::new();
        while let Some(chunk) = attached.output.next().await {
            let chunk = chunk.map_err(|source| OneOffError::Api {
                step: "reading the call's container",
                source,
            })?;
            match chunk {
                LogOutput::StdErr { message } => {
                    stderr.extend_from_slice(&message);
                    if stderr.len() > 2 * STDERR_TAIL {
                        stderr.drain(..stderr.len() - STDERR_TAIL);
                    }
                }
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    for line in stdout
                        .push(&message)
                        .map_err(|e| OneOffError::Protocol(e.to_string()))?
                    {
                        if let Some(result) = self.on_line(&line, &mut attached.input).await? {
                            return Ok(result);
                        }
                    }
                }
                LogOutput::StdIn { .. } => {}
            }
        }
        let tail = String::from_utf8_lossy(&stderr);
        let skip = tail.chars().count().saturating_sub(STDERR_TAIL);
        Err(OneOffError::NoResult {
            exit_code: -1,
            stderr: tail.chars().skip(skip).collect(),
        })
    }

    /// One line from the container: a capability request (answered) or the result.
    async fn on_line(
        &self,
        line: &[u8],
        input: &mut (impl AsyncWrite + Unpin),
    ) -> Result<Option<ToolResult>, OneOffError> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        match jsonrpc::decode(line) {
            Ok(Message::Response(r)) if r.id == Some(Id::Number(0)) => {
                let value = r.outcome.map_err(|e| OneOffError::Protocol(e.message))?;
                serde_json::from_value(value)
                    .map(Some)
                    .map_err(|e| OneOffError::Protocol(format!("not a tool result: {e}")))
            }
            Ok(Message::Request(req)) => {
                let outcome = self.callbacks.handle(&req.method, req.params).await;
                let response = match outcome {
                    Ok(v) => Response::ok(req.id, v),
                    Err(e) => Response::error(Some(req.id), e),
                };
                write_line(input, &Message::Response(response)).await?;
                Ok(None)
            }
            Ok(_) => Err(OneOffError::Protocol(shorten(line))),
            Err(e) => Err(OneOffError::Protocol(format!("{e}: {}", shorten(line)))),
        }
    }
}

async fn write_line(
    input: &mut (impl AsyncWrite + Unpin),
    message: &Message,
) -> Result<(), OneOffError> {
    ndjson::write_message(input, message)
        .await
        .map_err(OneOffError::Stdin)
}

fn shorten(line: &[u8]) -> String {
    String::from_utf8_lossy(line).chars().take(200).collect()
}
