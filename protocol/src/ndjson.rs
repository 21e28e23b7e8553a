//! Newline-delimited JSON-RPC, bounded: the framing of the tool's stdio, of
//! `skillbox-executor exec --stdio` and of the per-call containers. A line is never held
//! beyond `max` + 1 bytes, whether it comes from a reader ([`read_line`]) or in chunks
//! ([`LineSplitter`]).

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::jsonrpc::Message;

/// What [`read_line`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// The input ended before any byte.
    Eof,
    /// One line of at most `max` bytes (its newline excluded) is in the buffer.
    Complete {
        /// Bytes consumed from the input, the newline included.
        bytes: usize,
    },
    /// A longer line: `max` + 1 bytes of it were consumed and the rest is still unread
    /// ([`skip_line`] discards it).
    TooLong {
        /// Bytes consumed from the input.
        bytes: usize,
    },
}

/// Reads one line into `buf` (cleared first), consuming at most `max` + 1 bytes of it.
///
/// # Errors
/// The reader's.
pub async fn read_line<R>(input: &mut R, buf: &mut Vec<u8>, max: usize) -> io::Result<Line>
where
    R: AsyncBufRead + Unpin,
{
    buf.clear();
    let limit = max as u64 + 1;
    let bytes = (&mut *input).take(limit).read_until(b'\n', buf).await?;
    if bytes == 0 {
        return Ok(Line::Eof);
    }
    if trim_line(buf).len() <= max {
        Ok(Line::Complete { bytes })
    } else {
        Ok(Line::TooLong { bytes })
    }
}

/// Discards input up to and including the next newline (or the end).
///
/// # Errors
/// The reader's.
pub async fn skip_line<R>(input: &mut R) -> io::Result<()>
where
    R: AsyncBufRead + Unpin,
{
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(());
        }
        if let Some(i) = chunk.iter().position(|b| *b == b'\n') {
            input.consume(i + 1);
            return Ok(());
        }
        let len = chunk.len();
        input.consume(len);
    }
}

/// The line without its trailing `\n` / `\r\n`.
pub fn trim_line(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    while end > 0 && (line[end - 1] == b'\n' || line[end - 1] == b'\r') {
        end -= 1;
    }
    &line[..end]
}

/// Writes `message` as one line and flushes.
///
/// # Errors
/// The writer's.
pub async fn write_message<W>(out: &mut W, message: &Message) -> io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let mut line = message.to_line();
    line.push('\n');
    out.write_all(line.as_bytes()).await?;
    out.flush().await
}

/// A line longer than the limit arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a line over {max} bytes")]
pub struct LineTooLong {
    /// The limit.
    pub max: usize,
}

/// Bytes that arrive in chunks (a container's attached stdout), split into lines of at
/// most `max` bytes.
#[derive(Debug)]
pub struct LineSplitter {
    buf: Vec<u8>,
    scanned: usize,
    max: usize,
}

impl LineSplitter {
    /// A splitter whose lines are at most `max` bytes.
    pub fn new(max: usize) -> Self {
        Self {
            buf: Vec::new(),
            scanned: 0,
            max,
        }
    }

    /// Adds bytes; the complete lines now in the buffer (without their newline).
    ///
    /// # Errors
    /// [`LineTooLong`] when the unfinished line passes the limit.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Vec<u8>>, LineTooLong> {
        self.buf.extend_from_slice(bytes);
        let mut lines = Vec::new();
        while let Some(offset) = self.buf[self.scanned..].iter().position(|b| *b == b'\n') {
            let end = self.scanned + offset;
            lines.push(self.buf.drain(..=end).take(end).collect());
            self.scanned = 0;
        }
        self.scanned = self.buf.len();
        if self.buf.len() > self.max {
            return Err(LineTooLong { max: self.max });
        }
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn read_line_bounds_a_long_line_and_skip_line_resumes_at_the_next() {
        let mut input: &[u8] = b"short\nxxxxxxxxxxxxxxxxxxxx\nnext\r\n";
        let mut buf = Vec::new();
        assert_eq!(
            read_line(&mut input, &mut buf, 8).await.unwrap(),
            Line::Complete { bytes: 6 }
        );
        assert_eq!(trim_line(&buf), b"short");
        assert_eq!(
            read_line(&mut input, &mut buf, 8).await.unwrap(),
            Line::TooLong { bytes: 9 }
        );
        skip_line(&mut input).await.unwrap();
        assert_eq!(
            read_line(&mut input, &mut buf, 8).await.unwrap(),
            Line::Complete { bytes: 6 }
        );
        assert_eq!(trim_line(&buf), b"next");
        assert_eq!(read_line(&mut input, &mut buf, 8).await.unwrap(), Line::Eof);
    }

    #[test]
    fn splitter_joins_chunks_and_refuses_an_endless_line() {
        let mut s = LineSplitter::new(8);
        assert!(s.push(b"ab").unwrap().is_empty());
        assert_eq!(
            s.push(b"c\nde\nf").unwrap(),
            vec![b"abc".to_vec(), b"de".to_vec()]
        );
        assert_eq!(s.push(b"\n").unwrap(), vec![b"f".to_vec()]);
        assert_eq!(s.push(b"123456789").unwrap_err(), LineTooLong { max: 8 });
    }
}
