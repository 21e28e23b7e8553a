//! The pool against real channel servers on 127.0.0.x (mutual TLS from a fresh PKI).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use skillbox_channel::server::{self, ReloadingServerConfig, RpcFuture, RpcHandler, ServerOptions};
use skillbox_channel::{TlsFiles, CORE_IDENTITY, EXECUTOR_IDENTITY};
use skillbox_protocol::jsonrpc::ErrorObject;
use tokio::net::TcpListener;

use super::discovery::{ExecutorUrl, UrlError};
use super::ExecutorPool;

/// Answers `health` and `whoami` (its own name).
struct Named(&'static str);

impl RpcHandler for Named {
    fn handle<'a>(&'a self, method: &'a str, _params: Option<Value>) -> RpcFuture<'a> {
        Box::pin(async move {
            match method {
                "health" | "whoami" => Ok(json!({"name": self.0})),
                _ => Err(ErrorObject::new(-32601, "no such method")),
            }
        })
    }
}

pub(super) struct Pki {
    _dir: tempfile::TempDir,
    pub(super) state: std::path::PathBuf,
}

pub(super) fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_path_buf();
    crate::state::pki::ensure(&state).unwrap();
    Pki { _dir: dir, state }
}

/// A channel server on `ip` answering with `handler`; its URL.
pub(super) async fn serve_on(
    pki: &Pki,
    ip: &str,
    handler: Arc<dyn RpcHandler>,
) -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind(format!("{ip}:0")).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let files = TlsFiles::in_dir(&crate::state::pki::pki_dir(&pki.state), EXECUTOR_IDENTITY);
    let tls = Arc::new(ReloadingServerConfig::new(files).unwrap());
    let task = tokio::spawn(server::serve(
        listener,
        tls,
        ServerOptions {
            expected_peer: CORE_IDENTITY.into(),
            max_body_bytes: 1 << 20,
        },
        handler,
    ));
    (format!("https://{addr}"), task)
}

pub(super) async fn start(
    pki: &Pki,
    ip: &str,
    name: &'static str,
) -> (String, tokio::task::JoinHandle<()>) {
    serve_on(pki, ip, Arc::new(Named(name))).await
}

/// What the pool shows of the endpoint at `url`.
pub(super) fn status_of(pool: &ExecutorPool, url: &str) -> super::EndpointStatus {
    pool.status()
        .into_iter()
        .find(|s| url.ends_with(&s.address))
        .unwrap()
}

async fn whoami(pool: &ExecutorPool) -> String {
    let v = pool
        .call("whoami", json!({}), Duration::from_secs(5))
        .await
        .unwrap();
    v["name"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn pool_spreads_calls_round_robin_over_every_healthy_executor() {
    let pki = pki();
    let (a, _ta) = start(&pki, "127.0.0.1", "a").await;
    let (b, _tb) = start(&pki, "127.0.0.2", "b").await;
    let pool = ExecutorPool::new(&[a, b], crate::state::pki::core_files(&pki.state)).unwrap();
    pool.refresh().await;
    let mut seen = Vec::new();
    for _ in 0..6 {
        seen.push(whoami(&pool).await);
    }
    assert_eq!(seen.iter().filter(|n| *n == "a").count(), 3, "{seen:?}");
    assert_eq!(seen.iter().filter(|n| *n == "b").count(), 3, "{seen:?}");
    assert!(pool.status().iter().all(|s| s.healthy && s.calls == 3));
}

/// A URL on `ip` where nothing listens (a port that was just free).
fn dead_url(ip: &str) -> String {
    let l = std::net::TcpListener::bind(format!("{ip}:0")).unwrap();
    format!("https://{}", l.local_addr().unwrap())
}

#[tokio::test]
async fn pool_skips_an_executor_that_does_not_answer() {
    let pki = pki();
    let (a, _ta) = start(&pki, "127.0.0.1", "a").await;
    let dead = dead_url("127.0.0.3");
    let pool = ExecutorPool::new(
        &[a, dead.clone()],
        crate::state::pki::core_files(&pki.state),
    )
    .unwrap();
    pool.refresh().await;
    for _ in 0..4 {
        assert_eq!(whoami(&pool).await, "a");
    }
    let down = status_of(&pool, &dead);
    assert!(!down.healthy, "{down:?}");
    assert_eq!(down.calls, 0);
    assert!(down.error.unwrap().contains("unreachable"));
    let ip = "127.0.0.3".parse().unwrap();
    assert!(pool.unhealthy_for(ip).is_some());
    assert!(pool.health().is_some(), "a is healthy");
}

#[tokio::test]
async fn pool_with_no_executor_answering_fails_the_call_as_unreachable() {
    let pki = pki();
    let pool = ExecutorPool::new(
        &[dead_url("127.0.0.1")],
        crate::state::pki::core_files(&pki.state),
    )
    .unwrap();
    pool.refresh().await;
    let err = pool
        .call("whoami", json!({}), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unreachable"), "{err}");
    assert!(pool.health().is_none());
}

/// Answers `whoami` and counts `count` calls.
struct Counting(std::sync::atomic::AtomicUsize);

impl RpcHandler for Counting {
    fn handle<'a>(&'a self, method: &'a str, _params: Option<Value>) -> RpcFuture<'a> {
        Box::pin(async move {
            if method == "count" {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            Ok(json!({}))
        })
    }
}

#[tokio::test]
async fn pool_broadcast_reaches_every_healthy_executor_and_skips_a_dead_one() {
    let pki = pki();
    let mut urls = Vec::new();
    let mut handlers = Vec::new();
    for ip in ["127.0.0.1", "127.0.0.4"] {
        let handler = Arc::new(Counting(std::sync::atomic::AtomicUsize::new(0)));
        handlers.push(Arc::clone(&handler));
        urls.push(serve_on(&pki, ip, handler).await.0);
    }
    urls.push(dead_url("127.0.0.5"));
    let pool = ExecutorPool::new(&urls, crate::state::pki::core_files(&pki.state)).unwrap();
    pool.refresh().await;
    pool.broadcast("count", json!({}), Duration::from_secs(5))
        .await
        .unwrap();
    for h in &handlers {
        assert_eq!(h.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
    let only_dead = ExecutorPool::new(
        &[dead_url("127.0.0.6")],
        crate::state::pki::core_files(&pki.state),
    )
    .unwrap();
    only_dead.refresh().await;
    let err = only_dead
        .broadcast("count", json!({}), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("no executor answers health"),
        "{err}"
    );
}

#[tokio::test]
async fn pool_resolves_a_host_name_to_its_addresses() {
    let url = ExecutorUrl::parse("https://localhost:7071").unwrap();
    let addrs = url.resolve().await.unwrap();
    assert!(
        addrs
            .iter()
            .all(|a| a.port() == 7071 && a.ip().is_loopback()),
        "{addrs:?}"
    );
}

#[test]
fn executor_url_refuses_what_is_not_https_host_port() {
    for bad in [
        "http://executor:7071",
        "executor:7071",
        "https://executor",
        "https://executor:0",
        "https://executor:port",
        "https://executor:7071/rpc",
        "https://user@executor:7071",
        "https://:7071",
    ] {
        assert!(
            matches!(ExecutorUrl::parse(bad), Err(UrlError::Malformed { .. })),
            "{bad} was accepted"
        );
    }
    assert_eq!(
        ExecutorUrl::parse("https://[::1]:7071")
            .unwrap()
            .to_string(),
        "https://[::1]:7071"
    );
    assert!(matches!(
        ExecutorPool::new(
            &[],
            crate::state::pki::core_files(std::path::Path::new("/nonexistent"))
        ),
        Err(UrlError::None)
    ));
}

/// Fails `health` while `down`; counts `skill.reload`.
struct Flaky {
    down: std::sync::atomic::AtomicBool,
    reloads: std::sync::atomic::AtomicUsize,
}

impl RpcHandler for Flaky {
    fn handle<'a>(&'a self, method: &'a str, _params: Option<Value>) -> RpcFuture<'a> {
        use std::sync::atomic::Ordering::SeqCst;
        Box::pin(async move {
            match method {
                "health" if self.down.load(SeqCst) => Err(ErrorObject::new(-32000, "sick")),
                "skill.reload" => {
                    self.reloads.fetch_add(1, SeqCst);
                    Ok(json!({"loaded": 0, "skipped": []}))
                }
                _ => Ok(json!({})),
            }
        })
    }
}

#[tokio::test]
async fn pool_reloads_an_executor_that_comes_back_before_calls_go_to_it() {
    use std::sync::atomic::Ordering::SeqCst;
    let pki = pki();
    let flaky = Arc::new(Flaky {
        down: std::sync::atomic::AtomicBool::new(false),
        reloads: std::sync::atomic::AtomicUsize::new(0),
    });
    let (url, _task) = serve_on(&pki, "127.0.0.1", Arc::clone(&flaky) as Arc<dyn RpcHandler>).await;
    let pool = ExecutorPool::new(&[url], crate::state::pki::core_files(&pki.state)).unwrap();
    pool.refresh().await;
    assert!(pool.health().is_some());
    assert_eq!(
        flaky.reloads.load(SeqCst),
        0,
        "a healthy executor is not reloaded"
    );
    flaky.down.store(true, SeqCst);
    pool.refresh().await;
    assert!(pool.health().is_none());
    // A reload broadcast while it is down does not reach it...
    assert!(pool
        .broadcast("skill.reload", json!({}), Duration::from_secs(5))
        .await
        .is_err());
    assert_eq!(flaky.reloads.load(SeqCst), 0);
    // ...so it gets one when it answers again.
    flaky.down.store(false, SeqCst);
    pool.refresh().await;
    assert!(pool.health().is_some());
    assert_eq!(flaky.reloads.load(SeqCst), 1);
}

#[tokio::test]
async fn pool_counts_an_arrival_when_an_executor_starts_taking_calls() {
    use std::sync::atomic::Ordering::SeqCst;
    let pki = pki();
    let flaky = Arc::new(Flaky {
        down: std::sync::atomic::AtomicBool::new(false),
        reloads: std::sync::atomic::AtomicUsize::new(0),
    });
    let (url, _task) = serve_on(&pki, "127.0.0.1", Arc::clone(&flaky) as Arc<dyn RpcHandler>).await;
    let pool = ExecutorPool::new(&[url], crate::state::pki::core_files(&pki.state)).unwrap();
    let arrivals = pool.arrivals();
    // Its first answer is an arrival.
    pool.refresh().await;
    assert_eq!(*arrivals.borrow(), 1);
    // Answering again is not.
    pool.refresh().await;
    assert_eq!(*arrivals.borrow(), 1);
    // Down, then back: one more (what it built for itself may be gone).
    flaky.down.store(true, SeqCst);
    pool.refresh().await;
    assert_eq!(*arrivals.borrow(), 1);
    flaky.down.store(false, SeqCst);
    pool.refresh().await;
    assert_eq!(*arrivals.borrow(), 2);
}

#[tokio::test]
async fn pool_sends_a_call_that_found_no_connection_to_the_next_executor() {
    let pki = pki();
    let (a, _ta) = start(&pki, "127.0.0.1", "a").await;
    let dead = dead_url("127.0.0.7");
    let pool = ExecutorPool::new(
        &[a, dead.clone()],
        crate::state::pki::core_files(&pki.state),
    )
    .unwrap();
    pool.refresh().await;
    // The dead one died after the last health round: calls still pick it.
    pool.assume_all_healthy();
    for _ in 0..4 {
        assert_eq!(whoami(&pool).await, "a");
    }
    let down = status_of(&pool, &dead);
    assert!(!down.healthy, "{down:?}");
    assert_eq!(down.calls, 1, "tried once, then skipped");
    assert!(down.error.unwrap().contains("no connection"));
}

/// Answers `health`, and `skill.reload` with something that is not its result.
struct BadReload;

impl RpcHandler for BadReload {
    fn handle<'a>(&'a self, method: &'a str, _params: Option<Value>) -> RpcFuture<'a> {
        Box::pin(async move {
            match method {
                "skill.reload" => Ok(json!({"reloaded": "yes"})),
                _ => Ok(json!({})),
            }
        })
    }
}

#[tokio::test]
async fn an_answer_that_is_not_the_methods_result_type_is_refused_naming_the_method() {
    let pki = pki();
    let (url, _task) = serve_on(&pki, "127.0.0.1", Arc::new(BadReload)).await;
    let pool = ExecutorPool::new(&[url], crate::state::pki::core_files(&pki.state)).unwrap();
    pool.refresh().await;
    let err = pool
        .call_method::<skillbox_protocol::rpc::SkillReload>(
            &Default::default(),
            std::time::Duration::from_secs(5),
            super::Resend::OnlyUndelivered,
        )
        .await
        .unwrap_err();
    let said = err.to_string();
    assert!(
        said.contains("skill.reload") && said.contains("not its result"),
        "{said}"
    );
}
