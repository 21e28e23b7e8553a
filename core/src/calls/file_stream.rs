//! A call's context file sent to the executor as raw bytes over a stream of the channel
//! (`POST /file`, for files of `skillbox_protocol::workdir::STREAM_MIN_BYTES` and up):
//! base64 inside JSON-RPC chunks costs a third more bytes and an encode, a parse and a
//! decode per 2 MiB. The executor's request line is judged as `core.contextFileRead` is
//! (the call by its id and token, the file by the path and digest it was sent); the head
//! line then says the size, and the bytes follow from the one file opened, so a file
//! replaced meanwhile never comes mixed (the executor checks size and SHA-256 anyway).

use std::time::Duration;

use skillbox_protocol::jsonrpc::{code, ErrorObject};
use skillbox_protocol::methods::SecretValue;
use skillbox_protocol::workdir::{FileStreamHead, FileStreamRequest, MAX_STREAM_LINE_BYTES};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

use super::inflight::InFlight;

/// Longest the executor may take to send its request line.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How much is read from the file at a time.
const READ_BUFFER_BYTES: usize = 1024 * 1024;

/// Serves one file stream of call `call_id`, which presented `token`, on `io`.
pub async fn serve<S>(in_flight: &InFlight, call_id: &str, token: String, io: S)
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let mut io = BufReader::new(io);
    let opened = match read_request(&mut io).await {
        Ok(request) => open(in_flight, call_id, token, &request).await,
        Err(e) => Err(e),
    };
    let io = io.get_mut();
    let (file, size) = match opened {
        Ok(opened) => opened,
        Err(error) => {
            tracing::warn!(call_id, reason = %error.message, "context file stream refused");
            let _ = write_head(io, &FileStreamHead::Error(error)).await;
            let _ = io.shutdown().await;
            return;
        }
    };
    if write_head(io, &FileStreamHead::Bytes { size })
        .await
        .is_err()
    {
        return;
    }
    let started = std::time::Instant::now();
    let file = tokio::fs::File::from_std(file).take(size);
    let mut file = BufReader::with_capacity(READ_BUFFER_BYTES, file);
    match tokio::io::copy_buf(&mut file, io).await {
        Ok(sent) if sent < size => {
            tracing::warn!(
                call_id,
                sent,
                size,
                "a context file got shorter while it was sent"
            );
        }
        Ok(sent) => {
            let ms = started.elapsed().as_millis();
            tracing::info!(
                call_id,
                bytes = sent,
                ms,
                "context file streamed to the executor"
            );
        }
        Err(e) => tracing::debug!(call_id, error = %e, "context file stream ended early"),
    }
    let _ = io.shutdown().await;
}

/// The executor's request line.
async fn read_request<R>(io: &mut R) -> Result<FileStreamRequest, ErrorObject>
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    let mut line = Vec::new();
    let mut limited = io.take(MAX_STREAM_LINE_BYTES as u64 + 1);
    match tokio::time::timeout(REQUEST_TIMEOUT, limited.read_until(b'\n', &mut line)).await {
        Err(_) => {
            return Err(invalid(format!(
                "no request line within {REQUEST_TIMEOUT:?}"
            )))
        }
        Ok(Err(e)) => return Err(invalid(format!("the request line could not be read: {e}"))),
        Ok(Ok(_)) => {}
    }
    if !line.ends_with(b"\n") {
        return Err(invalid(format!(
            "the request line is not one line of at most {MAX_STREAM_LINE_BYTES} bytes"
        )));
    }
    serde_json::from_slice(&line).map_err(|e| invalid(format!("the request line: {e}")))
}

/// The file `request` names, when the call and its token are good and the call was sent
/// it.
async fn open(
    in_flight: &InFlight,
    call_id: &str,
    token: String,
    request: &FileStreamRequest,
) -> Result<(std::fs::File, u64), ErrorObject> {
    let call = in_flight
        .authorize(call_id, &SecretValue(token))
        .map_err(|e| denied(e.to_string()))?;
    let Some(files) = call.files.as_ref() else {
        return Err(denied("the call was not made in a context".into()));
    };
    files.open_sent(&request.path, &request.sha256).await
}

async fn write_head<W: AsyncWrite + Unpin>(
    io: &mut W,
    head: &FileStreamHead,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(head).map_err(std::io::Error::other)?;
    line.push(b'\n');
    io.write_all(&line).await?;
    io.flush().await
}

fn denied(message: String) -> ErrorObject {
    ErrorObject::new(code::PERMISSION_DENIED, message)
}

fn invalid(message: String) -> ErrorObject {
    ErrorObject::new(code::INVALID_PARAMS, message)
}

#[cfg(test)]
#[path = "file_stream_tests.rs"]
mod tests;
