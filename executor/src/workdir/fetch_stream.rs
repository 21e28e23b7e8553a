//! A context file fetched over a file stream of the channel (`POST /file`): the request
//! line, the core's head line, then the raw bytes, written into the blob cache and hashed
//! by a blocking task while the next bytes arrive, so that neither the disk nor the hash
//! runs on the async threads. Used for files of
//! [`STREAM_MIN_BYTES`](skillbox_protocol::workdir::STREAM_MIN_BYTES) and up when the
//! broker has streams; a core that does not serve them closes the stream before its head,
//! and the file then comes in chunks (`layout.rs`).

use std::fs::File;
use std::io::Write;

use ring::digest;
use skillbox_protocol::workdir::{
    FileStreamHead, FileStreamRequest, WorkFile, MAX_STREAM_LINE_BYTES,
};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::{hex, WorkDirError};
use crate::blobs::{BlobCache, Incoming};
use crate::broker::{CallInfo, CapabilityBroker};

/// Bytes read from the stream before they go to the writer.
const PIECE_BYTES: usize = 1024 * 1024;

/// Pieces on their way to the writer at most.
const PIECES_IN_FLIGHT: usize = 4;

/// `file` fetched over a file stream into `cache`, checked, and returned open; `None`
/// when no stream could be had (the caller fetches it in chunks).
pub(super) async fn fetch_streamed<B: CapabilityBroker>(
    broker: &B,
    call: &CallInfo,
    cache: &BlobCache,
    file: &WorkFile,
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
    let (pieces, received) = mpsc::channel::<Vec<u8>>(PIECES_IN_FLIGHT);
    let writer = tokio::task::spawn_blocking(move || write_pieces(incoming, received));
    let mut total = 0u64;
    loop {
        let mut piece = vec![0u8; PIECE_BYTES];
        let mut filled = 0;
        while filled < piece.len() {
            match io.read(&mut piece[filled..]).await {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(_) => return Err(mismatch("size")),
            }
        }
        if filled == 0 {
            break;
        }
        piece.truncate(filled);
        total += filled as u64;
        if total > file.size || pieces.send(piece).await.is_err() {
            break;
        }
    }
    drop(pieces);
    let (incoming, sha256, written) = writer
        .await
        .map_err(|e| write_error(std::io::Error::other(e.to_string())))?
        .map_err(write_error)?;
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
    mut pieces: mpsc::Receiver<Vec<u8>>,
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
