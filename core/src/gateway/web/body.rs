//! What a gateway answer carries ([`ReplyBody`]): a body whole in memory (every JSON,
//! HTML and text answer), or a file streamed from a descriptor opened before the answer
//! began ([`FileBody`], a context file's `GET`), so a large file is never held whole.
//!
//! A file is read [`FILE_CHUNK_BYTES`] at a time on the blocking threads, one chunk ahead
//! of the connection: while hyper writes a chunk to the socket the next is being read, and
//! no more than two chunks of a download are in memory. The bytes are those of the open
//! descriptor from its start to the length announced: a file replaced while it is being
//! sent (a `PUT` renames a new version in) leaves the open one as it was, so an answer
//! is always one version whole; a file cut short underneath (changed in place, outside
//! the core) ends the answer with an error, never with bytes of another length.

use std::fs::File;
use std::future::Future;
use std::io;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, SizeHint};
use tokio::task::JoinHandle;

/// The bytes of a file read from disk at once (one frame of a download).
pub const FILE_CHUNK_BYTES: u64 = 1024 * 1024;

/// A gateway answer's body.
#[derive(Debug)]
pub enum ReplyBody {
    /// A body whole in memory.
    Whole(Full<Bytes>),
    /// A file's bytes, streamed.
    File(FileBody),
}

impl From<Full<Bytes>> for ReplyBody {
    fn from(body: Full<Bytes>) -> Self {
        ReplyBody::Whole(body)
    }
}

impl From<FileBody> for ReplyBody {
    fn from(body: FileBody) -> Self {
        ReplyBody::File(body)
    }
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            ReplyBody::Whole(body) => Pin::new(body)
                .poll_frame(cx)
                .map_err(|never| match never {}),
            ReplyBody::File(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ReplyBody::Whole(body) => body.is_end_stream(),
            ReplyBody::File(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ReplyBody::Whole(body) => body.size_hint(),
            ReplyBody::File(body) => body.size_hint(),
        }
    }
}

/// The first `len` bytes of an open file, read a chunk ahead on the blocking threads.
#[derive(Debug)]
pub struct FileBody {
    file: Arc<File>,
    /// Where the next read starts.
    read_at: u64,
    /// Bytes neither read nor being read.
    unread: u64,
    /// Bytes not yet handed to the connection.
    unsent: u64,
    /// The chunk being read, if any.
    reading: Option<JoinHandle<io::Result<Bytes>>>,
}

impl FileBody {
    /// The first `len` bytes of `file` (its `Content-Length`), read from offset 0 whatever
    /// the descriptor's position.
    pub fn new(file: File, len: u64) -> Self {
        Self {
            file: Arc::new(file),
            read_at: 0,
            unread: len,
            unsent: len,
            reading: None,
        }
    }

    /// Starts reading the next chunk, when none is being read and one is left.
    fn read_ahead(&mut self) {
        if self.reading.is_some() || self.unread == 0 {
            return;
        }
        let (file, at, len) = (
            Arc::clone(&self.file),
            self.read_at,
            self.unread.min(FILE_CHUNK_BYTES),
        );
        self.read_at = at.saturating_add(len);
        self.unread -= len;
        self.reading = Some(tokio::task::spawn_blocking(move || {
            read_chunk(&file, at, len)
        }));
    }

    /// Ends the body after a failed read: nothing more is read or announced.
    fn fail(&mut self, e: io::Error) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        (self.unread, self.unsent) = (0, 0);
        Poll::Ready(Some(Err(e)))
    }
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        this.read_ahead();
        let Some(reading) = this.reading.as_mut() else {
            return Poll::Ready(None);
        };
        let read = ready!(Pin::new(reading).poll(cx));
        this.reading = None;
        let chunk = match read {
            Ok(Ok(chunk)) => chunk,
            Ok(Err(e)) => return this.fail(e),
            Err(joined) => return this.fail(io::Error::other(joined)),
        };
        this.unsent = this
            .unsent
            .saturating_sub(u64::try_from(chunk.len()).unwrap_or(u64::MAX));
        // The next chunk is read while the connection writes this one.
        this.read_ahead();
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.unsent == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.unsent)
    }
}

/// Exactly `len` bytes of `file` from offset `at` (an error when it ends before). Blocking.
fn read_chunk(file: &File, at: u64, len: u64) -> io::Result<Bytes> {
    let len = usize::try_from(len).map_err(io::Error::other)?;
    let mut buf = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        let offset = at.saturating_add(u64::try_from(filled).unwrap_or(u64::MAX));
        match file.read_at(&mut buf[filled..], offset) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the file was cut short while it was sent (changed in place)",
                ))
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn file_body_streams_the_announced_bytes_in_chunks_from_offset_zero() {
        let mut file = tempfile::tempfile().unwrap();
        let bytes: Vec<u8> = (0..=250u8).cycle().take(2_500_000).collect();
        file.write_all(&bytes).unwrap();
        let mut body = ReplyBody::from(FileBody::new(file, 2_500_000));
        assert_eq!(body.size_hint().exact(), Some(2_500_000));
        let mut sizes = Vec::new();
        let mut back = Vec::new();
        while let Some(frame) = body.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            sizes.push(data.len());
            back.extend_from_slice(&data);
        }
        assert_eq!(sizes, [1 << 20, 1 << 20, 2_500_000 - (2 << 20)]);
        assert!(back == bytes, "the bytes differ");
        assert!(body.is_end_stream());
    }

    #[tokio::test]
    async fn file_body_cut_short_underneath_ends_in_an_error() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[7u8; 1000]).unwrap();
        let err = FileBody::new(file, 2000).collect().await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
    }
}
