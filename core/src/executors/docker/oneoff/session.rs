//! Command sessions in per-call containers: a session of an `execution.sandbox: container`
//! skill gets a container of its own, made as a call's ([`super::spec`]), running
//! `skillbox-executor exec --stdio` with `session.exec` as its first request. The container
//! is kept, with its slot of `[docker] max_containers`, while the session runs: the core's
//! `session.write` and `session.close` go to it over the same [`Peer`], and its file
//! callbacks come back the same way. It is removed when the session is closed, when the
//! executor in it exits (the session's end was answered, or its idle limit or lifetime
//! ended it), or at the latest [`super::START_GRACE`] after the session's lifetime.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use skillbox_channel::client::ClientError;
use skillbox_protocol::methods::method;
use skillbox_protocol::session::{SessionAnswer, SessionExecParams};
use skillbox_protocol::skill::Skill;

use super::relay::{Peer, PeerError};
use super::slots::Slot;
use super::{ContainerRunner, OneOffError, START_GRACE};

/// A session's container while the session runs.
#[derive(Debug)]
pub(super) struct SessionContainer {
    id: String,
    peer: Peer,
    _slot: Slot,
}

impl ContainerRunner {
    /// Starts `params`' session in a container of its own under `skill`; the container is
    /// kept when the command is still running at the answer, removed otherwise.
    pub async fn start_session(
        self: &Arc<Self>,
        skill: Arc<Skill>,
        params: SessionExecParams,
        timeout: Duration,
    ) -> Result<SessionAnswer, ClientError> {
        let slot = self
            .slots
            .take()
            .ok_or_else(|| unreachable(OneOffError::Busy(self.max_containers)))?;
        let session_id = params.session_id.clone();
        let lifetime = Duration::from_millis(params.limits.lifetime_ms) + START_GRACE;
        let id = self
            .create(
                &skill,
                &format!("skillbox-session-{session_id}"),
                &params.call_id,
                &slot,
            )
            .await
            .map_err(unreachable)?;
        let started = self.first_answer(&id, params, timeout).await;
        let (answer, peer) = match started {
            Ok(started) => started,
            Err(e) => {
                self.remove(&id).await;
                return Err(e);
            }
        };
        if !answer.running {
            self.remove(&id).await;
            return Ok(answer);
        }
        let held = Arc::new(SessionContainer {
            id,
            peer,
            _slot: slot,
        });
        lock(&self.sessions).insert(session_id.clone(), Arc::clone(&held));
        let runner = Arc::clone(self);
        tokio::spawn(async move {
            let _ = tokio::time::timeout(lifetime, held.peer.ended()).await;
            runner.end_session(&session_id).await;
        });
        Ok(answer)
    }

    /// Sends a request to the container holding session `session_id`.
    pub async fn session_request<P: Serialize>(
        &self,
        session_id: &str,
        method_name: &'static str,
        params: &P,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let at = where_held(session_id);
        let held = self.held(session_id)?;
        let params = serde_json::to_value(params).map_err(|e| ClientError::Typed {
            method: method_name,
            reason: format!("params: {e}"),
        })?;
        match tokio::time::timeout(timeout, held.peer.call(method_name, params)).await {
            Ok(answer) => answer.map_err(|e| peer_error(&at, e)),
            Err(_) => Err(ClientError::Timeout {
                url: at,
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// Forgets session `session_id` and removes its container (nothing when it is gone).
    pub async fn end_session(&self, session_id: &str) {
        let taken = lock(&self.sessions).remove(session_id);
        if let Some(held) = taken {
            self.remove(&held.id).await;
        }
    }

    /// Starts the container and waits for the answer to `session.exec`.
    async fn first_answer(
        &self,
        id: &str,
        params: SessionExecParams,
        timeout: Duration,
    ) -> Result<(SessionAnswer, Peer), ClientError> {
        let at = where_held(&params.session_id);
        let peer = self.attach_and_start(id).await.map_err(unreachable)?;
        let params = serde_json::to_value(&params).map_err(|e| ClientError::Typed {
            method: method::SESSION_EXEC,
            reason: format!("params: {e}"),
        })?;
        let limit = timeout + START_GRACE;
        let value = match tokio::time::timeout(limit, peer.call(method::SESSION_EXEC, params)).await
        {
            Ok(answer) => answer.map_err(|e| peer_error(&at, e))?,
            Err(_) => {
                return Err(unreachable(OneOffError::Timeout(limit)));
            }
        };
        let answer = serde_json::from_value(value).map_err(|e| ClientError::Typed {
            method: method::SESSION_EXEC,
            reason: format!("the answer is not its result: {e}"),
        })?;
        Ok((answer, peer))
    }

    fn held(&self, session_id: &str) -> Result<Arc<SessionContainer>, ClientError> {
        lock(&self.sessions)
            .get(session_id)
            .cloned()
            .ok_or_else(|| ClientError::Unreachable {
                url: where_held(session_id),
                reason: "its container is gone (the session ended, or the core restarted)".into(),
            })
    }
}

/// How errors name the container of session `session_id`.
fn where_held(session_id: &str) -> String {
    format!("the container of session {session_id}")
}

/// A session job's error: the executor's own answer as it is, anything else as the
/// container (named `at`) being unreachable.
fn peer_error(at: &str, e: PeerError) -> ClientError {
    match e {
        PeerError::Rpc(e) => ClientError::Rpc(e),
        other => ClientError::Unreachable {
            url: at.to_string(),
            reason: other.to_string(),
        },
    }
}

fn unreachable(e: OneOffError) -> ClientError {
    ClientError::Unreachable {
        url: "a per-call container".into(),
        reason: e.to_string(),
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
