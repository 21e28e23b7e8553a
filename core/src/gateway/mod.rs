//! The gateway for bots and agents (docs/http-api.md): HTTP on 127.0.0.1:7070 by default,
//! bearer-token auth on every route but `/healthz` (compared in constant time), JSON in
//! and out, request-size limits, errors as `{"error", "error_kind"}` mapped in one place.

mod allow;
mod routes;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;
use skillbox_protocol::methods::SecretValue;
use skillbox_protocol::result::ErrorKind;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;

use crate::calls::Dispatcher;

/// What the gateway serves.
#[derive(Debug)]
pub struct Gateway {
    /// The dispatcher.
    pub dispatcher: Arc<Dispatcher>,
    /// The bearer token (`Debug` prints `***`; compared in constant time).
    pub token: SecretValue,
    /// The file holding the token (`<state>/api-token`), named in the 401 answer.
    pub token_file: std::path::PathBuf,
    /// Largest request body.
    pub max_request_bytes: usize,
    /// The skills root (for reloads).
    pub skills_root: std::path::PathBuf,
    /// Where installs go and the trust policy reloads apply (docs/http-api.md, install).
    pub trust: crate::install::TrustPolicy,
    /// The one reload of skills and trust (shared with SIGHUP and the trust-folder watch).
    pub reloader: Arc<crate::reload::Reloader>,
    /// The executor containers' supervisor, when the core has a Docker engine.
    pub supervisor: Option<Arc<crate::docker::supervisor::Supervisor>>,
}

/// A gateway failure, rendered as JSON with a status code (the one mapping).
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Contract kind.
    pub kind: ErrorKind,
    /// What went wrong and what to do.
    pub message: String,
}

impl ApiError {
    /// An error of `kind` with the status that kind maps to.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let status = match kind {
            ErrorKind::InvalidArgs | ErrorKind::Protocol => StatusCode::BAD_REQUEST,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
            ErrorKind::ApprovalDenied => StatusCode::FORBIDDEN,
            ErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
            ErrorKind::ResourceLimit => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Sandbox | ErrorKind::ToolError => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self {
            status,
            kind,
            message: message.into(),
        }
    }

    fn unauthorized(token_file: &std::path::Path) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            kind: ErrorKind::PermissionDenied,
            message: format!(
                "missing or wrong bearer token; send Authorization: Bearer <the token in {}>",
                token_file.display()
            ),
        }
    }

    fn into_response(self) -> Response<Full<Bytes>> {
        json_response(
            self.status,
            &json!({"error": self.message, "error_kind": self.kind}),
        )
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

impl Gateway {
    fn authorized(&self, req: &Request<Incoming>) -> bool {
        let Some(value) = req.headers().get(http::header::AUTHORIZATION) else {
            return false;
        };
        let Some(presented) = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")) else {
            return false;
        };
        bool::from(presented.as_bytes().ct_eq(self.token.0.as_bytes()))
    }

    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Full<Bytes>> {
        if req.uri().path() != "/healthz" && !self.authorized(&req) {
            return ApiError::unauthorized(&self.token_file).into_response();
        }
        match routes::route(&self, req).await {
            Ok(r) => r,
            Err(e) => e.into_response(),
        }
    }
}

/// Serves the gateway on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, gateway: Arc<Gateway>) {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "gateway accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let gateway = Arc::clone(&gateway);
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let gateway = Arc::clone(&gateway);
                async move { Ok::<_, std::convert::Infallible>(gateway.handle(req).await) }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service)
                .await
            {
                tracing::debug!(%peer, error = %e, "gateway connection ended");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use skillbox_protocol::skill::Catalog;

    use super::*;

    #[test]
    fn gateway_debug_does_not_print_the_api_token() {
        let ws = tempfile::tempdir().unwrap();
        let dispatcher = Arc::new(crate::calls::test_dispatcher(ws.path(), Catalog::default()));
        let state = ws.path().join(crate::state::STATE_DIR);
        let trust = crate::install::TrustPolicy::for_workspace(ws.path(), &state, false);
        let token = "gateway-token-3f9a1c77e2";
        let gateway = Gateway {
            reloader: Arc::new(crate::reload::Reloader::new(
                Arc::clone(&dispatcher),
                trust.clone(),
            )),
            dispatcher,
            token: SecretValue(token.to_string()),
            token_file: state.join(crate::state::TOKEN_FILE),
            max_request_bytes: 1024,
            skills_root: ws.path().join("skills"),
            trust,
            supervisor: None,
        };
        let debug = format!("{gateway:?}");
        assert!(!debug.contains(token), "{debug}");
        assert!(debug.contains("token: ***"), "{debug}");
    }

    #[test]
    fn unauthorized_names_the_real_token_file() {
        let file = std::path::Path::new("/srv/bot/.skillbox/api-token");
        let e = ApiError::unauthorized(file);
        assert_eq!(e.status, StatusCode::UNAUTHORIZED);
        assert!(
            e.message.contains("/srv/bot/.skillbox/api-token") && !e.message.contains("<state>"),
            "{}",
            e.message
        );
    }
}
