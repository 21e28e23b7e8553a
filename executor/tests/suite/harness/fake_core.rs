//! A fake core side for calls and sessions run in this process: it holds a context's
//! files in memory and answers `core.contextFileRead/Write/Delete` as the core does
//! (chunks in order, the digest checked on the last one), recording every method called;
//! and it serves a network call's egress streams with a [`FakeProxy`] of its own.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use base64::Engine;
use serde_json::{json, Value};
use skillbox_channel::stream::BoxedStream;
use skillbox_executor::broker::{CallInfo, CapabilityBroker};
use skillbox_executor::egress::EgressError;
use skillbox_protocol::jsonrpc::{code, ErrorObject};
use skillbox_protocol::methods::{
    CoreContextFileDeleteParams, CoreContextFileReadParams, CoreContextFileWriteParams,
};
use skillbox_protocol::workdir::{FileList, FileStreamHead, FileStreamRequest, WorkDir, WorkFile};

use super::fake_proxy::FakeProxy;

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The fake core (see the module docs).
#[derive(Debug, Default)]
pub struct FakeCore {
    /// The context's files.
    pub files: Mutex<BTreeMap<String, Vec<u8>>>,
    uploads: Mutex<BTreeMap<String, Vec<u8>>>,
    /// Every method called, with its path.
    pub log: Mutex<Vec<String>>,
    /// Every file stream served (`stream <path>`).
    pub stream_log: Arc<Mutex<Vec<String>>>,
    /// Refuse writes with this code and message (a quota).
    pub refuse_writes: Mutex<Option<(i64, String)>>,
    /// The egress proxy behind [`CapabilityBroker::egress`].
    pub proxy: Arc<FakeProxy>,
    /// The files held executable (as the last chunk of their write said).
    pub executable: Mutex<std::collections::BTreeSet<String>>,
    /// Serve file streams (`CapabilityBroker::file_stream`) as the core's `/file` does;
    /// off, files come in chunks.
    pub streams: std::sync::atomic::AtomicBool,
    /// End every file stream after this many bytes of the file.
    pub cut_streams_after: Mutex<Option<usize>>,
}

impl FakeCore {
    /// A core holding `files`.
    pub fn with(files: &[(&str, &[u8])]) -> Self {
        let core = Self::default();
        for (p, b) in files {
            core.files.lock().unwrap().insert(p.to_string(), b.to_vec());
        }
        core
    }

    /// The `WorkDir` a call in this context gets, with generous limits.
    pub fn workdir(&self) -> WorkDir {
        let files = self.files.lock().unwrap();
        WorkDir {
            files: files
                .iter()
                .map(|(p, b)| WorkFile {
                    path: p.clone(),
                    size: b.len() as u64,
                    sha256: sha256(b),
                    executable: self.executable.lock().unwrap().contains(p),
                })
                .collect::<FileList>()
                .into(),
            max_file_bytes: 1 << 20,
            max_total_bytes: 8 << 20,
            max_files: 100,
            ..WorkDir::default()
        }
    }

    /// The file's bytes, if held.
    pub fn file(&self, path: &str) -> Option<Vec<u8>> {
        self.files.lock().unwrap().get(path).cloned()
    }

    /// The methods called, in order (`method path`).
    pub fn calls(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn serve(&self, method: &str, params: Value) -> Result<Value, String> {
        let b64 = base64::engine::general_purpose::STANDARD;
        match method {
            "core.contextFileRead" => {
                let p: CoreContextFileReadParams = serde_json::from_value(params).unwrap();
                self.log
                    .lock()
                    .unwrap()
                    .push(format!("read {}", p.request.path));
                let files = self.files.lock().unwrap();
                let bytes = files.get(&p.request.path).ok_or("no such file")?;
                let start = usize::try_from(p.request.offset).unwrap().min(bytes.len());
                let end = (start + usize::try_from(p.request.len).unwrap()).min(bytes.len());
                Ok(json!({"data": b64.encode(&bytes[start..end]), "eof": end == bytes.len()}))
            }
            "core.contextFileWrite" => {
                let p: CoreContextFileWriteParams = serde_json::from_value(params).unwrap();
                let r = p.request;
                self.log.lock().unwrap().push(format!("write {}", r.path));
                if let Some((_, m)) = self.refuse_writes.lock().unwrap().clone() {
                    return Err(m);
                }
                let mut uploads = self.uploads.lock().unwrap();
                let buf = uploads.entry(r.path.clone()).or_default();
                assert_eq!(
                    usize::try_from(r.offset).unwrap(),
                    buf.len(),
                    "chunks out of order"
                );
                buf.extend(b64.decode(r.data).unwrap());
                if !r.last {
                    return Ok(json!({}));
                }
                let bytes = uploads.remove(&r.path).unwrap();
                assert_eq!(r.sha256.as_deref(), Some(sha256(&bytes).as_str()));
                let file = json!({"path": r.path, "size": bytes.len(), "sha256": sha256(&bytes)});
                let mut executable = self.executable.lock().unwrap();
                if r.executable {
                    executable.insert(r.path.clone());
                } else {
                    executable.remove(&r.path);
                }
                self.files.lock().unwrap().insert(r.path, bytes);
                Ok(json!({"file": file}))
            }
            "core.contextFileDelete" => {
                let p: CoreContextFileDeleteParams = serde_json::from_value(params).unwrap();
                self.log
                    .lock()
                    .unwrap()
                    .push(format!("delete {}", p.request.path));
                self.files.lock().unwrap().remove(&p.request.path);
                Ok(json!({}))
            }
            other => Err(format!("the fake core does not serve {other}")),
        }
    }
}

impl CapabilityBroker for FakeCore {
    async fn request(
        &self,
        _call: &CallInfo,
        method: &str,
        _params: Option<Value>,
    ) -> Result<Value, ErrorObject> {
        Err(ErrorObject::new(
            code::CAPABILITY_UNAVAILABLE,
            format!("{method}: no capabilities in this test"),
        ))
    }

    async fn forward(
        &self,
        core_method: &'static str,
        params: Value,
    ) -> Result<Value, ErrorObject> {
        // A real core answers over the network: the caller's other work runs meanwhile.
        tokio::task::yield_now().await;
        let refused = self.refuse_writes.lock().unwrap().clone();
        self.serve(core_method, params).map_err(|m| {
            let code = match (&refused, core_method) {
                (Some((c, _)), "core.contextFileWrite") => *c,
                _ => code::INVALID_PARAMS,
            };
            ErrorObject::new(code, m)
        })
    }

    /// A file stream as the core's `/file` serves one (when [`FakeCore::streams`] is on):
    /// the request line read, the head line, the file's bytes (cut off where
    /// [`FakeCore::cut_streams_after`] says), the end; `stream <path>` logged.
    async fn file_stream(&self, _call: &CallInfo) -> Option<BoxedStream> {
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        if !self.streams.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let (ours, theirs) = tokio::io::duplex(256 * 1024);
        let files = self.files.lock().unwrap().clone();
        let cut = *self.cut_streams_after.lock().unwrap();
        let log = Arc::clone(&self.stream_log);
        tokio::spawn(async move {
            let mut io = tokio::io::BufReader::new(theirs);
            let mut line = String::new();
            if io.read_line(&mut line).await.is_err() {
                return;
            }
            let request: FileStreamRequest = serde_json::from_str(&line).unwrap();
            log.lock().unwrap().push(format!("stream {}", request.path));
            let bytes = files.get(&request.path).cloned().unwrap_or_default();
            let head = FileStreamHead::Bytes {
                size: bytes.len() as u64,
            };
            let mut head = serde_json::to_vec(&head).unwrap();
            head.push(b'\n');
            let sent = &bytes[..cut.unwrap_or(bytes.len()).min(bytes.len())];
            let io = io.get_mut();
            let _ = io.write_all(&head).await;
            let _ = io.write_all(sent).await;
            let _ = io.shutdown().await;
        });
        Some(Box::new(ours))
    }

    /// A stream into [`FakeCore::proxy`], as the core's `/egress` gives one, with the
    /// call's id and token as the stream's headers carry them.
    async fn egress(&self, call: &CallInfo) -> Result<BoxedStream, EgressError> {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let proxy = Arc::clone(&self.proxy);
        let (id, token) = (call.call_id.clone(), call.capability_token.0.clone());
        tokio::spawn(async move { proxy.serve(id, token, theirs).await });
        Ok(Box::new(ours))
    }
}
