//! A context file fetched over a file stream of the channel (`POST /file`): the request
//! line, the core's head line, then the raw bytes, written into the blob cache and hashed
//! by a blocking task while the next bytes arrive, so that neither the disk nor the hash
//! runs on the async threads; given a file of the call's folder too, a second blocking
//! task writes the same bytes there as they come (the lay-out then has nothing to copy
//! for it). Used for files of
//! [`STREAM_MIN_BYTES`](skillbox_protocol::workdir::STREAM_MIN_BYTES) and up when the
//! broker has streams; a core that does not serve them closes the stream before its head,
//! and the file then comes in chunks (`layout.rs`).

use std::fs::File;
use std::io::Write;
use std::sync::Arc;

use ring::digest;
use skillbox_protocol::workdir::{
    FileStreamHead, FileStreamRequest, WorkFile, MAX_STREAM_LINE_BYTES,
};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::{hex, WorkDirError};
use crate::blobs::{BlobCache, Incoming};
use crate::broker::{CallInfo, CapabilityBroker};

/// Bytes read from the stream before they go to the writer.
const PIECE_BYTES: usize = 1024 * 1024;

/// Pieces on their way to the writer at most.
const PIECES_IN_FLIGHT: usize = 4;

/// `file` fetched over a file stream into `cache`, checked, and returned open; `None`
/// when no stream could be had (the caller fetches it in chunks, and nothing was written
/// to `copy_to`). With `copy_to` (a new, empty file of the call's folder), the bytes are
/// written there too as they come: when this returns the cache's file, `copy_to` holds
/// them all.
pub(super) async fn fetch_streamed<B: CapabilityBroker>(
    broker: &B,
    call: &CallInfo,
    cache: &BlobCache,
    file: &WorkFile,
    copy_to: Option<&File>,
) -> Result<Option<File>, WorkDirError> {
    let Some(mut io) = broker.file_stream(call).await else {
        return Ok(None);
    };
    let request = FileStreamRequest {
        path: file.path.clone(),
        sha256: file.sha256.clone(),
    };
    let Ok(mut line) = serde_json::to_vec(&request) else {
        return Ok(None);
    };
    line.push(b'\n');
    if io.write_all(&line).await.is_err() || io.flush().await.is_err() {
        return Ok(None);
    }
    let mut io = BufReader::with_capacity(PIECE_BYTES, io);
    let mut head = Vec::new();
    let limit = MAX_STREAM_LINE_BYTES as u64 + 1;
    match (&mut io).take(limit).read_until(b'\n', &mut head).await {
        Ok(_) if head.ends_with(b"\n") => {}
        // Closed before its head: a core that serves no file streams.
        _ => return Ok(None),
    }
    let mismatch = |what| WorkDirError::Mismatch {
        path: file.path.clone(),
        what,
    };
    match serde_json::from_slice::<FileStreamHead>(&head) {
        Ok(FileStreamHead::Bytes { size }) if size == file.size => {}
        Ok(FileStreamHead::Bytes { .. }) => return Err(mismatch("size")),
        Ok(FileStreamHead::Error(error)) => {
            return Err(WorkDirError::Fetch {
                path: file.path.clone(),
                error,
            })
        }
        Err(_) => return Ok(None),
    }
    let write_error = |source| WorkDirError::Write {
        path: file.path.clone(),
        source,
    };
    let incoming = cache.incoming().map_err(write_error)?;
    let (pieces, received) = mpsc::channel::<Arc<Vec<u8>>>(PIECES_IN_FLIGHT);
    let writer = tokio::task::spawn_blocking(move || write_pieces(incoming, received));
    let mut copier = Copier::start(copy_to).map_err(write_error)?;
    let mut total = 0u64;
    let received_all = loop {
        let piece = match next_piece(&mut io).await {
            Ok(Some(piece)) => Arc::new(piece),
            Ok(None) => break true,
            Err(_) => break false,
        };
        total += piece.len() as u64;
        if let Some(copier) = &copier {
            copier.send(&piece).await;
        }
        if total > file.size || pieces.send(piece).await.is_err() {
            break true;
        }
    };
    drop(pieces);
    // The copy into the call's folder has ended before anything returns: nothing writes
    // there afterwards.
    let copied = match copier.take() {
        Some(copier) => Some(copier.finish().await.map_err(write_error)?),
        None => None,
    };
    if !received_all {
        return Err(mismatch("size"));
    }
    let (incoming, sha256, written) = writer
        .await
        .map_err(|e| write_error(std::io::Error::other(e.to_string())))?
        .map_err(write_error)?;
    if copied.is_some_and(|copied| copied != total) {
        return Err(mismatch("size"));
    }
    if total != file.size || written != file.size {
        return Err(mismatch("size"));
    }
    if sha256 != file.sha256 {
        return Err(mismatch("SHA-256"));
    }
    cache
        .keep(incoming, &file.sha256, file.size)
        .map(Some)
        .map_err(write_error)
}

/// Writes the pieces into `incoming` as they come, hashing them; its SHA-256 and the
/// bytes written once the sender is gone.
fn write_pieces(
    mut incoming: Incoming,
    mut pieces: mpsc::Receiver<Arc<Vec<u8>>>,
) -> std::io::Result<(Incoming, String, u64)> {
    let mut hash = digest::Context::new(&digest::SHA256);
    let mut written = 0u64;
    while let Some(piece) = pieces.blocking_recv() {
        hash.update(&piece);
        incoming.file.write_all(&piece)?;
        written += piece.len() as u64;
    }
    Ok((incoming, hex(hash.finish().as_ref()), written))
}

/// Writes the pieces into `out` (a file of the call's folder) as they come; the bytes
/// written once the sender is gone. Stops at the first failed write.
fn copy_pieces(mut out: File, mut pieces: mpsc::Receiver<Arc<Vec<u8>>>) -> std::io::Result<u64> {
    let mut written = 0u64;
    while let Some(piece) = pieces.blocking_recv() {
        out.write_all(&piece)?;
        written += piece.len() as u64;
    }
    Ok(written)
}

/// The next piece of the stream, up to [`PIECE_BYTES`]; `None` at its end.
async fn next_piece<R: AsyncRead + Unpin>(io: &mut R) -> std::io::Result<Option<Vec<u8>>> {
    let mut piece = vec![0u8; PIECE_BYTES];
    let mut filled = 0;
    while filled < piece.len() {
        match io.read(&mut piece[filled..]).await? {
            0 => break,
            n => filled += n,
        }
    }
    piece.truncate(filled);
    Ok((filled > 0).then_some(piece))
}

/// The blocking task that writes the pieces into a file of the call's folder too.
struct Copier {
    pieces: mpsc::Sender<Arc<Vec<u8>>>,
    task: tokio::task::JoinHandle<std::io::Result<u64>>,
}

impl Copier {
    /// Starts copying into (a duplicate of) `copy_to`, if given.
    fn start(copy_to: Option<&File>) -> std::io::Result<Option<Self>> {
        let Some(out) = copy_to.map(File::try_clone).transpose()? else {
            return Ok(None);
        };
        let (pieces, received) = mpsc::channel::<Arc<Vec<u8>>>(PIECES_IN_FLIGHT);
        let task = tokio::task::spawn_blocking(move || copy_pieces(out, received));
        Ok(Some(Self { pieces, task }))
    }

    /// Hands it `piece`; a copy that failed has ended its task, and says so in [`Copier::finish`].
    async fn send(&self, piece: &Arc<Vec<u8>>) {
        let _ = self.pieces.send(Arc::clone(piece)).await;
    }

    /// Waits for the task to end: the bytes it wrote, or its failure.
    async fn finish(self) -> std::io::Result<u64> {
        drop(self.pieces);
        self.task
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?
    }
}
