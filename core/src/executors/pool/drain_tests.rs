//! Draining executors and resending calls: the pool against real channel servers on
//! 127.0.0.x that report `draining`, refuse calls as draining, or break the connection
//! after the request was sent.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use skillbox_channel::client::ClientError;
use skillbox_channel::server::{RpcFuture, RpcHandler};
use skillbox_protocol::jsonrpc::{code, ErrorObject};
use skillbox_protocol::methods::{ToolExecuteParams, HEALTH_DRAINING};
use skillbox_protocol::result::{ErrorKind, ToolResult};
use skillbox_protocol::skill::{discover, DiscoveryOptions, Security, Skill};

use super::tests::{pki, serve_on, start, status_of};
use super::{ExecutorPool, Resend};
use crate::calls::transport::{resend_for, Dispatched, ExecutorTransport};
use crate::calls::CallError;

/// An executor that is stopping: once `draining` is set, `health` says so and every other
/// method is refused with the draining code (counted in `refused`).
struct Stopping {
    draining: AtomicBool,
    refused: AtomicUsize,
}

impl Stopping {
    fn new(draining: bool) -> Arc<Self> {
        Arc::new(Self {
            draining: AtomicBool::new(draining),
            refused: AtomicUsize::new(0),
        })
    }
}

impl RpcHandler for Stopping {
    fn handle<'a>(&'a self, method: &'a str, _params: Option<Value>) -> RpcFuture<'a> {
        Box::pin(async move {
            let draining = self.draining.load(SeqCst);
            match method {
                "health" if draining => Ok(json!({"status": HEALTH_DRAINING})),
                "health" => Ok(json!({"status": "ok"})),
                _ if draining => {
                    self.refused.fetch_add(1, SeqCst);
                    Err(ErrorObject::new(code::EXECUTOR_DRAINING, "draining"))
                }
                _ => Ok(json!({"name": "stopping"})),
            }
        })
    }
}

/// An executor whose connection breaks after a call's request arrived: it counts the
/// request, then its connection task panics, so no answer is ever written.
struct Breaks(AtomicUsize);

impl RpcHandler for Breaks {
    fn handle<'a>(&'a self, method: &'a str, _params: Option<Value>) -> RpcFuture<'a> {
        Box::pin(async move {
            if method == "health" {
                return Ok(json!({"status": "ok"}));
            }
            self.0.fetch_add(1, SeqCst);
            panic!("test executor: connection dropped after the request of {method} arrived");
        })
    }
}

/// Answers `tool.execute` with a success naming itself.
struct Runs(AtomicUsize);

impl RpcHandler for Runs {
    fn handle<'a>(&'a self, method: &'a str, params: Option<Value>) -> RpcFuture<'a> {
        Box::pin(async move {
            if method != "tool.execute" {
                return Ok(json!({"status": "ok", "name": "runs"}));
            }
            self.0.fetch_add(1, SeqCst);
            let p: ToolExecuteParams = serde_json::from_value(params.unwrap_or_default())
                .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, e.to_string()))?;
            serde_json::to_value(ToolResult::ok(p.call_id, json!({"ran": "runs"}), 1))
                .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))
        })
    }
}

/// A pool over a [`Stopping`] executor on 127.0.0.1 (`s`) and a plain one named `a` on
/// `other_ip`, after one health round; the servers live as long as the value.
struct Pair {
    _pki: super::tests::Pki,
    stopping: Arc<Stopping>,
    s: String,
    pool: ExecutorPool,
    _servers: [tokio::task::JoinHandle<()>; 2],
}

async fn stopping_and_taking(draining: bool, other_ip: &str) -> Pair {
    let pki = pki();
    let stopping = Stopping::new(draining);
    let (s, ts) = serve_on(
        &pki,
        "127.0.0.1",
        Arc::clone(&stopping) as Arc<dyn RpcHandler>,
    )
    .await;
    let (a, ta) = start(&pki, other_ip, "a").await;
    let pool =
        ExecutorPool::new(&[s.clone(), a], crate::state::pki::core_files(&pki.state)).unwrap();
    pool.refresh().await;
    Pair {
        _pki: pki,
        stopping,
        s,
        pool,
        _servers: [ts, ta],
    }
}

#[tokio::test]
async fn pool_stops_routing_to_an_executor_whose_health_says_draining() {
    let Pair {
        stopping, s, pool, ..
    } = stopping_and_taking(true, "127.0.0.2").await;
    for _ in 0..4 {
        let v = pool
            .call("whoami", json!({}), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(v["name"], "a");
    }
    let status = status_of(&pool, &s);
    assert!(status.draining && status.healthy, "{status:?}");
    assert_eq!(status.calls, 0, "no call is sent to a draining executor");
    assert_eq!(
        pool.health().unwrap()["name"],
        "a",
        "health comes from one taking calls"
    );
    assert_eq!(stopping.refused.load(SeqCst), 0);
}

#[tokio::test]
async fn pool_resends_a_call_refused_as_draining_to_another_executor() {
    // Healthy at the last health round, draining when the call arrives.
    let Pair {
        stopping, s, pool, ..
    } = stopping_and_taking(false, "127.0.0.3").await;
    stopping.draining.store(true, SeqCst);
    for _ in 0..4 {
        // Even a call that must never be delivered twice: the refusal ran nothing.
        let v = pool
            .call_with(
                "whoami",
                &json!({}),
                Duration::from_secs(5),
                Resend::OnlyUndelivered,
            )
            .await
            .unwrap();
        assert_eq!(v["name"], "a");
    }
    assert_eq!(
        stopping.refused.load(SeqCst),
        1,
        "refused once, then skipped"
    );
    assert!(status_of(&pool, &s).draining);
}

#[tokio::test]
async fn pool_with_every_executor_draining_fails_the_call_as_unavailable_draining() {
    let pki = pki();
    let stopping = Stopping::new(false);
    let (s, _ts) = serve_on(
        &pki,
        "127.0.0.1",
        Arc::clone(&stopping) as Arc<dyn RpcHandler>,
    )
    .await;
    let pool = ExecutorPool::new(&[s], crate::state::pki::core_files(&pki.state)).unwrap();
    pool.refresh().await;
    stopping.draining.store(true, SeqCst);
    let err = pool
        .call("whoami", json!({}), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ClientError::Rpc(o) if o.code == code::EXECUTOR_DRAINING),
        "{err}"
    );
    let call_error = CallError::from_pool(err, Resend::OnlyUndelivered);
    assert_eq!(call_error.kind(), ErrorKind::Unavailable);
    assert!(call_error.to_string().contains("draining"), "{call_error}");
    assert!(
        call_error.to_string().contains("none ran the call"),
        "{call_error}"
    );
    pool.refresh().await;
    assert!(
        pool.health().is_none(),
        "every executor draining: the executor is down"
    );
    // The next call is not even sent: nothing is routable, and nothing was sent.
    let err = pool
        .call("whoami", json!({}), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(&err, ClientError::Connect { .. }), "{err}");
    assert!(
        err.to_string().contains("every executor is draining"),
        "{err}"
    );
    assert_eq!(stopping.refused.load(SeqCst), 1);
}

/// A skill with a `read` and a `write` tool.
pub(super) fn skill_with_read_and_write() -> (tempfile::TempDir, Arc<Skill>) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("ledger");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("skill.yaml"),
        "name: ledger\nversion: 0.1.0\ndescription: Keeps a ledger\ntools:\n  \
         - name: balance\n    description: Reads\n    command: [\"sh\", \"-c\", \"true\"]\n    security: read\n  \
         - name: append\n    description: Writes\n    command: [\"sh\", \"-c\", \"true\"]\n    security: write\n",
    )
    .unwrap();
    let mut catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
    assert_eq!(catalog.skills.len(), 1, "{:?}", catalog.skipped);
    (root, Arc::new(catalog.skills.remove(0)))
}

/// A call of `tool` of `skill` as the pipeline hands it to a transport.
fn dispatched(skill: &Arc<Skill>, tool: &str) -> Dispatched {
    Dispatched {
        skill: Arc::clone(skill),
        security: skill.tool(tool).map_or(Security::Write, |t| t.security),
        params: execute_params(tool),
    }
}

fn execute_params(tool: &str) -> ToolExecuteParams {
    serde_json::from_value(json!({
        "call_id": "c0ffee", "capability_token": "t", "skill": "ledger", "tool": tool,
        "args": {}, "envelope": {}
    }))
    .unwrap()
}

#[test]
fn only_read_tools_may_be_resent_after_delivery() {
    assert_eq!(resend_for(Security::Read), Resend::AlsoDelivered);
    assert_eq!(resend_for(Security::Write), Resend::OnlyUndelivered);
    assert_eq!(resend_for(Security::Sign), Resend::OnlyUndelivered);
}

/// A pool whose first pick breaks the connection after the request and whose second runs
/// the call.
async fn breaking_then_running(
    pki: &super::tests::Pki,
) -> (
    ExecutorPool,
    Arc<Breaks>,
    Arc<Runs>,
    Vec<tokio::task::JoinHandle<()>>,
) {
    let breaks = Arc::new(Breaks(AtomicUsize::new(0)));
    let runs = Arc::new(Runs(AtomicUsize::new(0)));
    let (b, tb) = serve_on(pki, "127.0.0.1", Arc::clone(&breaks) as Arc<dyn RpcHandler>).await;
    let (r, tr) = serve_on(pki, "127.0.0.4", Arc::clone(&runs) as Arc<dyn RpcHandler>).await;
    let pool = ExecutorPool::new(&[b, r], crate::state::pki::core_files(&pki.state)).unwrap();
    pool.refresh().await;
    (pool, breaks, runs, vec![tb, tr])
}

#[tokio::test]
async fn write_tool_whose_connection_broke_after_sending_is_not_sent_again() {
    let pki = pki();
    let (_root, skill) = skill_with_read_and_write();
    let (pool, breaks, runs, _tasks) = breaking_then_running(&pki).await;
    let err = pool
        .execute(dispatched(&skill, "append"), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(breaks.0.load(SeqCst), 1);
    assert_eq!(runs.0.load(SeqCst), 0, "a write tool never runs twice");
    assert!(matches!(err, CallError::MayHaveRun(_)), "{err}");
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(err.to_string().contains("may have run"), "{err}");
}

#[tokio::test]
async fn read_tool_whose_connection_broke_after_sending_runs_on_another_executor() {
    let pki = pki();
    let (_root, skill) = skill_with_read_and_write();
    let (pool, breaks, runs, _tasks) = breaking_then_running(&pki).await;
    let result = pool
        .execute(dispatched(&skill, "balance"), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(result.success, "{result:?}");
    assert_eq!(breaks.0.load(SeqCst), 1);
    assert_eq!(runs.0.load(SeqCst), 1);
}
