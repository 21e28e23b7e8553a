//! The answers of the cache: a hit served from its file ([`hit_answer`]), and an answer
//! from upstream streamed to the build while a copy is written ([`kept_answer`]), never
//! held whole in memory.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::Response;
use tokio::io::{AsyncRead, ReadBuf};

use super::{answer_fits, DepsCache, Hit, Writer};
use crate::proxy::egress::masking::{BodyError, ProxyBody};

/// Bytes served from a kept file at once.
const CHUNK: usize = 256 * 1024;

/// The answer to a request `hit` serves: `200` with its length and type, the file's bytes.
pub fn hit_answer(hit: Hit) -> Response<ProxyBody> {
    let body = FileBody {
        file: tokio::fs::File::from_std(hit.file),
        left: hit.size,
        buf: Vec::new(),
    };
    let mut resp = Response::new(body.boxed());
    let headers = resp.headers_mut();
    headers.insert(http::header::CONTENT_LENGTH, hit.size.into());
    if let Some(v) = (hit.content_type.as_deref()).and_then(|t| http::HeaderValue::from_str(t).ok())
    {
        headers.insert(http::header::CONTENT_TYPE, v);
    }
    headers.insert("x-skillbox-cache", http::HeaderValue::from_static("hit"));
    resp
}

/// `resp`, the answer to a request of `url` the cache wants, streamed as it comes; when it
/// is one to keep, its body is written to `cache` on the way.
pub fn kept_answer(
    resp: Response<Incoming>,
    cache: &Arc<DepsCache>,
    url: &str,
) -> Response<ProxyBody> {
    let writer = answer_fits(resp.status(), resp.headers())
        .then(|| {
            let headers = resp.headers();
            let expected = (headers.get(http::header::CONTENT_LENGTH))
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse().ok());
            let content_type = (headers.get(http::header::CONTENT_TYPE))
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            cache.writer(url, expected, content_type)
        })
        .flatten();
    let (parts, body) = resp.into_parts();
    Response::from_parts(
        parts,
        Tee {
            inner: body,
            writer,
        }
        .boxed(),
    )
}

/// An answer's body passed on as it comes, each data frame also written to the cache;
/// kept when it ends whole, dropped (its temporary file removed) when it breaks or is
/// dropped first.
struct Tee {
    inner: Incoming,
    writer: Option<Writer>,
}

impl Tee {
    /// The body ended whole: the copy is committed, off the async threads (it syncs).
    fn finish(&mut self) {
        let Some(writer) = self.writer.take() else {
            return;
        };
        let commit = move || {
            if let Err(e) = writer.commit() {
                tracing::warn!(error = %e, "deps cache: a download was not kept");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(commit)),
            Err(_) => commit(),
        }
    }
}

impl Body for Tee {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => {
                if let (Some(data), Some(writer)) = (frame.data_ref(), this.writer.as_mut()) {
                    if let Err(e) = writer.write(data) {
                        tracing::warn!(error = %e, "deps cache: a download is not kept");
                        this.writer = None;
                    }
                }
                // hyper may not ask again once the body says it is over.
                if this.inner.is_end_stream() {
                    this.finish();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(e)) => {
                this.writer = None;
                Poll::Ready(Some(Err(e.into())))
            }
            None => {
                this.finish();
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A kept file's bytes, `left` of them still to send.
struct FileBody {
    file: tokio::fs::File,
    left: u64,
    buf: Vec<u8>,
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if this.left == 0 {
            return Poll::Ready(None);
        }
        let want = usize::try_from(this.left).unwrap_or(CHUNK).min(CHUNK);
        this.buf.resize(want, 0);
        let mut read = ReadBuf::new(&mut this.buf[..want]);
        ready!(Pin::new(&mut this.file).poll_read(cx, &mut read))?;
        let n = read.filled().len();
        if n == 0 {
            return Poll::Ready(Some(Err("the kept file ended before its size".into())));
        }
        this.left -= n as u64;
        Poll::Ready(Some(Ok(Frame::data(Bytes::copy_from_slice(read.filled())))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}
