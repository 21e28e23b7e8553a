//! The one GET of a collection index over `http://` or `https://`: the operator named the
//! URL (`[skills] indexes`, `--index`), so no address policy applies, but the answer is
//! outside input: 20 s for the whole exchange, a 4 MiB body cap (declared length first,
//! then the bytes as they come), no redirect followed (the refusal names the new
//! location), server certificates checked against the Web PKI roots.

use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, LOCATION, USER_AGENT};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// The largest index body read.
pub const MAX_INDEX_BYTES: usize = 4 * 1024 * 1024;
/// The longest an index fetch may take, connection to last byte.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(20);

/// Why an index URL could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The URL does not parse.
    #[error("not a valid URL ({reason}); write it as https://host/path")]
    Url {
        /// What is wrong.
        reason: String,
    },
    /// The TLS client could not be set up.
    #[error("setting up TLS: {reason}")]
    Tls {
        /// What went wrong.
        reason: String,
    },
    /// The runtime the fetch runs on could not start.
    #[error("starting the fetch: {0}")]
    Runtime(std::io::Error),
    /// Connecting, TLS, or the exchange failed.
    #[error("request failed: {reason}; check the URL and the network")]
    Request {
        /// What went wrong, with its causes.
        reason: String,
    },
    /// The server answered something other than 2xx.
    #[error("the server answered {status}{}; check the URL", location.as_ref().map(|l| format!(" (moved to {l}: use that URL)")).unwrap_or_default())]
    Status {
        /// The HTTP status.
        status: u16,
        /// The `Location` of a redirect.
        location: Option<String>,
    },
    /// The body is over the cap.
    #[error("the body is over {limit} bytes; split the collection or give a local copy")]
    TooLarge {
        /// The cap.
        limit: usize,
    },
    /// No complete answer in time.
    #[error("no complete answer within {} s; try again, or download the index and give its path", FETCH_TIMEOUT.as_secs())]
    Timeout,
}

/// [`get`] from synchronous code; inside a tokio runtime it runs on a thread of its own
/// (blocking a runtime's thread on another runtime panics).
pub fn get_blocking(url: &str) -> Result<Vec<u8>, FetchError> {
    let run = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(FetchError::Runtime)?
            .block_on(get(url))
    };
    if tokio::runtime::Handle::try_current().is_err() {
        return run();
    }
    std::thread::scope(|s| {
        s.spawn(run).join().unwrap_or_else(|_| {
            Err(FetchError::Request {
                reason: "the fetching thread panicked".into(),
            })
        })
    })
}

/// Fetches `url` within [`FETCH_TIMEOUT`], at most [`MAX_INDEX_BYTES`].
pub async fn get(url: &str) -> Result<Vec<u8>, FetchError> {
    tokio::time::timeout(FETCH_TIMEOUT, get_untimed(url))
        .await
        .map_err(|_| FetchError::Timeout)?
}

async fn get_untimed(url: &str) -> Result<Vec<u8>, FetchError> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| FetchError::Url {
            reason: e.to_string(),
        })?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(FETCH_TIMEOUT));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls_config()?)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build(https);
    let request = http::Request::get(uri)
        .header(USER_AGENT, concat!("skillbox/", env!("CARGO_PKG_VERSION")))
        .header(ACCEPT, "application/json")
        .body(Empty::new())
        .map_err(|e| FetchError::Url {
            reason: e.to_string(),
        })?;
    let response = client
        .request(request)
        .await
        .map_err(|e| FetchError::Request { reason: chain(&e) })?;
    let status = response.status();
    if !status.is_success() {
        return Err(FetchError::Status {
            status: status.as_u16(),
            location: response
                .headers()
                .get(LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(str::to_string),
        });
    }
    let declared = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_INDEX_BYTES as u64) {
        return Err(FetchError::TooLarge {
            limit: MAX_INDEX_BYTES,
        });
    }
    let mut body = response.into_body();
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| FetchError::Request { reason: chain(&e) })?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > MAX_INDEX_BYTES {
                return Err(FetchError::TooLarge {
                    limit: MAX_INDEX_BYTES,
                });
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

fn tls_config() -> Result<rustls::ClientConfig, FetchError> {
    let roots = rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| FetchError::Tls {
            reason: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// An error and its causes, `outer: inner: ...`.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
