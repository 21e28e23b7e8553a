//! A command session over stdio ([`super`]'s second mode), for a one-off container that
//! holds one session: the first request (`session.exec`, id 0) starts it and is answered
//! with id 0; then the core's `session.write` and `session.close` requests on stdin are
//! served, each answered with its own id, while the session's file callbacks go the other
//! way through the [`RelayBroker`]. The process ends when no session is awaited any more
//! ([`Sessions::any_awaited`]: the end was answered, it was closed, or its idle or
//! lifetime limit ended it) or when stdin ends; its processes end with it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use skillbox_protocol::jsonrpc::{code, ErrorObject, Id, Message, Request, Response};
use skillbox_protocol::methods::method;
use skillbox_protocol::rpc::{RpcMethod, SessionClose, SessionWrite};
use skillbox_protocol::session::SessionExecParams;
use tokio::io::AsyncBufRead;
use tokio::sync::mpsc;

use super::{LineWriter, RelayBroker, RelayError};
use crate::registry::Registry;
use crate::sandbox::Sandbox;
use crate::server::CALLBACK_TIMEOUT;
use crate::session::Sessions;

/// How often the process looks whether its session is still awaited.
const AWAITED_CHECK: Duration = Duration::from_millis(250);

/// Serves the session `first` starts until it is no longer awaited or `input` ends.
pub(super) async fn serve<R>(
    input: R,
    out: Arc<LineWriter>,
    sandbox: Sandbox,
    registry: &Registry,
    first: Box<SessionExecParams>,
) -> Result<(), RelayError>
where
    R: AsyncBufRead + Unpin + Send + 'static,
{
    let idle = Duration::from_millis(first.limits.idle_timeout_ms);
    let broker = Arc::new(RelayBroker::new(Arc::clone(&out), CALLBACK_TIMEOUT));
    let (requests, mut incoming) = mpsc::unbounded_channel();
    let lines = tokio::spawn(broker.route_lines(input, Some(requests)));
    let sessions = Arc::new(Sessions::new(sandbox, broker));
    let started = sessions.exec(registry, *first).await;
    let answer = match started {
        Ok(answer) => Response::ok(Id::Number(0), to_value(&answer)),
        Err(e) => Response::error(Some(Id::Number(0)), e.into()),
    };
    send(&out, answer).await?;
    let mut check = tokio::time::interval(AWAITED_CHECK);
    loop {
        tokio::select! {
            request = incoming.recv() => {
                let Some(request) = request else { break };
                // Each request in a task of its own: a write waiting out its yield must not
                // hold up a close.
                let (sessions, out) = (Arc::clone(&sessions), Arc::clone(&out));
                tokio::spawn(async move {
                    let answer = handle(&sessions, request).await;
                    if let Err(e) = send(&out, answer).await {
                        tracing::warn!(error = %e, "cannot answer the core");
                    }
                });
            }
            _ = check.tick() => {
                if !sessions.any_awaited(idle) {
                    break;
                }
            }
        }
    }
    lines.abort();
    sessions.end_all().await;
    Ok(())
}

/// Answers one request of the core.
async fn handle(sessions: &Sessions<RelayBroker>, request: Request) -> Response {
    let outcome = match request.method.as_str() {
        method::SESSION_WRITE => match decode::<SessionWrite>(request.params) {
            Ok(p) => sessions.write(p).await.map(|a| to_value(&a)).map_err(Into::into),
            Err(e) => Err(e),
        },
        method::SESSION_CLOSE => match decode::<SessionClose>(request.params) {
            Ok(p) => Ok(to_value(&sessions.close(p).await)),
            Err(e) => Err(e),
        },
        other => Err(ErrorObject::new(
            code::METHOD_NOT_FOUND,
            format!(
                "unknown method {other:?}; a session's container serves \"session.write\" and \"session.close\""
            ),
        )),
    };
    match outcome {
        Ok(value) => Response::ok(request.id, value),
        Err(e) => Response::error(Some(request.id), e),
    }
}

/// The params of `M`; a refusal names the method.
fn decode<M: RpcMethod>(params: Option<Value>) -> Result<M::Params, ErrorObject> {
    serde_json::from_value(params.unwrap_or(Value::Null))
        .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, format!("{} params: {e}", M::NAME)))
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

async fn send(out: &LineWriter, response: Response) -> Result<(), RelayError> {
    out.send(&Message::Response(response))
        .await
        .map_err(|source| RelayError::WriteResult { source })
}
