//! An upload's bytes from the request body to its temporary file ([`spool`]), off the
//! async threads.
//!
//! hyper hands a body over in frames no larger than the connection's read buffer (32 KiB,
//! `MAX_HEAD_BYTES` of the gateway's server). Writing each frame on its own would cost a
//! hop to the blocking threads and a `write` per frame; hashing it where it arrives would
//! hold the async thread. Instead the frames are gathered into batches of
//! [`BATCH_BYTES`]; each batch is hashed on one blocking thread and written (one
//! `writev`) on another at the same time, while the next batch is gathered: at most two
//! batches of an upload are in memory, and no blocking thread is held while the body is
//! slow to come. Each batch's writeback to disk is started as soon as it is written
//! ([`start_writeback`]), so the one `fsync` at the end, before the file may be renamed
//! in, has little left to wait for.

use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::os::fd::AsRawFd;

use bytes::Bytes;
use http_body_util::BodyExt;
use ring::digest::{Context as Digest, SHA256};
use tokio::task::JoinHandle;

use super::hex;

/// The bytes gathered before they are hashed and written.
pub const BATCH_BYTES: usize = 1024 * 1024;

/// Why a spool stopped.
#[derive(Debug)]
pub(super) enum SpoolError {
    /// More than the room given came.
    Over,
    /// The body broke (the connection closed, or sent something wrong).
    Body(String),
    /// The file could not be written or synced.
    Io(io::Error),
}

/// Copies `body` into `file`, at most `room` bytes, then syncs it; the size and hex
/// SHA-256 of what came.
pub(super) async fn spool<B>(
    mut body: B,
    file: File,
    room: u64,
) -> Result<(u64, String), SpoolError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut writer = Writer::Idle(Written { file, len: 0 }, Box::new(Digest::new(&SHA256)));
    let mut batch = Vec::new();
    let (mut batched, mut size) = (0usize, 0u64);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| SpoolError::Body(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        size = size.saturating_add(u64::try_from(data.len()).unwrap_or(u64::MAX));
        if size > room {
            return Err(SpoolError::Over);
        }
        batched += data.len();
        batch.push(data);
        if batched >= BATCH_BYTES {
            writer = writer.write(std::mem::take(&mut batch)).await?;
            batched = 0;
        }
    }
    if !batch.is_empty() {
        writer = writer.write(batch).await?;
    }
    let digest = writer.sync().await?;
    Ok((size, hex(digest.finish())))
}

/// The temporary file, how many bytes went into it and their digest: idle, or with a
/// batch being hashed and written, at once, on two blocking threads.
enum Writer {
    Idle(Written, Box<Digest>),
    Busy {
        hashing: JoinHandle<Box<Digest>>,
        writing: JoinHandle<io::Result<Written>>,
    },
}

/// The temporary file and the bytes written to it so far.
struct Written {
    file: File,
    len: u64,
}

impl Writer {
    /// Waits for the batch being written, if any, then starts hashing and writing `batch`.
    async fn write(self, batch: Vec<Bytes>) -> Result<Writer, SpoolError> {
        let (written, mut digest) = self.settle().await?;
        let hashed = batch.clone();
        Ok(Writer::Busy {
            hashing: tokio::task::spawn_blocking(move || {
                for data in &hashed {
                    digest.update(data);
                }
                digest
            }),
            writing: tokio::task::spawn_blocking(move || write_batch(written, &batch)),
        })
    }

    /// Waits for the last batch, then syncs the file; the digest of every byte written.
    async fn sync(self) -> Result<Box<Digest>, SpoolError> {
        let (written, digest) = self.settle().await?;
        let synced = tokio::task::spawn_blocking(move || written.file.sync_all().map(|()| digest));
        synced.await.map_err(joined)?.map_err(SpoolError::Io)
    }

    /// The file and digest once no batch is being hashed or written.
    async fn settle(self) -> Result<(Written, Box<Digest>), SpoolError> {
        match self {
            Writer::Idle(written, digest) => Ok((written, digest)),
            Writer::Busy { hashing, writing } => {
                let written = writing.await.map_err(joined)?.map_err(SpoolError::Io)?;
                Ok((written, hashing.await.map_err(joined)?))
            }
        }
    }
}

/// A blocking task that panicked (or was cancelled at shutdown), as a write error.
fn joined(e: tokio::task::JoinError) -> SpoolError {
    SpoolError::Io(io::Error::other(e))
}

/// Writes `batch` after what `written` holds, one `writev` when the kernel takes it
/// whole, and starts its writeback to disk. Blocking.
fn write_batch(mut written: Written, batch: &[Bytes]) -> io::Result<Written> {
    let mut slices: Vec<IoSlice<'_>> = batch.iter().map(|d| IoSlice::new(d)).collect();
    let mut left = &mut slices[..];
    let start = written.len;
    while !left.is_empty() {
        match written.file.write_vectored(left) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                IoSlice::advance_slices(&mut left, n);
                written.len = written
                    .len
                    .saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    start_writeback(&written.file, start, written.len.saturating_sub(start));
    Ok(written)
}

/// Asks the kernel to start writing `len` bytes of `file` from `at` to disk now
/// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, without waiting for them), so that the disk
/// works while the rest of the upload arrives and the `fsync` at the end has little left
/// to wait for (measured: 50 ms of a 100 MiB upload's `fsync` down to 1 ms). Only a hint:
/// a failure is ignored, the `fsync` still makes the file durable. Blocking.
fn start_writeback(file: &File, at: u64, len: u64) {
    let (Ok(at), Ok(len)) = (i64::try_from(at), i64::try_from(len)) else {
        return;
    };
    // SAFETY: `sync_file_range` takes a descriptor and plain integers and touches no
    // memory of ours; the descriptor is `file`'s, open for the whole call since `file` is
    // borrowed. Its only effect is to queue writeback of the file's own pages.
    let _ =
        unsafe { libc::sync_file_range(file.as_raw_fd(), at, len, libc::SYNC_FILE_RANGE_WRITE) };
}

#[cfg(test)]
mod tests {
    use http_body_util::StreamBody;

    use super::*;

    /// A stream of body frames.
    type Frames = futures_util::stream::Iter<
        std::vec::IntoIter<Result<hyper::body::Frame<Bytes>, std::convert::Infallible>>,
    >;

    /// A body of `frames` data frames.
    fn frames(frames: Vec<Bytes>) -> StreamBody<Frames> {
        let frames: Vec<_> = (frames.into_iter())
            .map(|b| Ok(hyper::body::Frame::data(b)))
            .collect();
        StreamBody::new(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn spool_writes_every_frame_in_order_across_batches_and_hashes_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        // 32 KiB frames as hyper gives them, some odd ones, across three batches.
        let mut all = Vec::new();
        let mut parts = Vec::new();
        for i in 0..80usize {
            let len = if i % 7 == 3 { 1 + i * 13 } else { 32 * 1024 };
            let part: Vec<u8> = (0..len)
                .map(|j| u8::try_from((j + i) % 251).unwrap())
                .collect();
            all.extend_from_slice(&part);
            parts.push(Bytes::from(part));
        }
        let file = File::create(&path).unwrap();
        let (size, sha) = spool(frames(parts), file, u64::MAX).await.unwrap();
        assert_eq!(size, all.len() as u64);
        assert_eq!(sha, hex(ring::digest::digest(&SHA256, &all)));
        assert!(std::fs::read(&path).unwrap() == all, "the file differs");
    }

    #[tokio::test]
    async fn spool_stops_past_its_room() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("f")).unwrap();
        let parts = vec![Bytes::from(vec![1u8; 600]), Bytes::from(vec![2u8; 600])];
        let err = spool(frames(parts), file, 1000).await.unwrap_err();
        assert!(matches!(err, SpoolError::Over), "{err:?}");
    }
}
