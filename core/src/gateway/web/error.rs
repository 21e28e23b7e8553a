//! The one mapping from a gateway failure to HTTP: an [`ApiError`] carries an
//! [`ErrorKind`], and [`status`] alone decides the status code from it. Two refusals are
//! HTTP's own (a missing token, a known path asked with another method); they keep a kind
//! for the JSON body and their status is decided in the same function.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use serde_json::json;
use skillbox_protocol::result::ErrorKind;

/// The refusals HTTP names itself; every other failure answers the status of its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Transport {
    /// The failure is one of its kind.
    None,
    /// No or a wrong bearer token (401).
    Unauthorized,
    /// The request body did not arrive within `gateway.body_timeout_ms` (408).
    RequestTimeout,
    /// The path exists with other methods (405, with `Allow`).
    MethodNotAllowed {
        /// The `Allow` header value.
        allow: String,
    },
}

/// The HTTP status of a failure of `kind`, or of one of HTTP's own refusals.
fn status(kind: ErrorKind, transport: &Transport) -> StatusCode {
    match transport {
        Transport::Unauthorized => return StatusCode::UNAUTHORIZED,
        Transport::MethodNotAllowed { .. } => return StatusCode::METHOD_NOT_ALLOWED,
        Transport::RequestTimeout => return StatusCode::REQUEST_TIMEOUT,
        Transport::None => {}
    }
    match kind {
        ErrorKind::InvalidArgs | ErrorKind::Protocol => StatusCode::BAD_REQUEST,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::PermissionDenied | ErrorKind::ApprovalDenied => StatusCode::FORBIDDEN,
        ErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
        ErrorKind::ResourceLimit => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Sandbox | ErrorKind::ToolError => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A gateway failure, answered as `{"error", "error_kind"}` (and `"check"` for a refused
/// install, removal or repair) with the status [`status`] gives its kind.
#[derive(Debug)]
pub struct ApiError {
    kind: ErrorKind,
    message: String,
    check: Option<&'static str>,
    transport: Transport,
}

/// The answer to a request with no or a wrong bearer token.
pub const UNAUTHORIZED: &str = "missing or wrong bearer token; send Authorization: Bearer \
     <token>. A bot gets a token of its own from the operator of this skillbox, who makes \
     one with `skillbox tokens create NAME` (docs/http-api.md, \"Roles\")";

impl ApiError {
    /// An error of `kind` with the status that kind maps to.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            check: None,
            transport: Transport::None,
        }
    }

    /// A refusal by one of the install, removal or repair checks, named in the answer.
    pub fn refused(kind: ErrorKind, message: impl Into<String>, check: &'static str) -> Self {
        Self {
            check: Some(check),
            ..Self::new(kind, message)
        }
    }

    /// No or a wrong bearer token: says how a caller gets a token, and names no file (the
    /// caller is not authenticated: no host path, and no pointer to the operator's token).
    pub fn unauthorized() -> Self {
        Self {
            transport: Transport::Unauthorized,
            ..Self::new(ErrorKind::PermissionDenied, UNAUTHORIZED)
        }
    }

    /// A bearer token that was recognised and refused (an expired bot token): 401 with why.
    pub fn unauthorized_because(message: String) -> Self {
        Self {
            transport: Transport::Unauthorized,
            ..Self::new(ErrorKind::PermissionDenied, message)
        }
    }

    /// A route the caller's role does not reach: 403 `permission_denied` naming the role
    /// it needs.
    pub fn needs_role(
        method: &http::Method,
        path: &str,
        needs: crate::auth::Role,
        caller: &crate::auth::Caller,
    ) -> Self {
        Self::new(
            ErrorKind::PermissionDenied,
            format!(
                "{method} {path} needs the {} role; this token belongs to bot {:?}. Use the \
                 operator token (<workspace>/.skillbox/api-token) or the console \
                 (docs/http-api.md, \"Roles\")",
                needs.as_str(),
                caller.name()
            ),
        )
    }

    /// A request body over `limit` bytes: `resource_limit`, 413.
    pub fn body_too_large(limit: usize) -> Self {
        Self::new(
            ErrorKind::ResourceLimit,
            format!("request body over the {limit}-byte limit (gateway.max_request_bytes)"),
        )
    }

    /// A request body that stopped arriving: `timeout`, 408 (the connection is closed).
    pub fn body_timeout(message: impl Into<String>) -> Self {
        Self {
            transport: Transport::RequestTimeout,
            ..Self::new(ErrorKind::Timeout, message)
        }
    }

    /// A known path asked with a method it does not take; `allow` lists those it takes.
    pub fn method_not_allowed(allow: String, message: impl Into<String>) -> Self {
        Self {
            transport: Transport::MethodNotAllowed { allow },
            ..Self::new(ErrorKind::InvalidArgs, message)
        }
    }

    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        status(self.kind, &self.transport)
    }

    /// The error's kind (the body's `error_kind`).
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// What went wrong and what to do.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The answer: `{"error", "error_kind"}` (with `"check"` when a check refused), the
    /// status of the kind, and `Allow` on a 405.
    pub fn into_response(self) -> Response<Full<Bytes>> {
        let mut body = json!({"error": self.message, "error_kind": self.kind});
        if let Some(check) = self.check {
            body["check"] = check.into();
        }
        let mut r = json_response(self.status(), &body);
        match &self.transport {
            Transport::MethodNotAllowed { allow } => {
                if let Ok(v) = http::HeaderValue::from_str(allow) {
                    r.headers_mut().insert(http::header::ALLOW, v);
                }
            }
            // RFC 6750: a bearer-protected resource names its scheme (MCP clients read it).
            Transport::Unauthorized => {
                r.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    http::HeaderValue::from_static("Bearer"),
                );
            }
            Transport::None | Transport::RequestTimeout => {}
        }
        r
    }
}

/// Errors that know their kind reach HTTP as an [`ApiError`] of that kind, their message
/// as the answer's `error`.
macro_rules! from_kinded {
    ($($error:ty),* $(,)?) => {$(
        impl From<$error> for ApiError {
            fn from(e: $error) -> Self {
                ApiError::new(e.error_kind(), e.to_string())
            }
        }
    )*};
}

from_kinded!(
    crate::approvals::ApprovalError,
    crate::contexts::ContextError,
    crate::contexts::disclosure::DisclosureError,
    crate::reload::ReloadError,
);

/// A task the gateway moved off the async threads panicked or was cancelled.
impl From<tokio::task::JoinError> for ApiError {
    fn from(e: tokio::task::JoinError) -> Self {
        ApiError::new(ErrorKind::Unavailable, e.to_string())
    }
}

/// A JSON response.
pub fn json_response(status: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::ApprovalError;
    use crate::state::store::StoreError;

    #[test]
    fn unauthorized_answer_names_the_bearer_scheme() {
        let r = ApiError::unauthorized().into_response();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(r.headers()[http::header::WWW_AUTHENTICATE], "Bearer");
    }

    #[test]
    fn approval_store_failure_is_unavailable_not_conflict() {
        let e = ApiError::from(ApprovalError::Store(StoreError::WalUnavailable {
            path: "/srv/bot/.skillbox/state.db".into(),
            mode: "delete".into(),
        }));
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
    }

    #[test]
    fn approval_not_found_is_404() {
        let e = ApiError::from(ApprovalError::NotFound { id: "ap_x".into() });
        assert_eq!(e.status(), StatusCode::NOT_FOUND);
        assert_eq!(e.kind(), ErrorKind::NotFound);
    }

    #[test]
    fn refusal_body_names_the_check_with_the_status_of_its_kind() {
        let r = ApiError::refused(ErrorKind::PermissionDenied, "no", "signature").into_response();
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
    }

    #[test]
    fn method_not_allowed_sets_allow() {
        let r = ApiError::method_not_allowed("PUT, DELETE".into(), "m").into_response();
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.headers()[http::header::ALLOW], "PUT, DELETE");
    }
}
