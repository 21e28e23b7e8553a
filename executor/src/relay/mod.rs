//! `skillbox-executor exec --stdio`: one tool call, or one command session, whose requests
//! and capability traffic go over the executor's own stdin/stdout, for a one-off container
//! with no network that the core attaches to. Secrets (env values, the capability token)
//! come on stdin, never on the command line.
//!
//! Newline-delimited JSON-RPC 2.0, one message per line, each at most
//! [`MAX_MESSAGE_BYTES`]:
//! 1. the core writes one request on stdin:
//!    `{"jsonrpc":"2.0","id":0,"method":"tool.execute","params":<ToolExecuteParams>}`;
//! 2. for each capability request of the tool, the executor writes on stdout
//!    `{"jsonrpc":"2.0","id":N,"method":"core.fetch"|"core.sign"|"core.readFile",
//!    "params":{"call_id","capability_token","request"}}` (N = 1, 2, …; the same methods
//!    and body as over mutual TLS) and the core answers on stdin with a response of id N
//!    ([`RelayBroker`]);
//! 3. the executor ends with `{"jsonrpc":"2.0","id":0,"result":<ToolResult>}` on stdout.
//!
//! A first request `session.exec` (id 0) starts a command session instead ([`session`]):
//! the executor answers it with id 0, then serves `session.write` and `session.close`
//! requests from the core (any ids; the core's and the executor's ids are apart, each side
//! matching only the responses to its own requests) until the session is gone or stdin
//! ends, and exits.
//!
//! Nothing else is written on stdout; logs go to stderr. A first line that is missing, too
//! long or not a `tool.execute` request is a usage error ([`RelayError::is_usage`]) and
//! nothing is written on stdout.

mod broker;
mod session;

pub use broker::{LineWriter, RelayBroker};

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use skillbox_protocol::jsonrpc::{self, DecodeError, Id, Message, Response, MAX_MESSAGE_BYTES};
use skillbox_protocol::methods::{method, ToolExecuteParams};
use skillbox_protocol::ndjson::{self, trim_line};
use skillbox_protocol::session::SessionExecParams;
use tokio::io::{AsyncBufRead, AsyncRead, AsyncWrite, BufReader};

use crate::call;
use crate::registry::Registry;
use crate::sandbox::{Sandbox, SandboxConfig, SandboxError};
use crate::server::CALLBACK_TIMEOUT;

/// Why `exec --stdio` could not run its call or report it.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// Reading the request line from stdin failed.
    #[error("cannot read the tool.execute request from stdin: {source}")]
    ReadRequest {
        /// The I/O error.
        source: std::io::Error,
    },
    /// stdin ended before a request line.
    #[error("stdin ended before the request; write one tool.execute request as the first line")]
    MissingRequest,
    /// The request line is longer than [`MAX_MESSAGE_BYTES`].
    #[error("the request line on stdin is longer than {max} bytes; send smaller arguments")]
    RequestTooLarge {
        /// The limit.
        max: usize,
    },
    /// The request line is not one JSON-RPC 2.0 message.
    #[error("the request line on stdin is not JSON-RPC 2.0 ({source}); write one tool.execute request as the first line")]
    DecodeRequest {
        /// The decoder's reason.
        source: DecodeError,
    },
    /// The request line is a response or a notification.
    #[error("the first line on stdin is not a request (it has no \"method\" or no \"id\"); write one tool.execute request with id 0")]
    NotARequest,
    /// The request line calls another method than `tool.execute` or `session.exec`.
    #[error(
        "the first line on stdin calls {method:?}; exec --stdio runs one \"tool.execute\" or \"session.exec\" request"
    )]
    WrongMethod {
        /// The method it calls.
        method: String,
    },
    /// The request's id is not 0 (ids >= 1 belong to relayed capability requests).
    #[error(
        "the first request has id {id}; use id 0 (ids >= 1 belong to relayed capability requests)"
    )]
    WrongId {
        /// The id it carries, as JSON.
        id: String,
    },
    /// The request has no params.
    #[error("the first request has no \"params\"; send call_id, capability_token, skill, tool, args and env (tool.execute) or a session's (session.exec)")]
    MissingParams,
    /// The params are not those of the method.
    #[error("the {method} params do not parse: {reason}")]
    Params {
        /// The method called.
        method: &'static str,
        /// The parser's reason, with the token and env values masked.
        reason: String,
    },
    /// The sandbox could not be set up.
    #[error("{source}")]
    Sandbox {
        /// The sandbox's reason.
        source: SandboxError,
    },
    /// The call's result could not be serialized.
    #[error("cannot encode the result: {source}")]
    EncodeResult {
        /// The serializer's reason.
        source: serde_json::Error,
    },
    /// The result line could not be written on stdout.
    #[error("cannot write the result on stdout: {source}")]
    WriteResult {
        /// The I/O error.
        source: std::io::Error,
    },
}

impl RelayError {
    /// Whether the caller got the request line wrong (exit code 2) rather than the
    /// executor failing (exit code 1).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            RelayError::ReadRequest { .. }
                | RelayError::MissingRequest
                | RelayError::RequestTooLarge { .. }
                | RelayError::DecodeRequest { .. }
                | RelayError::NotARequest
                | RelayError::WrongMethod { .. }
                | RelayError::WrongId { .. }
                | RelayError::MissingParams
                | RelayError::Params { .. }
        )
    }
}

/// Runs one call in stdio mode: reads the `tool.execute` request from `input`, runs it
/// with the skills under `skills` in a sandbox made from `config`, relays the tool's
/// capability requests over `output`/`input`, and writes the result line on `output`.
/// Returns `Ok` once the result is written, whether or not the tool succeeded.
pub async fn run_stdio<R, W>(
    input: R,
    output: W,
    skills: &Path,
    config: SandboxConfig,
) -> Result<(), RelayError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Send + 'static,
{
    let mut input = BufReader::new(input);
    let first = read_request(&mut input).await?;
    let sandbox = Sandbox::new(config).map_err(|source| RelayError::Sandbox { source })?;
    let registry = Registry::load(skills);
    let out = Arc::new(LineWriter::new(output));
    let params = match first {
        FirstRequest::Tool(params) => *params,
        FirstRequest::Session(params) => {
            return session::serve(input, out, sandbox, &registry, params).await;
        }
    };
    let broker = RelayBroker::new(Arc::clone(&out), CALLBACK_TIMEOUT);
    let answers = tokio::spawn(broker.route_answers(input));
    let result = call::execute(
        &sandbox,
        &registry,
        &broker,
        params,
        std::time::Instant::now(),
    )
    .await;
    answers.abort();
    let result =
        serde_json::to_value(&result).map_err(|source| RelayError::EncodeResult { source })?;
    out.send(&Message::Response(Response::ok(Id::Number(0), result)))
        .await
        .map_err(|source| RelayError::WriteResult { source })
}

/// The first request of `exec --stdio`: one tool call, or the start of one command session.
#[derive(Debug)]
pub enum FirstRequest {
    /// `tool.execute`.
    Tool(Box<ToolExecuteParams>),
    /// `session.exec`.
    Session(Box<SessionExecParams>),
}

/// Reads and checks the first line: one `tool.execute` or `session.exec` request with id 0.
pub async fn read_request<R>(input: &mut R) -> Result<FirstRequest, RelayError>
where
    R: AsyncBufRead + Unpin,
{
    let mut line = Vec::new();
    match read_line(input, &mut line)
        .await
        .map_err(|source| RelayError::ReadRequest { source })?
    {
        Line::Eof => Err(RelayError::MissingRequest),
        Line::TooLong => Err(RelayError::RequestTooLarge {
            max: MAX_MESSAGE_BYTES,
        }),
        Line::Complete => parse_request(trim_line(&line)),
    }
}

/// Checks one request line (without its newline): a `tool.execute` request with id 0 and
/// [`ToolExecuteParams`], or a `session.exec` request with id 0 and [`SessionExecParams`].
pub fn parse_request(line: &[u8]) -> Result<FirstRequest, RelayError> {
    let message = jsonrpc::decode(line).map_err(|source| RelayError::DecodeRequest { source })?;
    let Message::Request(request) = message else {
        return Err(RelayError::NotARequest);
    };
    let method = match request.method.as_str() {
        method::TOOL_EXECUTE => method::TOOL_EXECUTE,
        method::SESSION_EXEC => method::SESSION_EXEC,
        _ => {
            return Err(RelayError::WrongMethod {
                method: request.method,
            })
        }
    };
    if request.id != Id::Number(0) {
        return Err(RelayError::WrongId {
            id: serde_json::to_string(&request.id).unwrap_or_default(),
        });
    }
    let params = request.params.ok_or(RelayError::MissingParams)?;
    let refused = |e: serde_json::Error| RelayError::Params {
        method,
        reason: mask_secrets(e.to_string(), &params),
    };
    if method == method::SESSION_EXEC {
        let session = SessionExecParams::deserialize(&params).map_err(refused)?;
        return Ok(FirstRequest::Session(Box::new(session)));
    }
    ToolExecuteParams::deserialize(&params)
        .map(|p| FirstRequest::Tool(Box::new(p)))
        .map_err(refused)
}

/// `message` with every value under the params' `capability_token` and `envelope` (the env
/// values it carries) replaced by `***` (a parser's message may quote the value it could not take).
fn mask_secrets(message: String, params: &Value) -> String {
    fn leaves(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Null => {}
            Value::String(s) => out.push(s.clone()),
            Value::Bool(_) | Value::Number(_) => out.push(v.to_string()),
            Value::Array(items) => items.iter().for_each(|i| leaves(i, out)),
            Value::Object(map) => map.values().for_each(|i| leaves(i, out)),
        }
    }
    let mut secrets = Vec::new();
    leaves(&params["capability_token"], &mut secrets);
    leaves(&params["envelope"], &mut secrets);
    secrets
        .iter()
        .filter(|s| !s.is_empty())
        .fold(message, |m, s| m.replace(s.as_str(), "***"))
}

/// What [`read_line`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// The input ended before any byte.
    Eof,
    /// One line of at most [`MAX_MESSAGE_BYTES`] (the newline excluded).
    Complete,
    /// A longer line, skipped up to its newline.
    TooLong,
}

/// Reads one line into `buf` (cleared first), never holding more than
/// [`MAX_MESSAGE_BYTES`] + 1 bytes of it; a longer line is skipped to its newline.
async fn read_line<R>(input: &mut R, buf: &mut Vec<u8>) -> std::io::Result<Line>
where
    R: AsyncBufRead + Unpin,
{
    match ndjson::read_line(input, buf, MAX_MESSAGE_BYTES).await? {
        ndjson::Line::Eof => Ok(Line::Eof),
        ndjson::Line::Complete { .. } => Ok(Line::Complete),
        ndjson::Line::TooLong { .. } => {
            if !buf.ends_with(b"\n") {
                ndjson::skip_line(input).await?;
            }
            buf.clear();
            Ok(Line::TooLong)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(v: serde_json::Value) -> Vec<u8> {
        v.to_string().into_bytes()
    }

    fn request(params: serde_json::Value) -> serde_json::Value {
        json!({"jsonrpc": "2.0", "id": 0, "method": "tool.execute", "params": params})
    }

    fn params() -> serde_json::Value {
        json!({"call_id": "c1", "capability_token": "tok", "skill": "s", "tool": "t",
               "args": {"a": 1}, "envelope": {"env": {"API_KEY": "k"}}})
    }

    #[test]
    fn parse_request_accepts_tool_execute_with_id_0() {
        let Ok(FirstRequest::Tool(p)) = parse_request(&line(request(params()))) else {
            panic!("not a tool call");
        };
        assert_eq!(p.call_id, "c1");
        assert_eq!(p.capability_token.0, "tok");
        assert_eq!((p.skill.as_str(), p.tool.as_str()), ("s", "t"));
        assert_eq!(p.args, json!({"a": 1}));
        assert_eq!(p.envelope.env["API_KEY"].0, "k");
    }

    #[test]
    fn parse_request_refuses_each_bad_first_line_as_usage() {
        let mut wrong_id = request(params());
        wrong_id["id"] = json!(7);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not json".to_vec(), "not JSON-RPC 2.0"),
            (
                line(json!({"jsonrpc": "2.0", "id": 0, "result": 1})),
                "not a request",
            ),
            (
                line(json!({"jsonrpc": "2.0", "id": 0, "method": "tool.list", "params": {}})),
                "calls \"tool.list\"",
            ),
            (line(wrong_id), "has id 7"),
            (
                line(json!({"jsonrpc": "2.0", "id": 0, "method": "tool.execute"})),
                "no \"params\"",
            ),
            (
                line(request(json!({"call_id": "c1"}))),
                "params do not parse",
            ),
        ];
        for (bytes, expected) in cases {
            let err = parse_request(&bytes).unwrap_err();
            assert!(err.is_usage(), "{err}");
            assert!(
                err.to_string().contains(expected),
                "{err} lacks {expected:?}"
            );
        }
    }

    #[test]
    fn parse_request_masks_secrets_in_params_error() {
        let mut p = params();
        p["envelope"]["env"] = json!({"API_KEY": ["sk-live-123"]});
        p["capability_token"] = json!(["tok-456"]);
        let err = parse_request(&line(request(p.clone())))
            .unwrap_err()
            .to_string();
        assert!(err.contains("params do not parse"), "{err}");
        assert!(!err.contains("tok-456"), "{err}");
        p["capability_token"] = json!("tok");
        p["envelope"]["env"] = json!("sk-live-123");
        let err = parse_request(&line(request(p))).unwrap_err().to_string();
        assert!(err.contains("invalid type: string \"***\""), "{err}");
        assert!(!err.contains("sk-live-123"), "{err}");
    }

    #[tokio::test]
    async fn read_request_refuses_missing_and_oversize_line() {
        let mut empty: &[u8] = b"";
        assert!(matches!(
            read_request(&mut empty).await,
            Err(RelayError::MissingRequest)
        ));
        let mut big = BufReader::new(std::io::Cursor::new(vec![b' '; MAX_MESSAGE_BYTES + 10]));
        assert!(matches!(
            read_request(&mut big).await,
            Err(RelayError::RequestTooLarge { .. })
        ));
    }

    #[tokio::test]
    async fn read_line_skips_oversize_line_and_reads_the_next() {
        let mut bytes = vec![b'x'; MAX_MESSAGE_BYTES + 3];
        bytes.extend_from_slice(b"\n{\"next\":1}\n");
        let mut input = BufReader::new(std::io::Cursor::new(bytes));
        let mut buf = Vec::new();
        assert_eq!(
            read_line(&mut input, &mut buf).await.unwrap(),
            Line::TooLong
        );
        assert_eq!(
            read_line(&mut input, &mut buf).await.unwrap(),
            Line::Complete
        );
        assert_eq!(trim_line(&buf), b"{\"next\":1}");
        assert_eq!(read_line(&mut input, &mut buf).await.unwrap(), Line::Eof);
    }
}
