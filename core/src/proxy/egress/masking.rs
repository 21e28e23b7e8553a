//! A server's answer on a read connection (a skill with bound secrets), made safe for the
//! program: every bound secret's value masked (`*` of the same length) in the headers and
//! the body, whatever the answer's coding.
//!
//! The proxy asks the server for `Accept-Encoding: identity` (`intercept.rs`), so a
//! well-behaved server answers plain bytes, which are masked as they stream ([`Masked`]).
//! A server that codes its answer anyway (`Content-Encoding`, or a `Transfer-Encoding`
//! coding other than `chunked`; stacked codings too) would hand the program the value
//! compressed, where no byte-wise mask sees it: such an answer is read whole (within
//! `[egress] max_inspected_body_bytes`, coded and decoded), decoded (`gzip`, `x-gzip`,
//! `deflate`), masked and handed on as identity with its length. A coding the proxy cannot
//! decode (`br`, `zstd`, `compress`, anything else) is withheld: the program gets `502`
//! saying why, never bytes the proxy could not check.

use std::io::Read;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::HeaderMap;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::Response;

use crate::proxy::secrets::CallSecrets;

/// Why a body the proxy hands the program broke off.
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// The body the proxy hands the program.
pub type ProxyBody = BoxBody<Bytes, BodyError>;

/// Why an answer is withheld from the program.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// A coding the proxy cannot decode, so cannot check for secrets.
    #[error(
        "the server coded its answer with {coding:?} although the proxy asked for identity; \
         the proxy checks answers for secrets only in identity, gzip and deflate, so this one \
         was withheld"
    )]
    Unsupported {
        /// The coding, lower-case.
        coding: String,
    },
    /// The coded bytes do not decode.
    #[error("the server's {coding} answer does not decode ({source}); it was withheld")]
    Corrupt {
        /// The coding.
        coding: String,
        /// What the decoder said.
        #[source]
        source: std::io::Error,
    },
    /// The answer, coded or decoded, is larger than the proxy reads.
    #[error(
        "the server's coded answer is larger than {max} bytes (coded or decoded), the most the \
         proxy reads for a skill with bound secrets ([egress] max_inspected_body_bytes); it was \
         withheld"
    )]
    TooLarge {
        /// The bound.
        max: usize,
    },
    /// Reading the answer failed.
    #[error("reading the server's answer failed: {0}")]
    Read(String),
}

/// `resp` with every secret's value masked, streamed when it is identity-coded, else
/// decoded whole within `max_body` bytes.
pub async fn masked_answer(
    resp: Response<Incoming>,
    secrets: Arc<CallSecrets>,
    max_body: usize,
) -> Result<Response<ProxyBody>, AnswerError> {
    let (mut parts, body) = resp.into_parts();
    for (_, value) in parts.headers.iter_mut() {
        if let Some(masked) = secrets.mask(value.as_bytes()) {
            if let Ok(v) = http::HeaderValue::from_bytes(&masked) {
                *value = v;
            }
        }
    }
    let codings = codings(&parts.headers);
    if codings.is_empty() {
        let keep = secrets.longest_value().saturating_sub(1);
        let body = Masked {
            inner: body,
            secrets,
            carry: Vec::new(),
            keep,
            done: false,
        };
        return Ok(Response::from_parts(
            parts,
            body.map_err(BodyError::from).boxed(),
        ));
    }
    let coded = Limited::new(body, max_body)
        .collect()
        .await
        .map_err(|e| match e.downcast::<http_body_util::LengthLimitError>() {
            Ok(_) => AnswerError::TooLarge { max: max_body },
            Err(e) => AnswerError::Read(e.to_string()),
        })?
        .to_bytes();
    if coded.is_empty() {
        // A HEAD, 204 or 304 answer: its headers describe a body nobody sends.
        return Ok(Response::from_parts(parts, full(coded)));
    }
    let mut plain = coded.to_vec();
    for coding in codings.iter().rev() {
        plain = decode(coding, &plain, max_body)?;
    }
    let plain = secrets.mask(&plain).unwrap_or(plain);
    for name in [CONTENT_ENCODING, TRANSFER_ENCODING, CONTENT_LENGTH] {
        parts.headers.remove(name);
    }
    parts.headers.insert(CONTENT_LENGTH, plain.len().into());
    Ok(Response::from_parts(parts, full(Bytes::from(plain))))
}

/// The codings applied to an answer's body, in the order the server applied them: the
/// content codings, then the transfer codings but `chunked` (which hyper removes).
fn codings(headers: &HeaderMap) -> Vec<String> {
    let listed = |name| {
        headers
            .get_all(name)
            .iter()
            .flat_map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .split(',')
                    .map(|c| c.trim().to_ascii_lowercase())
                    .collect::<Vec<_>>()
            })
            .filter(|c| !c.is_empty() && c != "identity")
            .collect::<Vec<_>>()
    };
    let mut all = listed(CONTENT_ENCODING);
    all.extend(
        listed(TRANSFER_ENCODING)
            .into_iter()
            .filter(|c| c != "chunked"),
    );
    all
}

/// `bytes` decoded from `coding`, at most `max` bytes of it.
fn decode(coding: &str, bytes: &[u8], max: usize) -> Result<Vec<u8>, AnswerError> {
    let read = |reader: &mut dyn Read| -> Result<Vec<u8>, AnswerError> {
        let mut out = Vec::new();
        let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
        reader
            .take(limit)
            .read_to_end(&mut out)
            .map_err(|source| AnswerError::Corrupt {
                coding: coding.to_string(),
                source,
            })?;
        if out.len() > max {
            return Err(AnswerError::TooLarge { max });
        }
        Ok(out)
    };
    match coding {
        "gzip" | "x-gzip" => read(&mut flate2::read::MultiGzDecoder::new(bytes)),
        // RFC 9110 §8.4.1.2: zlib-wrapped; some servers send the raw stream.
        "deflate" => read(&mut flate2::read::ZlibDecoder::new(bytes))
            .or_else(|_| read(&mut flate2::read::DeflateDecoder::new(bytes))),
        other => Err(AnswerError::Unsupported {
            coding: other.to_string(),
        }),
    }
}

fn full(bytes: Bytes) -> ProxyBody {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

/// A server's body with every secret's value masked; `keep` bytes (the longest value
/// less one) wait for the next frame, so that a value split across frames is found.
struct Masked {
    inner: Incoming,
    secrets: Arc<CallSecrets>,
    carry: Vec<u8>,
    keep: usize,
    done: bool,
}

impl Masked {
    fn mask_carry(&mut self) {
        if let Some(masked) = self.secrets.mask(&self.carry) {
            self.carry = masked;
        }
    }
}

impl Body for Masked {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        loop {
            if self.done {
                if self.carry.is_empty() {
                    return Poll::Ready(None);
                }
                let rest = std::mem::take(&mut self.carry);
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))));
            }
            match ready!(Pin::new(&mut self.inner).poll_frame(cx)) {
                None => self.done = true,
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        self.carry.extend_from_slice(&data);
                        self.mask_carry();
                        if self.carry.len() > self.keep {
                            let n = self.carry.len() - self.keep;
                            let out: Vec<u8> = self.carry.drain(..n).collect();
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                        }
                    }
                    // Trailers: what waits goes first, then they end the body.
                    Err(trailers) => {
                        self.done = true;
                        if self.carry.is_empty() {
                            return Poll::Ready(Some(Ok(trailers)));
                        }
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.carry.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        // Masking keeps lengths.
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn codings_are_listed_in_the_order_applied() {
        let mut h = HeaderMap::new();
        h.append(CONTENT_ENCODING, "gzip, identity".parse().unwrap());
        h.append(CONTENT_ENCODING, "Deflate".parse().unwrap());
        h.append(TRANSFER_ENCODING, "gzip, chunked".parse().unwrap());
        assert_eq!(codings(&h), ["gzip", "deflate", "gzip"]);
        assert!(codings(&HeaderMap::new()).is_empty());
    }

    #[test]
    fn a_decoded_answer_is_bounded() {
        let bomb = gzip(&vec![b'a'; 1 << 20]);
        assert!(bomb.len() < 4096);
        assert!(matches!(
            decode("gzip", &bomb, 1000),
            Err(AnswerError::TooLarge { max: 1000 })
        ));
        assert_eq!(decode("gzip", &bomb, 1 << 20).unwrap().len(), 1 << 20);
    }

    #[test]
    fn deflate_is_read_zlib_wrapped_or_raw() {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(b"zlib").unwrap();
        assert_eq!(
            decode("deflate", &z.finish().unwrap(), 100).unwrap(),
            b"zlib"
        );
        let mut r = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        r.write_all(b"raw").unwrap();
        assert_eq!(
            decode("deflate", &r.finish().unwrap(), 100).unwrap(),
            b"raw"
        );
    }

    #[test]
    fn codings_the_proxy_cannot_read_are_refused() {
        for coding in ["br", "zstd", "compress", "x-made-up"] {
            let e = decode(coding, b"sk-live-value", 100).unwrap_err();
            assert!(matches!(e, AnswerError::Unsupported { .. }), "{coding}");
            assert!(e.to_string().contains("withheld"), "{e}");
        }
        assert!(matches!(
            decode("gzip", b"not gzip", 100),
            Err(AnswerError::Corrupt { .. })
        ));
    }
}
