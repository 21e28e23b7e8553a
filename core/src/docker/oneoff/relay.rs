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
use skillbox_protocol::result::ToolResult;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::{ContainerRunner, OneOffError};

/// Most stderr kept for an error message.
const STDERR_TAIL: usize = 4096;

/// stdout bytes split into lines, each line bounded.
#[derive(Debug, Default)]
pub struct LineBuffer {
    buf: Vec<u8>,
    scanned: usize,
}

impl LineBuffer {
    /// Adds bytes; the complete lines now in the buffer, or an error for a line over the
    /// limit.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Vec<u8>>, OneOffError> {
        self.buf.extend_from_slice(bytes);
        let mut lines = Vec::new();
        while let Some(offset) = self.buf[self.scanned..].iter().position(|b| *b == b'\n') {
            let end = self.scanned + offset;
            lines.push(self.buf.drain(..=end).take(end).collect());
            self.scanned = 0;
        }
        self.scanned = self.buf.len();
        if self.buf.len() > jsonrpc::MAX_MESSAGE_BYTES {
            return Err(OneOffError::Protocol(format!(
                "a line over {} bytes",
                jsonrpc::MAX_MESSAGE_BYTES
            )));
        }
        Ok(lines)
    }
}

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

        let mut stdout = LineBuffer::default();
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
                    for line in stdout.push(&message)? {
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
    let mut line = message.to_line();
    line.push('\n');
    input
        .write_all(line.as_bytes())
        .await
        .map_err(OneOffError::Stdin)?;
    input.flush().await.map_err(OneOffError::Stdin)
}

fn shorten(line: &[u8]) -> String {
    String::from_utf8_lossy(line).chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_buffer_splits_lines_across_chunks() {
        let mut b = LineBuffer::default();
        assert!(b.push(b"{\"a\":").unwrap().is_empty());
        let lines = b.push(b"1}\n{\"b\":2}\n{\"c\"").unwrap();
        assert_eq!(lines, vec![b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec()]);
        assert_eq!(b.push(b":3}\n").unwrap(), vec![b"{\"c\":3}".to_vec()]);
    }

    #[test]
    fn line_buffer_refuses_a_line_over_the_limit_but_not_many_small_ones() {
        let mut b = LineBuffer::default();
        let small = vec![b'x'; 1024];
        for _ in 0..(jsonrpc::MAX_MESSAGE_BYTES / 1024) {
            let mut chunk = small.clone();
            chunk.push(b'\n');
            assert_eq!(b.push(&chunk).unwrap().len(), 1);
        }
        let mut b = LineBuffer::default();
        let err = b
            .push(&vec![b'x'; jsonrpc::MAX_MESSAGE_BYTES + 1])
            .unwrap_err();
        assert!(err.to_string().contains("a line over"), "{err}");
    }
}
