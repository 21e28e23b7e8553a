//! Lays a context's files out in a call's work folder before the spawn: parent folders
//! made (0700), each file written new (0644, or 0755 when the context holds it
//! executable), all owned by the call's user; the bytes
//! come from the [`BlobCache`] or from the core, over a file stream as raw bytes when the
//! file is large (`fetch_stream.rs`) or in chunks of
//! [`MAX_CHUNK_BYTES`](skillbox_protocol::workdir::MAX_CHUNK_BYTES), checked against the
//! file's size and SHA-256 before use.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use base64::Engine;
use ring::digest;
use skillbox_protocol::rpc::CoreContextFileRead;
use skillbox_protocol::workdir::{
    ContextFileReadParams, WorkFile, MAX_CHUNK_BYTES, STREAM_MIN_BYTES,
};

use super::fetch_stream::fetch_streamed;
use super::{hex, path, Baseline, Known, Shelved, Stamp, WorkDirError};
use crate::blobs::BlobCache;
use crate::broker::{core_call, CallInfo, CapabilityBroker};
use crate::sandbox::scratch::make_owned_dirs;

/// Writes every file of `files` under `work` (which exists), owned by `uid` when given,
/// and returns what was written, for the sync after the call. With `kept` (the context's
/// folder an earlier call on this executor left, [`super::shelf`]) the files it holds
/// unchanged stay as they are and only the others are written.
pub async fn lay_out<B: CapabilityBroker>(
    broker: &B,
    call: &CallInfo,
    cache: &BlobCache,
    work: &Path,
    uid: Option<u32>,
    files: &[WorkFile],
    kept: Option<Shelved>,
) -> Result<Baseline, WorkDirError> {
    let super::shelf::Adopted {
        files: kept,
        tracked,
        exact,
    } = match kept {
        Some(shelved) => super::shelf::adopt(shelved, work, uid, files),
        None => Default::default(),
    };
    // What was kept holds only files of `files`, unchanged: as many means all of them.
    if kept.len() == files.len() {
        return Ok(Baseline {
            files: kept,
            owner: uid,
            tracked,
            ..Baseline::default()
        });
    }
    if let Some(t) = &tracked {
        t.touch();
    }
    tracing::debug!(
        kept = kept.len(),
        files = files.len(),
        "laying out the files not kept"
    );
    let missing = to_prefetch(cache, files, |path| kept.contains_key(path));
    prefetch(broker, call, cache, missing).await?;
    // What was kept (only files of `files`, unchanged) is in place already.
    let mut baseline = Baseline {
        files: kept,
        owner: uid,
        tracked,
        ..Baseline::default()
    };
    for file in files {
        if baseline.files.contains_key(&file.path) {
            continue;
        }
        let parts = path::segments(&file.path).map_err(|reason| WorkDirError::BadPath {
            path: file.path.clone(),
            reason,
        })?;
        let write_error = |source| WorkDirError::Write {
            path: file.path.clone(),
            source,
        };
        let target = parts.iter().fold(work.to_path_buf(), |p, s| p.join(s));
        if let Some(parent) = target.parent() {
            make_owned_dirs(work, parent, uid).map_err(write_error)?;
        }
        let mut source = match cache.open(&file.sha256) {
            Some(f) => f,
            None => fetch_either(broker, call, cache, file).await?,
        };
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&target)
            .map_err(write_error)?;
        let copied = std::io::copy(&mut source, &mut out).map_err(write_error)?;
        if copied != file.size {
            return Err(WorkDirError::Mismatch {
                path: file.path.clone(),
                what: "size",
            });
        }
        let mode = if file.executable { 0o755 } else { 0o644 };
        out.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(write_error)?;
        if let Some(uid) = uid {
            std::os::unix::fs::fchown(&out, Some(uid), Some(uid)).map_err(write_error)?;
        }
        let st = nix::sys::stat::fstat(&out).map_err(|e| write_error(e.into()))?;
        baseline.files.insert(
            file.path.clone(),
            Known {
                stamp: Stamp::of(&st),
                sha256: file.sha256.clone(),
                executable: file.executable,
            },
        );
    }
    if exact {
        watch_again(&mut baseline, work);
    }
    Ok(baseline)
}

/// A folder that holds exactly `baseline`'s files now, as a settled sync would find it,
/// and that only the executor wrote to since it was settled: watched again (the
/// lay-out's own events drained first), so the sync after the call walks it only if the
/// call changes something in it.
fn watch_again(baseline: &mut Baseline, work: &Path) {
    baseline.tracked = super::watch::arm(baseline.tracked.take(), work, &baseline.files);
}

/// Files fetched from the core at once by [`prefetch`].
const PREFETCH_AT_ONCE: usize = 4;

/// The files of `files` to fetch ahead ([`prefetch`]): those that neither the cache nor
/// the kept folder (`is_kept`) holds, each content once, and only as many bytes as half
/// the cache holds (more would push out what was fetched before it is laid out; the rest
/// come one by one in [`lay_out`]).
fn to_prefetch<'a>(
    cache: &BlobCache,
    files: &'a [WorkFile],
    is_kept: impl Fn(&str) -> bool,
) -> Vec<&'a WorkFile> {
    let mut seen = std::collections::HashSet::new();
    let mut budget = cache.cap_bytes() / 2;
    (files.iter())
        .filter(|f| !is_kept(&f.path) && seen.insert(f.sha256.as_str()))
        .filter(|f| cache.open(&f.sha256).is_none())
        .take_while(|f| match budget.checked_sub(f.size) {
            Some(left) => {
                budget = left;
                true
            }
            None => false,
        })
        .collect()
}

/// Fetches `missing` into the cache, [`PREFETCH_AT_ONCE`] at a time, so that a context
/// of many files does not wait for each file's round trips in turn. Fails as the first
/// failed fetch.
async fn prefetch<B: CapabilityBroker>(
    broker: &B,
    call: &CallInfo,
    cache: &BlobCache,
    missing: Vec<&WorkFile>,
) -> Result<(), WorkDirError> {
    use futures_util::stream::{FuturesUnordered, StreamExt};
    if missing.len() < 2 {
        return Ok(());
    }
    let mut waiting = missing.into_iter();
    let mut running = FuturesUnordered::new();
    loop {
        while running.len() < PREFETCH_AT_ONCE {
            let Some(file) = waiting.next() else { break };
            running.push(fetch_either(broker, call, cache, file));
        }
        match running.next().await {
            Some(fetched) => drop(fetched?),
            None => return Ok(()),
        }
    }
}

/// Fetches `file` from the core into the cache, over a file stream when it is large
/// enough and the broker has one (`fetch_stream.rs`), else in chunks.
async fn fetch_either<B: CapabilityBroker>(
    broker: &B,
    call: &CallInfo,
    cache: &BlobCache,
    file: &WorkFile,
) -> Result<File, WorkDirError> {
    if file.size >= STREAM_MIN_BYTES {
        if let Some(fetched) = fetch_streamed(broker, call, cache, file).await? {
            return Ok(fetched);
        }
    }
    fetch(broker, call, cache, file).await
}

/// Fetches `file` from the core into the cache in chunks, checks it, and returns it open.
async fn fetch<B: CapabilityBroker>(
    broker: &B,
    call: &CallInfo,
    cache: &BlobCache,
    file: &WorkFile,
) -> Result<File, WorkDirError> {
    let write_error = |source| WorkDirError::Write {
        path: file.path.clone(),
        source,
    };
    let mismatch = |what| WorkDirError::Mismatch {
        path: file.path.clone(),
        what,
    };
    let mut incoming = cache.incoming().map_err(write_error)?;
    let mut hash = digest::Context::new(&digest::SHA256);
    let mut offset = 0u64;
    loop {
        let len = (file.size - offset).min(MAX_CHUNK_BYTES as u64);
        let request = ContextFileReadParams {
            path: file.path.clone(),
            sha256: file.sha256.clone(),
            offset,
            len,
        };
        let chunk = core_call::<CoreContextFileRead, _, _>(broker, call, request)
            .await
            .map_err(|error| WorkDirError::Fetch {
                path: file.path.clone(),
                error,
            })?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(chunk.data.as_bytes())
            .map_err(|_| mismatch("encoding (base64)"))?;
        offset += data.len() as u64;
        if offset > file.size || (data.is_empty() && !chunk.eof) {
            return Err(mismatch("size"));
        }
        hash.update(&data);
        incoming.file.write_all(&data).map_err(write_error)?;
        if chunk.eof {
            break;
        }
    }
    if offset != file.size {
        return Err(mismatch("size"));
    }
    if hex(hash.finish().as_ref()) != file.sha256 {
        return Err(mismatch("SHA-256"));
    }
    cache
        .keep(incoming, &file.sha256, file.size)
        .map_err(write_error)
}

/// SHA-256 of what `file` holds from its start, as lowercase hex (rewinds it after).
pub(super) fn digest_of(file: &mut File) -> std::io::Result<String> {
    file.rewind()?;
    let mut hash = digest::Context::new(&digest::SHA256);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
    }
    file.rewind()?;
    Ok(hex(hash.finish().as_ref()))
}
