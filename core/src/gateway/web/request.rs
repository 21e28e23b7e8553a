//! What a route handler gets: the request's body (read on demand, within
//! `gateway.max_request_bytes` and `gateway.body_timeout_ms`), its query, and the path
//! segments its pattern captured. [`read_bounded`] is the one body reader of the REST
//! routes, MCP and the console.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Body as _;
use serde::de::DeserializeOwned;
use serde_json::Value;
use skillbox_protocol::result::ErrorKind;

use super::body::ReplyBody;
use super::error::{json_response, ApiError};

/// A request body of any source (hyper's in the server, a buffer in tests).
pub type Body = BoxBody<Bytes, BodyError>;

/// Reading the request body failed (the connection broke).
#[derive(Debug, thiserror::Error)]
#[error("reading the request body failed: {0}")]
pub struct BodyError(pub String);

/// Why a request body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyReadError {
    /// Its `Content-Length`, or the bytes that came, are over the limit (refused from the
    /// declared length before reading anything).
    #[error("request body over the {limit}-byte limit (gateway.max_request_bytes)")]
    TooLarge {
        /// `gateway.max_request_bytes`.
        limit: usize,
    },
    /// The whole body did not arrive in time.
    #[error(
        "the request body did not arrive within {ms} ms (gateway.body_timeout_ms); send the \
         whole body, as its Content-Length says, without pausing"
    )]
    TimedOut {
        /// `gateway.body_timeout_ms`.
        ms: u128,
    },
    /// The connection broke.
    #[error(transparent)]
    Broken(BodyError),
}

/// Reads `body` whole: refused at once when its declared length (`Content-Length`, which
/// hyper reports as the body's exact size hint) is over `limit`, refused when more than
/// `limit` bytes come, and given up when it has not all come within `timeout`.
pub async fn read_bounded(
    body: Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, BodyReadError> {
    let limit_u64 = u64::try_from(limit).unwrap_or(u64::MAX);
    if body.size_hint().lower() > limit_u64 {
        return Err(BodyReadError::TooLarge { limit });
    }
    match tokio::time::timeout(timeout, Limited::new(body, limit).collect()).await {
        Err(_) => Err(BodyReadError::TimedOut {
            ms: timeout.as_millis(),
        }),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) => match e.downcast::<BodyError>() {
            Ok(broken) => Err(BodyReadError::Broken(*broken)),
            Err(_) => Err(BodyReadError::TooLarge { limit }),
        },
    }
}

impl From<BodyReadError> for ApiError {
    fn from(e: BodyReadError) -> Self {
        match e {
            BodyReadError::TooLarge { limit } => ApiError::body_too_large(limit),
            BodyReadError::TimedOut { .. } => ApiError::body_timeout(e.to_string()),
            BodyReadError::Broken(e) => ApiError::new(ErrorKind::InvalidArgs, e.to_string()),
        }
    }
}

/// A handler's answer: a response, or the error the one mapping turns into one.
pub type Reply = Result<Response<Full<Bytes>>, ApiError>;

/// An answer of the route table: a [`Reply`], or a handler's answer whose body is
/// streamed (a context file's bytes, [`ReplyBody::File`]).
pub type Answered = Result<Response<ReplyBody>, ApiError>;

/// The future a route's handler returns (its answer made an [`Answered`]).
pub type Handled<'a> = Pin<Box<dyn Future<Output = Answered> + Send + 'a>>;

/// One request as a handler sees it.
#[derive(Debug)]
pub struct Req {
    /// The request body, unread.
    pub body: Body,
    /// The query string, if any.
    pub query: Option<String>,
    /// The path segments the route's pattern captured, by name.
    pub params: Vec<(&'static str, String)>,
    /// Largest body accepted.
    pub max_body: usize,
    /// Longest wait for the whole body (`gateway.body_timeout_ms`).
    pub body_timeout: Duration,
    /// The request's headers (the MCP handlers read `Origin` and the MCP routing headers).
    pub headers: http::HeaderMap,
    /// Who asked (the operator for `/healthz`, which takes no token and reads nothing).
    pub caller: crate::auth::Caller,
}

impl Req {
    /// The path segment captured as `{name}` (or `{*name}`) by the route's pattern.
    pub fn param(&self, name: &str) -> Result<&str, ApiError> {
        self.params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| {
                ApiError::new(
                    ErrorKind::Unavailable,
                    format!("the gateway route has no {{{name}}} segment; report this bug"),
                )
            })
    }

    /// The value of `key` in the query string.
    pub fn query_param(&self, key: &str) -> Option<String> {
        self.query
            .as_deref()?
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.to_string())
    }

    /// The W3C trace context the caller sent (`traceparent`), when valid.
    pub fn traceparent(&self) -> Option<crate::observe::TraceParent> {
        self.headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .and_then(crate::observe::TraceParent::parse)
    }

    /// [`Req::json`], or `T`'s default for an empty body.
    pub async fn json_or_default<T: DeserializeOwned + Default>(self) -> Result<T, ApiError> {
        let bytes = read_bounded(self.body, self.max_body, self.body_timeout).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(T::default());
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::new(ErrorKind::InvalidArgs, format!("request body: {e}")))
    }

    /// Reads the body (at most `max_body` bytes, within `body_timeout`) as JSON of type `T`.
    pub async fn json<T: DeserializeOwned>(self) -> Result<T, ApiError> {
        let bytes = read_bounded(self.body, self.max_body, self.body_timeout).await?;
        serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::new(ErrorKind::InvalidArgs, format!("request body: {e}")))
    }
}

/// A 200 answer with `body`.
pub fn ok(body: &Value) -> Response<Full<Bytes>> {
    json_response(StatusCode::OK, body)
}

/// A 200 answer with `value` serialized.
pub fn ok_of<T: serde::Serialize>(value: &T) -> Response<Full<Bytes>> {
    ok(&serde_json::to_value(value).unwrap_or_default())
}

/// A 200 answer of another type than JSON (the metrics' text format, the console's pages).
pub fn ok_text(content_type: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    r
}
