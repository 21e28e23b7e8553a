//! Lays a context's files out in a call's work folder before the spawn: parent folders
//! made (0700), each file written new (0644, or 0755 when the context holds it
//! executable), all owned by the call's user; the bytes
//! come from the [`BlobCache`] or from the core, over a file stream as raw bytes when the
//! file is large (`fetch_stream.rs`) or in chunks of
//! [`MAX_CHUNK_BYTES`](skillbox_protocol::workdir::MAX_CHUNK_BYTES), checked against the
//! file's size and SHA-256 before use. Files are taken by content, a few contents at a
//! time, and each content's files are written on a blocking thread (`place.rs`) as soon
//! as it is here, while the next ones are fetched.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use base64::Engine;
use ring::digest;
use skillbox_protocol::rpc::CoreContextFileRead;
use skillbox_protocol::workdir::{
    ContextFileReadParams, WorkFile, MAX_CHUNK_BYTES, STREAM_MIN_BYTES,
};

use super::fetch_stream::fetch_streamed;
use super::place::{self, place_all, ToPlace};
use super::{hex, path, Baseline, Known, Shelved, WorkDirError};
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
    // What was kept (only files of `files`, unchanged) is in place already.
    let mut baseline = Baseline {
        files: kept,
        owner: uid,
        tracked,
        ..Baseline::default()
    };
    let groups = by_content(work, files, |path| baseline.files.contains_key(path))?;
    make_folders(work, &groups, uid).await?;
    let placed = fetch_and_place_all(broker, call, cache, groups, uid).await?;
    baseline.files.extend(placed);
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

/// Contents fetched (or taken from the cache) and written at once by
/// [`fetch_and_place_all`].
const AT_ONCE: usize = 4;

/// The files of one content: the first as listed (what is fetched), and where each goes.
struct Group<'a> {
    file: &'a WorkFile,
    places: Vec<ToPlace>,
}

/// The files of `files` not yet in place (`is_placed`), by content in the order listed,
/// each with where it goes under `work`; a path that breaks the folder's rule fails them
/// all before anything is fetched.
fn by_content<'a>(
    work: &Path,
    files: &'a [WorkFile],
    is_placed: impl Fn(&str) -> bool,
) -> Result<Vec<Group<'a>>, WorkDirError> {
    let mut groups: Vec<Group<'a>> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for file in files.iter().filter(|f| !is_placed(&f.path)) {
        let parts = path::segments(&file.path).map_err(|reason| WorkDirError::BadPath {
            path: file.path.clone(),
            reason,
        })?;
        let place = ToPlace {
            path: file.path.clone(),
            target: parts.iter().fold(work.to_path_buf(), |p, s| p.join(s)),
            size: file.size,
            sha256: file.sha256.clone(),
            executable: file.executable,
        };
        match at.get(file.sha256.as_str()) {
            Some(&i) => groups[i].places.push(place),
            None => {
                at.insert(&file.sha256, groups.len());
                groups.push(Group {
                    file,
                    places: vec![place],
                });
            }
        }
    }
    Ok(groups)
}

/// Makes the folders the files of `groups` go in (0700, owned by `uid`), on a blocking
/// thread.
async fn make_folders(
    work: &Path,
    groups: &[Group<'_>],
    uid: Option<u32>,
) -> Result<(), WorkDirError> {
    let mut folders: Vec<(PathBuf, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for place in groups.iter().flat_map(|g| &g.places) {
        if let Some(parent) = place.target.parent() {
            if parent != work && seen.insert(parent.to_path_buf()) {
                folders.push((parent.to_path_buf(), place.path.clone()));
            }
        }
    }
    if folders.is_empty() {
        return Ok(());
    }
    let work = work.to_path_buf();
    let made = tokio::task::spawn_blocking(move || {
        for (folder, path) in folders {
            make_owned_dirs(&work, &folder, uid)
                .map_err(|source| WorkDirError::Write { path, source })?;
        }
        Ok(())
    });
    made.await.map_err(|e| WorkDirError::Write {
        path: String::new(),
        source: std::io::Error::other(e.to_string()),
    })?
}

/// Fetches each content of `groups` the cache lacks and writes its files,
/// [`AT_ONCE`] contents at a time, each content's files written on a blocking thread as
/// soon as it is here, while the next ones are fetched. On a failure no more are begun,
/// those under way are let finish (nothing writes into the folder after this returns),
/// and the first failure is returned.
async fn fetch_and_place_all<B: CapabilityBroker>(
    broker: &B,
    call: &CallInfo,
    cache: &BlobCache,
    groups: Vec<Group<'_>>,
    uid: Option<u32>,
) -> Result<Vec<(String, Known)>, WorkDirError> {
    use futures_util::stream::{FuturesUnordered, StreamExt};
    let mut waiting = groups.into_iter();
    let mut running = FuturesUnordered::new();
    let mut placed = Vec::new();
    let mut failed = None;
    loop {
        while failed.is_none() && running.len() < AT_ONCE {
            let Some(group) = waiting.next() else { break };
            running.push(fetch_and_place(broker, call, cache, group, uid));
        }
        match running.next().await {
            Some(Ok(files)) => placed.extend(files),
            Some(Err(e)) => {
                failed.get_or_insert(e);
            }
            None => break,
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(placed),
    }
}

/// One content: from the cache, else fetched into it (a large one written into its first
/// file as it comes), then its files written on a blocking thread.
async fn fetch_and_place<B: CapabilityBroker>(
    broker: &B,
    call: &CallInfo,
    cache: &BlobCache,
    mut group: Group<'_>,
    uid: Option<u32>,
) -> Result<Vec<(String, Known)>, WorkDirError> {
    let path = group.file.path.clone();
    let joined = |e: tokio::task::JoinError| WorkDirError::Write {
        path: path.clone(),
        source: std::io::Error::other(e.to_string()),
    };
    let (source, first) = match cache.open(&group.file.sha256) {
        Some(f) => (f, None),
        None if group.file.size >= STREAM_MIN_BYTES && !group.places.is_empty() => {
            let first = group.places.remove(0);
            let (first, out) = tokio::task::spawn_blocking(move || {
                let out = place::create(&first);
                (first, out)
            })
            .await
            .map_err(joined)?;
            let out = out?;
            let (source, written) =
                fetch_either(broker, call, cache, group.file, Some(&out)).await?;
            (
                source,
                Some(place::Started {
                    place: first,
                    out,
                    written,
                }),
            )
        }
        None => (
            fetch_either(broker, call, cache, group.file, None).await?.0,
            None,
        ),
    };
    let places = group.places;
    tokio::task::spawn_blocking(move || place_all(source, first, places, uid))
        .await
        .map_err(joined)?
}

/// Fetches `file` from the core into the cache, over a file stream when it is large
/// enough and the broker has one (`fetch_stream.rs`), else in chunks. With `copy_to`,
/// a stream writes the bytes there too: the flag says whether it did.
async fn fetch_either<B: CapabilityBroker>(
    broker: &B,
    call: &CallInfo,
    cache: &BlobCache,
    file: &WorkFile,
    copy_to: Option<&File>,
) -> Result<(File, bool), WorkDirError> {
    if file.size >= STREAM_MIN_BYTES {
        if let Some(fetched) = fetch_streamed(broker, call, cache, file, copy_to).await? {
            return Ok((fetched, copy_to.is_some()));
        }
    }
    Ok((fetch(broker, call, cache, file).await?, false))
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
