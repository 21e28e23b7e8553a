//! The core's side of `skillbox-executor exec --stdio` in a per-call container: attach and
//! start it, then talk JSON-RPC over its stdin/stdout ([`Peer`]): the core's requests (a
//! call's `tool.execute`, a session's `session.exec`, `session.write`, `session.close`)
//! are answered by id, and each `core.*` request the container writes is answered with the
//! channel's callback handler. stdout is split into lines as it comes, each line at most
//! [`jsonrpc::MAX_MESSAGE_BYTES`]; the tail of stderr is kept for the error of a container
//! that ended without an answer.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use bollard::container::{AttachContainerResults, LogOutput};
use bollard::query_parameters::AttachContainerOptionsBuilder;
use futures_util::StreamExt;
use serde_json::Value;
use skillbox_channel::server::RpcHandler;
use skillbox_protocol::jsonrpc::{self, ErrorObject, Id, Message, Request, Response};
use skillbox_protocol::methods::{method, ToolExecuteParams};
use skillbox_protocol::ndjson::{self, LineSplitter};
use skillbox_protocol::result::ToolResult;
use tokio::io::AsyncWrite;
use tokio::sync::{oneshot, watch};

use super::{ContainerRunner, OneOffError};

/// Most stderr kept for an error message.
const STDERR_TAIL: usize = 4096;

impl ContainerRunner {
    /// Attaches to the container `id` and starts it: a peer over its stdio.
    pub(super) async fn attach_and_start(&self, id: &str) -> Result<Peer, OneOffError> {
        let options = AttachContainerOptionsBuilder::new()
            .stream(true)
            .stdin(true)
            .stdout(true)
            .stderr(true)
            .build();
        let attached = self
            .engine
            .docker
            .attach_container(id, Some(options))
            .await
            .map_err(|source| OneOffError::Api {
                step: "attaching to the container",
                source,
            })?;
        self.engine
            .docker
            .start_container(id, None)
            .await
            .map_err(|source| OneOffError::Api {
                step: "starting the container",
                source,
            })?;
        Ok(Peer::start(attached, Arc::clone(&self.callbacks)))
    }

    /// Attaches, starts, sends the request, answers capability requests until the result.
    pub(super) async fn converse(
        &self,
        id: &str,
        params: &ToolExecuteParams,
    ) -> Result<ToolResult, OneOffError> {
        let peer = self.attach_and_start(id).await?;
        let params =
            serde_json::to_value(params).map_err(|e| OneOffError::Protocol(e.to_string()))?;
        let value = peer
            .call(method::TOOL_EXECUTE, params)
            .await
            .map_err(PeerError::into_one_off)?;
        serde_json::from_value(value)
            .map_err(|e| OneOffError::Protocol(format!("not a tool result: {e}")))
    }
}

/// Why a request to the container got no result.
#[derive(Debug)]
pub enum PeerError {
    /// The executor in it answered with an error.
    Rpc(ErrorObject),
    /// Its stdout ended (it exited) before the answer; the tail of its stderr.
    Ended(String),
    /// It wrote something that is not the relay protocol.
    Protocol(String),
    /// Writing to its stdin failed.
    Stdin(std::io::Error),
}

impl PeerError {
    /// The error of a tool call in a container.
    pub fn into_one_off(self) -> OneOffError {
        match self {
            PeerError::Rpc(e) => OneOffError::Protocol(e.message),
            PeerError::Ended(stderr) => OneOffError::NoResult {
                exit_code: -1,
                stderr,
            },
            PeerError::Protocol(m) => OneOffError::Protocol(m),
            PeerError::Stdin(e) => OneOffError::Stdin(e),
        }
    }
}

impl std::fmt::Display for PeerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerError::Rpc(e) => write!(f, "{} ({})", e.message, e.code),
            PeerError::Ended(stderr) if stderr.trim().is_empty() => {
                f.write_str("the container exited")
            }
            PeerError::Ended(stderr) => write!(f, "the container exited; its stderr: {stderr}"),
            PeerError::Protocol(m) => {
                write!(
                    f,
                    "the container wrote something that is not the relay protocol: {m}"
                )
            }
            PeerError::Stdin(e) => write!(f, "writing to the container: {e}"),
        }
    }
}

type Input = tokio::sync::Mutex<Pin<Box<dyn AsyncWrite + Send>>>;

/// What the reader and the requesters share.
struct Shared {
    input: Input,
    waiters: Mutex<HashMap<i64, oneshot::Sender<Result<Value, ErrorObject>>>>,
    /// Set once stdout ended or broke the protocol: why no answer will come.
    ended: watch::Sender<Option<PeerError>>,
    stderr: Mutex<Vec<u8>>,
}

/// JSON-RPC over a container's attached stdio (see the module docs). The core's requests
/// take ids 0, 1, 2, … (the first one, 0, is what `exec --stdio` reads first); the
/// container's own requests are answered as they come. Dropping the peer stops reading.
pub struct Peer {
    shared: Arc<Shared>,
    next_id: AtomicI64,
    reader: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer").finish_non_exhaustive()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Peer {
    fn start(attached: AttachContainerResults, callbacks: Arc<dyn RpcHandler>) -> Self {
        let shared = Arc::new(Shared {
            input: tokio::sync::Mutex::new(attached.input),
            waiters: Mutex::default(),
            ended: watch::channel(None).0,
            stderr: Mutex::default(),
        });
        let reader = tokio::spawn(read(Arc::clone(&shared), attached.output, callbacks));
        Self {
            shared,
            next_id: AtomicI64::new(0),
            reader,
        }
    }

    /// Sends one request and waits for its answer.
    pub async fn call(&self, method_name: &str, params: Value) -> Result<Value, PeerError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.shared.waiters).insert(id, tx);
        let mut ended = self.shared.ended.subscribe();
        if let Some(why) = ended_now(&self.shared.ended) {
            lock(&self.shared.waiters).remove(&id);
            return Err(why);
        }
        let request = Message::Request(Request {
            id: Id::Number(id),
            method: method_name.to_string(),
            params: Some(params),
        });
        if let Err(e) = write_line(&self.shared.input, &request).await {
            lock(&self.shared.waiters).remove(&id);
            return Err(PeerError::Stdin(e));
        }
        let answered = tokio::select! {
            answer = rx => answer.ok(),
            _ = ended.wait_for(Option::is_some) => None,
        };
        match answered {
            Some(answer) => answer.map_err(PeerError::Rpc),
            None => {
                Err(ended_now(&self.shared.ended)
                    .unwrap_or_else(|| PeerError::Ended(String::new())))
            }
        }
    }

    /// Waits until the container's stdout ended (it exited).
    pub async fn ended(&self) {
        let mut ended = self.shared.ended.subscribe();
        let _ = ended.wait_for(Option::is_some).await;
    }
}

/// Why the peer ended, if it did (a copy: the error itself stays for the other waiters).
fn ended_now(ended: &watch::Sender<Option<PeerError>>) -> Option<PeerError> {
    ended.borrow().as_ref().map(|e| match e {
        PeerError::Ended(s) => PeerError::Ended(s.clone()),
        PeerError::Protocol(m) => PeerError::Protocol(m.clone()),
        other => PeerError::Ended(other.to_string()),
    })
}

/// Reads the container's output until it ends, then says why to every waiter.
async fn read(
    shared: Arc<Shared>,
    mut output: Pin<
        Box<dyn futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
    >,
    callbacks: Arc<dyn RpcHandler>,
) {
    let mut stdout = LineSplitter::new(jsonrpc::MAX_MESSAGE_BYTES);
    let why = 'reading: loop {
        let Some(chunk) = output.next().await else {
            break 'reading None;
        };
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => break 'reading Some(PeerError::Ended(format!("reading it failed: {e}"))),
        };
        match chunk {
            LogOutput::StdErr { message } => {
                let mut stderr = lock(&shared.stderr);
                stderr.extend_from_slice(&message);
                if stderr.len() > 2 * STDERR_TAIL {
                    let cut = stderr.len() - STDERR_TAIL;
                    stderr.drain(..cut);
                }
            }
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                let lines = match stdout.push(&message) {
                    Ok(lines) => lines,
                    Err(e) => break 'reading Some(PeerError::Protocol(e.to_string())),
                };
                for line in lines {
                    if let Err(why) = on_line(&shared, &line, &*callbacks).await {
                        break 'reading Some(why);
                    }
                }
            }
            LogOutput::StdIn { .. } => {}
        }
    };
    let why = why.unwrap_or_else(|| {
        let stderr = lock(&shared.stderr);
        let tail = String::from_utf8_lossy(&stderr);
        let skip = tail.chars().count().saturating_sub(STDERR_TAIL);
        PeerError::Ended(tail.chars().skip(skip).collect())
    });
    shared.ended.send_replace(Some(why));
    lock(&shared.waiters).clear();
}

/// One line from the container: an answer (to its waiter) or a capability request
/// (answered).
async fn on_line(
    shared: &Shared,
    line: &[u8],
    callbacks: &dyn RpcHandler,
) -> Result<(), PeerError> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    match jsonrpc::decode(line) {
        Ok(Message::Response(Response {
            id: Some(Id::Number(id)),
            outcome,
        })) => {
            match lock(&shared.waiters).remove(&id) {
                Some(waiter) => {
                    let _ = waiter.send(outcome);
                }
                None => tracing::warn!(id, "a container answered a request nobody waits for"),
            }
            Ok(())
        }
        Ok(Message::Request(req)) => {
            let outcome = callbacks.handle(&req.method, req.params).await;
            let response = match outcome {
                Ok(v) => Response::ok(req.id, v),
                Err(e) => Response::error(Some(req.id), e),
            };
            write_line(&shared.input, &Message::Response(response))
                .await
                .map_err(PeerError::Stdin)
        }
        Ok(_) => Err(PeerError::Protocol(shorten(line))),
        Err(e) => Err(PeerError::Protocol(format!("{e}: {}", shorten(line)))),
    }
}

async fn write_line(input: &Input, message: &Message) -> std::io::Result<()> {
    let mut input = input.lock().await;
    ndjson::write_message(&mut *input, message).await
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn shorten(line: &[u8]) -> String {
    String::from_utf8_lossy(line).chars().take(200).collect()
}
