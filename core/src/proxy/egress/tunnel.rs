//! `CONNECT host:port`: a TLS tunnel to a declared host. After `200 Connection
//! established` the program's first bytes must be a TLS ClientHello whose server name
//! (SNI) is the CONNECT host; anything else (plain bytes, no SNI, another name: domain
//! fronting, a declared host's tunnel carrying a request for an undeclared one) is refused
//! and the connection closed before a byte reaches the server.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::head::{HEAD_TIMEOUT, MAX_HEAD_BYTES};
use super::relay::{relay, Meter, Way};
use super::Outcome;

/// Why the first bytes in a tunnel are not a ClientHello for the CONNECT host.
#[derive(Debug, thiserror::Error)]
pub enum HelloError {
    /// The bytes are not a TLS ClientHello.
    #[error("the first bytes in the tunnel are not a TLS ClientHello ({0}); the proxy tunnels TLS only, use http:// in absolute form for plain HTTP")]
    NotTls(String),
    /// The ClientHello names no server.
    #[error(
        "the TLS ClientHello carries no server name (SNI); send the name of the CONNECT host {0}"
    )]
    NoServerName(String),
    /// The ClientHello names another server than the CONNECT host.
    #[error(
        "the TLS server name {sni:?} differs from the CONNECT host {host:?} (domain fronting)"
    )]
    Mismatch {
        /// The name in the ClientHello.
        sni: String,
        /// The CONNECT host.
        host: String,
    },
    /// The ClientHello did not arrive in time or in bounds.
    #[error("no whole TLS ClientHello within {} ms and {MAX_HEAD_BYTES} bytes", HEAD_TIMEOUT.as_millis())]
    Incomplete,
    /// The program closed the tunnel before a whole ClientHello.
    #[error("the tunnel closed before a whole TLS ClientHello")]
    Closed,
}

/// Reads the ClientHello (after `early` bytes already read) and checks its server name
/// against `host`; returns every byte read, to forward as they came.
pub async fn read_hello<S: AsyncRead + Unpin>(
    io: &mut S,
    early: Vec<u8>,
    host: &str,
) -> Result<Vec<u8>, HelloError> {
    let mut acceptor = rustls::server::Acceptor::default();
    let mut seen = early;
    let mut fed = 0;
    let sni = tokio::time::timeout(HEAD_TIMEOUT, async {
        let mut chunk = [0u8; 4096];
        loop {
            let mut rest = &seen[fed..];
            while !rest.is_empty() {
                match acceptor.read_tls(&mut rest) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => return Err(HelloError::NotTls(e.to_string())),
                }
            }
            fed = seen.len() - rest.len();
            match acceptor.accept() {
                Ok(Some(accepted)) => {
                    return Ok(accepted.client_hello().server_name().map(str::to_string))
                }
                Ok(None) => {}
                Err((e, _alert)) => return Err(HelloError::NotTls(e.to_string())),
            }
            if seen.len() >= MAX_HEAD_BYTES {
                return Err(HelloError::Incomplete);
            }
            let n = io.read(&mut chunk).await.map_err(|_| HelloError::Closed)?;
            if n == 0 {
                return Err(HelloError::Closed);
            }
            seen.extend_from_slice(&chunk[..n]);
        }
    })
    .await
    .map_err(|_| HelloError::Incomplete)??;
    let want = host.trim_end_matches('.');
    match sni {
        None => Err(HelloError::NoServerName(host.to_string())),
        Some(sni) if sni.trim_end_matches('.').eq_ignore_ascii_case(want) => Ok(seen),
        Some(sni) => Err(HelloError::Mismatch {
            sni,
            host: host.to_string(),
        }),
    }
}

/// Answers `200` and reads the ClientHello (after `early` bytes), which must name `host`:
/// every byte read, or the outcome of a connection that ends here.
pub async fn accept_hello<P>(
    program: &mut P,
    early: Vec<u8>,
    host: &str,
) -> Result<Vec<u8>, Outcome>
where
    P: AsyncRead + AsyncWrite + Unpin,
{
    if let Err(e) = program
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await
    {
        return Err(Outcome::allowed(Some(format!(
            "closed: writing to the program failed: {e}"
        ))));
    }
    match read_hello(program, early, host).await {
        Ok(hello) => Ok(hello),
        Err(e) => {
            if matches!(e, HelloError::Mismatch { .. }) {
                tracing::warn!(%host, reason = %e, "egress refused: domain fronting");
            }
            let _ = program.shutdown().await;
            Err(Outcome::refused(e.to_string()))
        }
    }
}

/// Answers `200`, checks the ClientHello, forwards it and relays until the end. `server`
/// is connected to an address the policy checked.
pub async fn tunnel<P, S>(
    mut program: P,
    mut server: S,
    early: Vec<u8>,
    host: &str,
    meter: &Meter,
) -> Outcome
where
    P: AsyncRead + AsyncWrite + Unpin,
    S: AsyncRead + AsyncWrite + Unpin,
{
    let hello = match accept_hello(&mut program, early, host).await {
        Ok(hello) => hello,
        Err(outcome) => return outcome,
    };
    if let Err(ended) = meter.send(&mut server, Way::Out, &hello).await {
        return Outcome::allowed(ended.reason());
    }
    Outcome::allowed(relay(program, server, meter).await.reason())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn plain_bytes_are_not_a_client_hello() {
        let mut io: &[u8] = b"GET / HTTP/1.1\r\nHost: api.test\r\n\r\n";
        let e = read_hello(&mut io, Vec::new(), "api.test")
            .await
            .unwrap_err();
        assert!(matches!(e, HelloError::NotTls(_)), "{e}");
        let mut io: &[u8] = b"";
        let e = read_hello(&mut io, vec![0x16, 3, 1], "api.test")
            .await
            .unwrap_err();
        assert!(matches!(e, HelloError::Closed), "{e}");
    }
}
