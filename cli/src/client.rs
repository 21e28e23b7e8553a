//! The CLI's client of a running core: the gateway address and API token come from the
//! workspace's state folder (`<workspace>/.skillbox/gateway.addr` and `api-token`, written
//! by `skillbox up`), one HTTP/1.1 connection per request.

use std::path::PathBuf;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use skillbox_core::state::Workspace;

/// Why the running core could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No gateway address in the state folder: `up` never ran on this workspace.
    #[error("no running core found for {workspace} (no {file}); start it with `skillbox up --workspace {workspace}`")]
    NoAddress {
        /// The workspace.
        workspace: PathBuf,
        /// The address file looked for.
        file: PathBuf,
    },
    /// The API token file could not be read.
    #[error("reading the API token {path}: {source}")]
    Token {
        /// The token file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Nothing answers at the recorded address.
    #[error("the core at {addr} is not answering ({source}); is `skillbox up` running on this workspace?")]
    Connect {
        /// The recorded address.
        addr: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The request could not be built (a path with characters a URI cannot hold).
    #[error("building the request: {0}")]
    Request(#[from] http::Error),
    /// The connection failed during the exchange.
    #[error("talking to the core: {0}")]
    Http(#[from] hyper::Error),
}

/// A client of the core running on one workspace.
#[derive(Debug, Clone)]
pub struct CoreClient {
    addr: String,
    token: String,
}

impl CoreClient {
    /// The client of the core that `skillbox up` last started on `workspace`.
    pub fn for_workspace(workspace: &Workspace) -> Result<Self, ClientError> {
        let file = workspace.gateway_addr_file();
        let addr = std::fs::read_to_string(&file)
            .ok()
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .ok_or_else(|| ClientError::NoAddress {
                workspace: workspace.root().to_path_buf(),
                file,
            })?;
        let path = workspace.token_file();
        let token = std::fs::read_to_string(&path)
            .map_err(|source| ClientError::Token { path, source })?
            .trim()
            .to_string();
        Ok(Self { addr, token })
    }

    /// The same core, asked with `token` (a bot's) instead of the operator token.
    pub fn with_token(self, token: String) -> Self {
        Self { token, ..self }
    }

    /// The gateway address (`host:port`).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends one request; the status and the JSON body (`null` when the body is not JSON).
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), ClientError> {
        let body = Bytes::from(body.map(Value::to_string).unwrap_or_default());
        let (status, bytes) = self.exchange(method, path, &[], body).await?;
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    }

    /// POSTs `body` as it is to `path` with `headers` added; the status and the raw body
    /// (the MCP forwarder of `skillbox mcp`).
    pub async fn post_raw(
        &self,
        path: &str,
        headers: &[(&'static str, String)],
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        let mut with_accept = vec![(
            http::header::ACCEPT.as_str(),
            "application/json, text/event-stream".to_string(),
        )];
        with_accept.extend(headers.iter().cloned());
        self.exchange("POST", path, &with_accept, body).await
    }

    /// Sends `body` as raw bytes (a file; the gateway reads a file route's body as it is,
    /// whatever its content type); the status and the raw answer.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        self.exchange(method, path, &[], body).await
    }

    /// One request on a fresh connection, with the token and a JSON content type.
    async fn exchange(
        &self,
        method: &str,
        path: &str,
        headers: &[(&'static str, String)],
        body: Bytes,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        let stream = tokio::net::TcpStream::connect(&self.addr)
            .await
            .map_err(|source| ClientError::Connect {
                addr: self.addr.clone(),
                source,
            })?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, &self.addr)
            .header(
                http::header::AUTHORIZATION,
                format!("Bearer {}", self.token),
            )
            .header(http::header::CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            req = req.header(*name, value);
        }
        let resp = sender.send_request(req.body(Full::new(body))?).await?;
        let status = resp.status();
        Ok((status, resp.into_body().collect().await?.to_bytes()))
    }

    /// Sends one request and fails with the core's `error` text on a status other than
    /// 2xx.
    pub async fn json(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let (status, v) = self.send(method, path, body).await?;
        if !status.is_success() {
            anyhow::bail!(
                "{}",
                v["error"]
                    .as_str()
                    .map_or_else(|| format!("HTTP {status}"), str::to_string)
            );
        }
        Ok(v)
    }
}

/// A small runtime for one CLI command.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
