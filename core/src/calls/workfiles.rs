//! The files of a call made in a context, on the core's side (docs/sessions.md): the list
//! the call was sent with, the chunks of those files the executor asks for, and what the
//! executor sends back (files the call created, changed or removed). Every request is
//! judged against the call's own context: a file is read only when the call was sent it
//! (by path and digest), written and removed only in that context's folder, within its
//! quotas. The files accepted become the call result's `files`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use futures_util::Stream;
use http_body_util::StreamBody;
use hyper::body::Frame;
use serde_json::json;
use skillbox_protocol::jsonrpc::{code, ErrorObject};
use skillbox_protocol::workdir::{
    ContextFileChunk, ContextFileDeleteParams, ContextFileReadParams, ContextFileWriteParams,
    ContextFileWritten, FileList, WorkDir, WorkFile,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::contexts::files::{ContextFiles, FileError};
use crate::state::store::ContextFile;

/// Longest a file the executor sends back may take to arrive, chunk to chunk.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(300);

type ChunkStream = Pin<Box<dyn Stream<Item = Result<Frame<Bytes>, Infallible>> + Send>>;

/// A file on its way in from the executor.
struct Upload {
    /// The offset the next chunk must start at.
    next: u64,
    /// Where its chunks go; dropped to end the body.
    chunks: mpsc::Sender<Bytes>,
    /// The write into the context's folder.
    task: JoinHandle<Result<(ContextFile, bool), FileError>>,
}

/// The files of one call made in a context.
pub struct CallFiles {
    context_id: String,
    call_id: String,
    files: ContextFiles,
    /// The files the call was sent: the context's list as the core keeps it, shared.
    sent: Arc<FileList>,
    /// Path → SHA-256 of `sent`, made at the first lookup: a call that fetches and deletes
    /// nothing (its files were kept on the executor) makes none.
    sent_index: OnceLock<HashMap<String, String>>,
    written: Mutex<Vec<WorkFile>>,
    uploads: tokio::sync::Mutex<HashMap<String, Upload>>,
}

impl std::fmt::Debug for CallFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallFiles")
            .field("context_id", &self.context_id)
            .field("sent", &self.sent.len())
            .finish()
    }
}

impl CallFiles {
    /// The files of call `call_id` in `context_id`, which was sent `work`.
    pub fn new(files: ContextFiles, context_id: &str, call_id: &str, work: &WorkDir) -> Self {
        Self {
            context_id: context_id.to_string(),
            call_id: call_id.to_string(),
            files,
            sent: Arc::clone(&work.files),
            sent_index: OnceLock::new(),
            written: Mutex::default(),
            uploads: tokio::sync::Mutex::default(),
        }
    }

    /// The SHA-256 of `path` as the call was sent it.
    fn sent_digest(&self, path: &str) -> Option<&str> {
        let index = self.sent_index.get_or_init(|| {
            (self.sent.iter())
                .map(|f| (f.path.clone(), f.sha256.clone()))
                .collect()
        });
        index.get(path).map(String::as_str)
    }

    /// The context the call was made in.
    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    /// The files accepted since the last time this was asked, in the order they came.
    pub fn take_written(&self) -> Vec<WorkFile> {
        self.written
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default()
    }

    /// `core.contextFileRead`: a chunk of a file the call was sent, by path and digest.
    pub async fn read(&self, req: ContextFileReadParams) -> Result<ContextFileChunk, ErrorObject> {
        if self.sent_digest(&req.path) != Some(req.sha256.as_str()) {
            return Err(refused(format!(
                "file {:?} with that digest was not sent with this call",
                req.path
            )));
        }
        let (files, ctx) = (self.files.clone(), self.context_id.clone());
        let (bytes, eof) = tokio::task::spawn_blocking(move || {
            files.read_chunk(&ctx, &req.path, req.offset, req.len)
        })
        .await
        .map_err(|e| internal(e.to_string()))?
        .map_err(|e| file_error(&e))?;
        Ok(ContextFileChunk {
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
            eof,
        })
    }

    /// A file the call was sent (by path and digest), opened for a file stream
    /// (`calls/file_stream.rs`), and its size: refused as [`CallFiles::read`] refuses.
    pub async fn open_sent(
        &self,
        path: &str,
        sha256: &str,
    ) -> Result<(std::fs::File, u64), ErrorObject> {
        if self.sent_digest(path) != Some(sha256) {
            return Err(refused(format!(
                "file {path:?} with that digest was not sent with this call"
            )));
        }
        let (files, ctx, path) = (
            self.files.clone(),
            self.context_id.clone(),
            path.to_string(),
        );
        tokio::task::spawn_blocking(move || files.open_regular(&ctx, &path))
            .await
            .map_err(|e| internal(e.to_string()))?
            .map_err(|e| file_error(&e))
    }

    /// `core.contextFileWrite`: a chunk of a file the call created or changed; with the last
    /// chunk the file takes its place in the context's folder, written by the call.
    pub async fn write(
        &self,
        req: ContextFileWriteParams,
    ) -> Result<ContextFileWritten, ErrorObject> {
        let data = base64::engine::general_purpose::STANDARD
            .decode(req.data.as_bytes())
            .map_err(|e| invalid(format!("chunk data is not base64: {e}")))?;
        let mut uploads = self.uploads.lock().await;
        if req.offset == 0 {
            if let Some(old) = uploads.remove(&req.path) {
                old.task.abort();
            }
            uploads.insert(req.path.clone(), self.start_upload(&req.path));
        }
        let Some(upload) = uploads.get_mut(&req.path) else {
            return Err(invalid(format!(
                "a chunk of {:?} at offset {} came before the chunk at offset 0",
                req.path, req.offset
            )));
        };
        if upload.next != req.offset {
            let expected = upload.next;
            if let Some(old) = uploads.remove(&req.path) {
                old.task.abort();
            }
            return Err(invalid(format!(
                "chunk of {:?} at offset {} where {expected} was expected",
                req.path, req.offset
            )));
        }
        upload.next += data.len() as u64;
        if !data.is_empty() && upload.chunks.send(Bytes::from(data)).await.is_err() {
            // The write ended early (a quota): its error is the answer.
            let done = uploads.remove(&req.path);
            return Err(match done {
                Some(u) => finished(u.task.await)
                    .err()
                    .unwrap_or_else(|| internal("upload ended".into())),
                None => internal("upload ended".into()),
            });
        }
        if !req.last {
            return Ok(ContextFileWritten { file: None });
        }
        let Some(upload) = uploads.remove(&req.path) else {
            return Err(internal("upload lost".into()));
        };
        drop(uploads);
        drop(upload.chunks);
        let file = finished(upload.task.await)?;
        if req.sha256.as_deref().is_some_and(|s| s != file.sha256) {
            tracing::warn!(path = %file.path, "the executor's digest of a file differs from the bytes that arrived");
        }
        if req.executable {
            let (files, ctx, path) = (
                self.files.clone(),
                self.context_id.clone(),
                file.path.clone(),
            );
            tokio::task::spawn_blocking(move || files.set_executable(&ctx, &path, true))
                .await
                .map_err(|e| internal(e.to_string()))?
                .map_err(|e| file_error(&e))?;
        }
        let written = WorkFile {
            path: file.path,
            size: file.size,
            sha256: file.sha256,
            executable: req.executable,
        };
        if let Ok(mut w) = self.written.lock() {
            w.retain(|f| f.path != written.path);
            w.push(written.clone());
        }
        Ok(ContextFileWritten {
            file: Some(written),
        })
    }

    /// `core.contextFileDelete`: a file the call was sent (or wrote) and removed.
    pub async fn delete(&self, req: ContextFileDeleteParams) -> Result<(), ErrorObject> {
        let wrote = self
            .written
            .lock()
            .map(|w| w.iter().any(|f| f.path == req.path))
            .unwrap_or(false);
        if self.sent_digest(&req.path).is_none() && !wrote {
            return Err(refused(format!(
                "file {:?} was not sent with this call nor written by it",
                req.path
            )));
        }
        let (files, ctx) = (self.files.clone(), self.context_id.clone());
        let path = req.path.clone();
        let outcome = tokio::task::spawn_blocking(move || files.delete(&ctx, &path))
            .await
            .map_err(|e| internal(e.to_string()))?;
        match outcome {
            Ok(()) | Err(FileError::NotFound { .. }) => {}
            Err(e) => return Err(file_error(&e)),
        }
        if let Ok(mut w) = self.written.lock() {
            w.retain(|f| f.path != req.path);
        }
        Ok(())
    }

    fn start_upload(&self, path: &str) -> Upload {
        let (tx, rx) = mpsc::channel::<Bytes>(4);
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|b| (Ok(Frame::data(b)), rx))
        });
        let body = StreamBody::new(Box::pin(stream) as ChunkStream);
        let (files, ctx, path, by) = (
            self.files.clone(),
            self.context_id.clone(),
            path.to_string(),
            self.call_id.clone(),
        );
        let task =
            tokio::spawn(async move { files.put_by(&ctx, &path, body, UPLOAD_TIMEOUT, &by).await });
        Upload {
            next: 0,
            chunks: tx,
            task,
        }
    }
}

fn finished(
    joined: Result<Result<(ContextFile, bool), FileError>, tokio::task::JoinError>,
) -> Result<ContextFile, ErrorObject> {
    match joined {
        Ok(Ok((file, _))) => Ok(file),
        Ok(Err(e)) => Err(file_error(&e)),
        Err(e) => Err(internal(e.to_string())),
    }
}

/// A context-file error as the executor gets it: the message, and its kind in `data`.
fn file_error(e: &FileError) -> ErrorObject {
    let kind = e.error_kind();
    let code = match kind {
        skillbox_protocol::result::ErrorKind::ResourceLimit => code::RESOURCE_LIMIT,
        skillbox_protocol::result::ErrorKind::InvalidArgs
        | skillbox_protocol::result::ErrorKind::NotFound => code::INVALID_PARAMS,
        _ => code::INTERNAL_ERROR,
    };
    ErrorObject {
        code,
        message: e.to_string(),
        data: Some(json!({"kind": kind.as_str()})),
    }
}

fn refused(message: String) -> ErrorObject {
    ErrorObject {
        code: code::PERMISSION_DENIED,
        message,
        data: Some(json!({"kind": "permission_denied"})),
    }
}

fn invalid(message: String) -> ErrorObject {
    ErrorObject {
        code: code::INVALID_PARAMS,
        message,
        data: Some(json!({"kind": "invalid_args"})),
    }
}

fn internal(message: String) -> ErrorObject {
    ErrorObject {
        code: code::INTERNAL_ERROR,
        message,
        data: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::state::config::files::FilesSection;
    use crate::state::store::Store;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    async fn setup(limits: FilesSection) -> (tempfile::TempDir, ContextFiles, CallFiles) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Store::db_path(dir.path())).unwrap();
        let files = ContextFiles::new(dir.path(), store, limits);
        let body = http_body_util::Full::new(Bytes::from_static(b"hello"));
        files
            .put("c1", "in.txt", body, Duration::from_secs(5))
            .await
            .unwrap();
        let work = files.work_dir("c1").unwrap();
        let call = CallFiles::new(files.clone(), "c1", "call-1", &work);
        (dir, files, call)
    }

    fn write(path: &str, offset: u64, data: &[u8], last: bool) -> ContextFileWriteParams {
        ContextFileWriteParams {
            path: path.into(),
            offset,
            data: b64(data),
            last,
            sha256: None,
            executable: false,
        }
    }

    #[tokio::test]
    async fn a_file_sent_back_in_chunks_lands_in_the_context_written_by_the_call() {
        let (_dir, files, call) = setup(FilesSection::default()).await;
        let first = call
            .write(write("out/a.txt", 0, b"abc", false))
            .await
            .unwrap();
        assert_eq!(first.file, None);
        let done = call
            .write(write("out/a.txt", 3, b"def", true))
            .await
            .unwrap();
        let file = done.file.unwrap();
        assert_eq!((file.path.as_str(), file.size), ("out/a.txt", 6));
        let (record, bytes) = files.get("c1", "out/a.txt").unwrap();
        assert_eq!(bytes, b"abcdef");
        assert_eq!(record.written_by, "call-1");
        assert_eq!(call.take_written(), [file]);
        assert!(call.take_written().is_empty(), "taken once");
    }

    #[tokio::test]
    async fn a_file_the_call_left_executable_is_laid_out_executable_for_the_next() {
        let (_dir, files, call) = setup(FilesSection::default()).await;
        let mut last = write("run.sh", 0, b"#!/bin/sh\n", true);
        last.executable = true;
        let file = call.write(last).await.unwrap().file.unwrap();
        assert!(file.executable);
        let work = files.work_dir("c1").unwrap();
        let run = work.files.iter().find(|f| f.path == "run.sh").unwrap();
        assert!(run.executable, "{work:?}");
        let upload = work.files.iter().find(|f| f.path == "in.txt").unwrap();
        assert!(!upload.executable);
        // Written again without the bit: it is gone.
        call.write(write("run.sh", 0, b"#!/bin/sh\n", true))
            .await
            .unwrap();
        assert!(!files.work_dir("c1").unwrap().files[1].executable);
    }

    #[tokio::test]
    async fn chunks_out_of_order_are_refused_and_nothing_lands() {
        let (_dir, files, call) = setup(FilesSection::default()).await;
        let e = call.write(write("b.txt", 5, b"x", true)).await.unwrap_err();
        assert!(
            e.message.contains("before the chunk at offset 0"),
            "{}",
            e.message
        );
        call.write(write("b.txt", 0, b"abc", false)).await.unwrap();
        let e = call.write(write("b.txt", 7, b"x", true)).await.unwrap_err();
        assert!(e.message.contains("where 3 was expected"), "{}", e.message);
        assert!(files.get("c1", "b.txt").is_err());
    }

    #[tokio::test]
    async fn a_file_over_the_quota_is_refused_with_its_reason() {
        let limits = FilesSection {
            max_file_bytes: 6,
            ..FilesSection::default()
        };
        let (_dir, _files, call) = setup(limits).await;
        let e = call
            .write(write("big.bin", 0, b"0123456789", true))
            .await
            .unwrap_err();
        assert!(e.message.contains("max_file_bytes"), "{}", e.message);
        assert_eq!(e.data.unwrap()["kind"], "resource_limit");
        assert_eq!(e.code, code::RESOURCE_LIMIT);
    }

    #[tokio::test]
    async fn only_files_sent_with_the_call_are_read_or_removed() {
        let (_dir, files, call) = setup(FilesSection::default()).await;
        let sha = files.list("c1").unwrap()[0].sha256.clone();
        let read = |path: &str, sha: &str| ContextFileReadParams {
            path: path.into(),
            sha256: sha.into(),
            offset: 0,
            len: 1 << 20,
        };
        let chunk = call.read(read("in.txt", &sha)).await.unwrap();
        assert_eq!(chunk.data, b64(b"hello"));
        assert!(chunk.eof);
        let e = call.read(read("in.txt", "00")).await.unwrap_err();
        assert_eq!(e.code, code::PERMISSION_DENIED);
        let e = call.read(read("../other/x", &sha)).await.unwrap_err();
        assert_eq!(e.code, code::PERMISSION_DENIED);
        let e = call
            .delete(ContextFileDeleteParams {
                path: "never-sent.txt".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code, code::PERMISSION_DENIED);
        call.delete(ContextFileDeleteParams {
            path: "in.txt".into(),
        })
        .await
        .unwrap();
        assert!(files.list("c1").unwrap().is_empty());
    }
}
