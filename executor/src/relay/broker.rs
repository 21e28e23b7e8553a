//! [`RelayBroker`]: a tool's capability requests relayed to the core as JSON-RPC lines on
//! the executor's stdout ([`LineWriter`]) and answered by response lines on its stdin
//! ([`RelayBroker::route_answers`]), matched by id.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use skillbox_protocol::jsonrpc::{self, code, ErrorObject, Id, Message, Request, Response};
use skillbox_protocol::ndjson;
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};

use super::{read_line, trim_line, Line};
use crate::broker::{core_request, CallInfo, CapabilityBroker};

/// The answer of a relayed request.
type Answer = Result<Value, ErrorObject>;

/// Whole JSON-RPC lines on one output, one writer at a time, so lines never interleave.
pub struct LineWriter {
    out: tokio::sync::Mutex<Pin<Box<dyn AsyncWrite + Send>>>,
}

impl fmt::Debug for LineWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LineWriter").finish_non_exhaustive()
    }
}

impl LineWriter {
    /// A writer of lines on `out`.
    pub fn new<W: AsyncWrite + Send + 'static>(out: W) -> Self {
        Self {
            out: tokio::sync::Mutex::new(Box::pin(out)),
        }
    }

    /// Writes `message` as one line and flushes it.
    pub async fn send(&self, message: &Message) -> std::io::Result<()> {
        let mut out = self.out.lock().await;
        ndjson::write_message(&mut *out, message).await
    }
}

/// Relayed requests waiting for the core's answer, by id.
#[derive(Debug, Default)]
struct Pending {
    waiters: HashMap<i64, oneshot::Sender<Answer>>,
    /// The core's side of the relay ended: no answer will come.
    closed: bool,
}

/// Relays capability requests to the core over a [`LineWriter`] with ids 1, 2, … and waits
/// for the answers that [`RelayBroker::route_answers`] reads (docs/architecture.md methods and
/// params, as `server::CoreBroker` sends them over mutual TLS).
#[derive(Debug)]
pub struct RelayBroker {
    out: Arc<LineWriter>,
    pending: Arc<Mutex<Pending>>,
    next_id: AtomicI64,
    timeout: Duration,
}

impl RelayBroker {
    /// A broker that writes its requests on `out` and waits at most `timeout` for each
    /// answer.
    pub fn new(out: Arc<LineWriter>, timeout: Duration) -> Self {
        Self {
            out,
            pending: Arc::default(),
            next_id: AtomicI64::new(1),
            timeout,
        }
    }

    /// Reads the core's response lines from `input` and hands each to the request with its
    /// id. Lines that are not JSON-RPC, requests from the core's side and responses with an
    /// unknown id are logged and ignored. When `input` ends or fails, every pending and
    /// later request answers -32003.
    pub fn route_answers<R>(&self, input: R) -> impl Future<Output = ()> + Send + 'static
    where
        R: AsyncBufRead + Unpin + Send + 'static,
    {
        self.route_lines(input, None)
    }

    /// [`RelayBroker::route_answers`], handing the core's requests to `requests` instead of
    /// ignoring them (a command session's `session.write` and `session.close`); the
    /// sender is dropped when `input` ends.
    pub fn route_lines<R>(
        &self,
        input: R,
        requests: Option<mpsc::UnboundedSender<Request>>,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        R: AsyncBufRead + Unpin + Send + 'static,
    {
        let pending = Arc::clone(&self.pending);
        async move {
            read_answers(input, &pending, requests).await;
            let mut p = lock(&pending);
            p.closed = true;
            for (_, waiter) in p.waiters.drain() {
                let _ = waiter.send(Err(closed()));
            }
        }
    }
}

impl CapabilityBroker for RelayBroker {
    async fn request(
        &self,
        call: &CallInfo,
        capability: &str,
        params: Option<Value>,
    ) -> Result<Value, ErrorObject> {
        let (core_method, params) = core_request(call, capability, params)?;
        self.forward(core_method, params).await
    }

    async fn forward(
        &self,
        core_method: &'static str,
        params: Value,
    ) -> Result<Value, ErrorObject> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut p = lock(&self.pending);
            if p.closed {
                return Err(closed());
            }
            p.waiters.insert(id, tx);
        }
        let message = Message::Request(Request {
            id: Id::Number(id),
            method: core_method.to_string(),
            params: Some(params),
        });
        if let Err(e) = self.out.send(&message).await {
            lock(&self.pending).waiters.remove(&id);
            return Err(ErrorObject::new(
                code::CAPABILITY_UNAVAILABLE,
                format!("cannot relay {core_method} to the core: writing stdout failed: {e}"),
            ));
        }
        match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(closed()),
            Err(_) => {
                lock(&self.pending).waiters.remove(&id);
                Err(ErrorObject::new(
                    code::CAPABILITY_UNAVAILABLE,
                    format!(
                        "the core did not answer {core_method} within {:?}",
                        self.timeout
                    ),
                ))
            }
        }
    }
}

/// The answer of every request once the core's side is gone.
fn closed() -> ErrorObject {
    ErrorObject::new(code::CAPABILITY_UNAVAILABLE, "the core closed the relay")
}

fn lock(pending: &Mutex<Pending>) -> MutexGuard<'_, Pending> {
    pending.lock().unwrap_or_else(|p| p.into_inner())
}

/// Routes response lines to their waiters, and requests to `requests` when given, until
/// `input` ends or fails.
async fn read_answers<R: AsyncBufRead + Unpin>(
    mut input: R,
    pending: &Mutex<Pending>,
    requests: Option<mpsc::UnboundedSender<Request>>,
) {
    let mut line = Vec::new();
    loop {
        match read_line(&mut input, &mut line).await {
            Ok(Line::Complete) => {}
            Ok(Line::Eof) => return,
            Ok(Line::TooLong) => {
                tracing::warn!(
                    max = jsonrpc::MAX_MESSAGE_BYTES,
                    "stdin: ignored a line longer than the message limit"
                );
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "stdin is unreadable; capability requests now answer -32003");
                return;
            }
        }
        let text = trim_line(&line);
        if text.is_empty() {
            continue;
        }
        match jsonrpc::decode(text) {
            Ok(Message::Response(Response {
                id: Some(Id::Number(id)),
                outcome,
            })) => {
                let waiter = lock(pending).waiters.remove(&id);
                match waiter {
                    Some(waiter) => {
                        let _ = waiter.send(outcome);
                    }
                    None => tracing::warn!(
                        id,
                        "stdin: ignored a response with an unknown id (no relayed request waits for it)"
                    ),
                }
            }
            Ok(Message::Response(r)) => tracing::warn!(
                id = ?r.id,
                "stdin: ignored a response with an unknown id (relayed requests use integer ids >= 1)"
            ),
            Ok(Message::Request(request)) => match &requests {
                Some(to) => {
                    let _ = to.send(request);
                }
                None => tracing::warn!(
                    method = %request.method,
                    "stdin: ignored a request from the core; after the first line only responses are read"
                ),
            },
            Ok(Message::Notification(n)) => tracing::warn!(
                method = %n.method,
                "stdin: ignored a notification from the core; after the first line only responses are read"
            ),
            Err(e) => tracing::warn!(error = %e, "stdin: ignored a line that is not JSON-RPC 2.0"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

    use crate::broker::test_support::sample_call as call;

    /// A broker over in-memory pipes: what it writes (the "core" reads) and where the
    /// "core" writes its answers.
    struct Relay {
        broker: Arc<RelayBroker>,
        requests: Lines<BufReader<DuplexStream>>,
        answers: DuplexStream,
    }

    fn relay(timeout: Duration) -> Relay {
        let (out, requests) = tokio::io::duplex(1 << 16);
        let (input, answers) = tokio::io::duplex(1 << 16);
        let broker = Arc::new(RelayBroker::new(Arc::new(LineWriter::new(out)), timeout));
        tokio::spawn(broker.route_answers(BufReader::new(input)));
        Relay {
            broker,
            requests: BufReader::new(requests).lines(),
            answers,
        }
    }

    impl Relay {
        fn ask(&self, capability: &'static str, params: Value) -> tokio::task::JoinHandle<Answer> {
            let broker = Arc::clone(&self.broker);
            tokio::spawn(async move { broker.request(&call(), capability, Some(params)).await })
        }

        async fn next_request(&mut self) -> Value {
            let line = self.requests.next_line().await.unwrap().unwrap();
            serde_json::from_str(&line).unwrap()
        }

        async fn answer(&mut self, line: Value) {
            let text = format!("{line}\n");
            self.answers.write_all(text.as_bytes()).await.unwrap();
        }
    }

    #[tokio::test]
    async fn relay_broker_sends_core_method_and_returns_answer_by_id() {
        let mut r = relay(Duration::from_secs(10));
        let first = r.ask("fetch", json!({"url": "https://a"}));
        assert_eq!(
            r.next_request().await,
            json!({"jsonrpc": "2.0", "id": 1, "method": "core.fetch", "params":
                   {"call_id": "c1", "capability_token": "tok", "request": {"url": "https://a"}}})
        );
        let second = r.ask("readFile", json!({"path": "x"}));
        let request = r.next_request().await;
        assert_eq!(
            (request["id"].clone(), request["method"].clone()),
            (json!(2), json!("core.readFile"))
        );
        r.answer(json!({"jsonrpc": "2.0", "id": 2, "result": {"content": "two"}}))
            .await;
        r.answer(json!({"jsonrpc": "2.0", "id": 1, "result": {"status": 200}}))
            .await;
        assert_eq!(second.await.unwrap().unwrap(), json!({"content": "two"}));
        assert_eq!(first.await.unwrap().unwrap(), json!({"status": 200}));
    }

    #[tokio::test]
    async fn relay_broker_passes_error_answer_and_ignores_noise() {
        let mut r = relay(Duration::from_secs(10));
        let asked = r.ask("sign", json!({"type": "message", "data": "AA=="}));
        assert_eq!(r.next_request().await["method"], "core.sign");
        r.answers.write_all(b"not json\n\n").await.unwrap();
        r.answer(json!({"jsonrpc": "2.0", "id": 9, "result": "unknown id"}))
            .await;
        r.answer(json!({"jsonrpc": "2.0", "id": 1, "method": "core.fetch"}))
            .await;
        r.answer(
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "denied"}}),
        )
        .await;
        let err = asked.await.unwrap().unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (code::PERMISSION_DENIED, "denied")
        );
    }

    #[tokio::test]
    async fn relay_broker_answers_unavailable_after_core_closes_input() {
        let mut r = relay(Duration::from_secs(10));
        let asked = r.ask("fetch", json!({"url": "https://a"}));
        r.next_request().await;
        drop(r.answers);
        let err = asked.await.unwrap().unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (code::CAPABILITY_UNAVAILABLE, "the core closed the relay")
        );
        let later = r.broker.request(&call(), "fetch", None).await.unwrap_err();
        assert_eq!(
            (later.code, later.message.as_str()),
            (code::CAPABILITY_UNAVAILABLE, "the core closed the relay")
        );
    }

    #[tokio::test]
    async fn relay_broker_times_out_unanswered_request() {
        let mut r = relay(Duration::from_millis(50));
        let asked = r.ask("fetch", json!({"url": "https://a"}));
        r.next_request().await;
        let err = asked.await.unwrap().unwrap_err();
        assert_eq!(err.code, code::CAPABILITY_UNAVAILABLE);
        assert!(
            err.message
                .contains("did not answer core.fetch within 50ms"),
            "{}",
            err.message
        );
    }

    #[tokio::test]
    async fn relay_broker_refuses_unknown_capability_without_relaying() {
        let r = relay(Duration::from_secs(10));
        let err = r.ask("exec", json!({})).await.unwrap().unwrap_err();
        assert_eq!(err.code, code::METHOD_NOT_FOUND);
        assert_eq!(r.broker.next_id.load(Ordering::Relaxed), 1);
    }
}
