//! A context's list of files named by digest: the pool against a real channel server that
//! keeps lists as an executor does, forgets them as a restarted one would, and counts
//! what each request carried.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use skillbox_channel::server::{RpcFuture, RpcHandler};
use skillbox_protocol::jsonrpc::{code, ErrorObject};
use skillbox_protocol::methods::ToolExecuteParams;
use skillbox_protocol::result::ToolResult;
use skillbox_protocol::skill::Security;
use skillbox_protocol::workdir::{FileList, HeldLists, WorkDir, WorkFile};

use super::tests::{pki, serve_on};
use super::ExecutorPool;
use crate::calls::transport::{Dispatched, ExecutorTransport};

/// An executor that keeps the last list of each context by digest, refuses a list named
/// but not held, and runs a call only with its list found (answering how many files).
struct Keeps {
    lists: Mutex<HeldLists<String>>,
    /// Requests that carried the list whole, by digest alone, refused.
    whole: AtomicUsize,
    named: AtomicUsize,
    refused: AtomicUsize,
}

impl Keeps {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            lists: Mutex::new(HeldLists::new(8, 1000)),
            whole: AtomicUsize::new(0),
            named: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
        })
    }

    /// Forgets every list, as a restarted executor.
    fn restart(&self) {
        *self.lists.lock().unwrap() = HeldLists::new(8, 1000);
    }

    fn counts(&self) -> [usize; 3] {
        [&self.whole, &self.named, &self.refused].map(|c| c.load(SeqCst))
    }

    fn run(&self, p: ToolExecuteParams) -> Result<Value, ErrorObject> {
        let w = p.workdir.expect("a call in a context");
        let (context, digest) = (w.context_id.unwrap(), w.list_sha256.unwrap());
        let lists = self.lists.lock().unwrap();
        let files = if w.list_withheld {
            self.named.fetch_add(1, SeqCst);
            let Some(files) = lists.get(&context, &digest) else {
                self.refused.fetch_add(1, SeqCst);
                return Err(ErrorObject::new(code::UNKNOWN_FILE_LIST, "not held"));
            };
            files
        } else {
            self.whole.fetch_add(1, SeqCst);
            lists.put(&context, digest, Arc::clone(&w.files));
            w.files
        };
        let result = ToolResult::ok(p.call_id, json!({"files": files.len()}), 1);
        Ok(serde_json::to_value(result).unwrap())
    }
}

impl RpcHandler for Keeps {
    fn handle<'a>(&'a self, method: &'a str, params: Option<Value>) -> RpcFuture<'a> {
        Box::pin(async move {
            if method != "tool.execute" {
                return Ok(json!({"status": "ok"}));
            }
            let p = serde_json::from_value(params.unwrap_or_default())
                .map_err(|e| ErrorObject::new(code::INVALID_PARAMS, e.to_string()))?;
            self.run(p)
        })
    }
}

/// A call of a `write` tool in context `c1` with `list`.
fn call_with(list: &Arc<FileList>) -> Dispatched {
    let (_root, skill) = super::drain_tests::skill_with_read_and_write();
    let mut params: ToolExecuteParams = serde_json::from_value(json!({
        "call_id": "c0ffee", "capability_token": "t", "skill": "ledger", "tool": "append",
        "args": {}, "envelope": {}
    }))
    .unwrap();
    params.workdir = Some(WorkDir {
        files: Arc::clone(list),
        max_file_bytes: 1,
        max_total_bytes: 1,
        max_files: 1,
        context_id: Some("c1".into()),
        ..WorkDir::default()
    });
    Dispatched {
        skill,
        security: Security::Write,
        params,
    }
}

/// The first call carries the list whole, the next ones its digest alone; after the
/// executor forgot it, the refused call goes again whole and runs once, even a `write`
/// tool's (the refusal ran nothing).
#[tokio::test]
async fn a_list_goes_whole_once_then_by_digest_and_again_whole_to_an_executor_without_it() {
    let pki = pki();
    let keeps = Keeps::new();
    let (addr, _server) =
        serve_on(&pki, "127.0.0.1", Arc::clone(&keeps) as Arc<dyn RpcHandler>).await;
    let pool = ExecutorPool::new(&[addr], crate::state::pki::core_files(&pki.state)).unwrap();
    pool.refresh().await;
    let file = |i: usize| WorkFile {
        path: format!("f{i}"),
        size: 1,
        sha256: "ab".repeat(32),
        executable: false,
    };
    let list: Arc<FileList> = Arc::new((0..3).map(file).collect());
    let ran = |r: ToolResult| r.data.map(|d| d["files"].clone());
    let timeout = Duration::from_secs(5);
    for _ in 0..3 {
        let r = pool.execute(call_with(&list), timeout).await.unwrap();
        assert_eq!(ran(r), Some(json!(3)));
    }
    assert_eq!(keeps.counts(), [1, 2, 0], "[whole, by digest, refused]");
    keeps.restart();
    let r = pool.execute(call_with(&list), timeout).await.unwrap();
    assert_eq!(ran(r), Some(json!(3)));
    assert_eq!(keeps.counts(), [2, 3, 1], "refused once, then sent whole");
    // A new version of the list goes whole at once.
    let changed: Arc<FileList> = Arc::new((0..2).map(file).collect());
    let r = pool.execute(call_with(&changed), timeout).await.unwrap();
    assert_eq!(ran(r), Some(json!(2)));
    assert_eq!(keeps.counts(), [3, 3, 1]);
}

/// With two executors taking calls in turn, each gets the list whole once: the one that
/// refused it gets the whole list itself, not the next in the round.
#[tokio::test]
async fn each_executor_of_a_pool_gets_the_list_whole_once() {
    let pki = pki();
    let (a, b) = (Keeps::new(), Keeps::new());
    let (addr_a, _sa) = serve_on(&pki, "127.0.0.1", Arc::clone(&a) as Arc<dyn RpcHandler>).await;
    let (addr_b, _sb) = serve_on(&pki, "127.0.0.5", Arc::clone(&b) as Arc<dyn RpcHandler>).await;
    let pool =
        ExecutorPool::new(&[addr_a, addr_b], crate::state::pki::core_files(&pki.state)).unwrap();
    pool.refresh().await;
    let list: Arc<FileList> = Arc::new(FileList::default());
    for _ in 0..6 {
        let r = pool.execute(call_with(&list), Duration::from_secs(5)).await;
        assert!(r.unwrap().success);
    }
    let (ca, cb) = (a.counts(), b.counts());
    assert_eq!(ca[0] + cb[0], 2, "whole once each: {ca:?} {cb:?}");
    assert_eq!([ca[0], cb[0]], [1, 1], "{ca:?} {cb:?}");
    assert!(ca[2] + cb[2] <= 1, "one refusal at most: {ca:?} {cb:?}");
    assert_eq!(ca[0] + ca[1] - ca[2] + cb[0] + cb[1] - cb[2], 6, "six runs");
}
