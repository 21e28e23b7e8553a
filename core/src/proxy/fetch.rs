//! The fetch proxy: HTTP(S) on a skill's behalf, only to the hosts it declared.
//!
//! Every hop (the first request and each redirect) is checked the same way:
//! 1. the URL is absolute `http`/`https` with no user info, and its scheme, host and port
//!    match one of the skill's `permissions.network` patterns;
//! 2. the proxy resolves the host itself and refuses if *any* resolved address is not
//!    public (loopback, private, link-local, metadata, CGNAT, multicast, ... see
//!    `address.rs`), unless the operator allow-listed the exact `ip:port` or `host:port`;
//! 3. the connection goes to an address from that same lookup.
//!
//! Steps 1 and 2 are `policy.rs`, which the egress proxy shares.
//!
//! **Address pinning.** The request is sent to a URL whose host is the checked IP
//! (`https://93.184.216.34:443/path`), so hyper's connector parses the literal and does
//! no DNS lookup of its own (no DNS-rebinding window). The `Host` header carries the
//! original `host[:port]`, and for `https` the TLS server name (SNI and certificate
//! check) is fixed to the original host with hyper-rustls' `FixedServerNameResolver`.
//! Because the server name is per hop, each hop builds its own small legacy client
//! (connection pooling off) over a shared rustls configuration with the webpki roots.
//!
//! Redirects (301, 302, 303, 307, 308 with `Location`) are followed by hand, at most
//! `max_redirects` times; 303, and 301/302 after a POST, continue as GET without a body
//! (as browsers do); `Authorization` and `Cookie` are dropped when the origin changes.
//! Request and response bodies are capped (the response is streamed and abandoned past
//! the cap), the whole fetch has one deadline, and the response body is returned as
//! text (invalid UTF-8 replaced by U+FFFD).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_rustls::{FixedServerNameResolver, HttpsConnector};
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::ServerName;
use skillbox_protocol::methods::{FetchParams, FetchResult};
use skillbox_protocol::skill::network::{NetworkPattern, Scheme};

use super::policy::{self, parse_patterns, NetPolicy, PolicyError};
use super::secrets::CallSecrets;
use super::target::Target;
use super::ProxyError;
use crate::observe::Metrics;

mod request;
mod response;

use request::{parse_method, request_headers};
use response::{error_chain, is_redirect, read_response};

pub use crate::state::config::fetch::FetchConfig;

const CAP: &str = "fetch";

/// Performs `fetch` requests for skills (see the module docs for the rules).
#[derive(Debug)]
pub struct FetchProxy {
    config: FetchConfig,
    /// Private addresses allowed, names pinned (shared with the egress proxy).
    policy: NetPolicy,
    /// The rustls client configuration, or why it could not be built (then `https`
    /// fetches fail closed as unavailable).
    tls: Result<Arc<rustls::ClientConfig>, String>,
    /// Where each request's outcome is counted.
    metrics: Arc<Metrics>,
    /// `[egress] secrets_in_body`.
    secrets_in_body: bool,
}

impl FetchProxy {
    /// A proxy with the given limits; TLS trusts the webpki (Mozilla) roots only.
    pub fn new(config: FetchConfig) -> Self {
        Self {
            policy: NetPolicy::new(config.allow_private.clone(), &Default::default()),
            config,
            tls: tls_config().map(Arc::new),
            metrics: Arc::new(Metrics::default()),
            secrets_in_body: false,
        }
    }

    /// Resolves the names of `pins` to their address without asking DNS (`[egress]
    /// resolve`, one policy for fetch and the egress proxy).
    pub fn with_resolve(
        mut self,
        pins: &std::collections::BTreeMap<String, std::net::IpAddr>,
    ) -> Self {
        self.policy = NetPolicy::new(self.config.allow_private.clone(), pins);
        self
    }

    /// Replaces bound secrets' placeholders in request bodies too (`[egress]
    /// secrets_in_body`).
    pub fn with_secrets_in_body(mut self, allowed: bool) -> Self {
        self.secrets_in_body = allowed;
        self
    }

    /// Trusts `roots` (`[egress] extra_roots`) beside the webpki roots for `https`.
    pub fn with_extra_roots(mut self, roots: &super::roots::ExtraRoots) -> Self {
        self.tls = roots.client_config().map(Arc::new);
        self
    }

    /// Counts each request's outcome into `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The proxy's limits.
    pub fn config(&self) -> &FetchConfig {
        &self.config
    }

    /// Performs `req` for a skill whose `permissions.network` is `network`.
    ///
    /// # Errors
    /// `PermissionDenied` for an undeclared or non-public host (first hop or redirect),
    /// `InvalidParams` for a bad URL, method or header, `TooLarge` past a body cap,
    /// `TooManyRedirects`, `Timeout`, and `Upstream` when the server cannot be reached.
    pub async fn fetch(
        &self,
        network: &[String],
        req: FetchParams,
    ) -> Result<FetchResult, ProxyError> {
        self.fetch_with(network, req, &CallSecrets::default()).await
    }

    /// [`Self::fetch`] for a call holding `secrets`: each hop's request line, headers and
    /// (with `[egress] secrets_in_body`) body get the values of the secrets bound to that
    /// hop's host in place of their placeholders, a placeholder toward another host refuses
    /// the request, and the answer comes back with the values masked (docs/permissions.md).
    pub async fn fetch_with(
        &self,
        network: &[String],
        req: FetchParams,
        secrets: &CallSecrets,
    ) -> Result<FetchResult, ProxyError> {
        let shown = Target::parse(&req.url)
            .map(|t| t.display())
            .unwrap_or_default();
        let deadline = Duration::from_millis(self.config.timeout_ms);
        let within = self.fetch_within_deadline(network, req, secrets);
        let mut result = match tokio::time::timeout(deadline, within).await {
            Ok(result) => result,
            Err(_) => Err(ProxyError::Timeout {
                url: shown,
                timeout_ms: self.config.timeout_ms,
            }),
        };
        if let (Ok(r), false) = (result.as_mut(), secrets.is_empty()) {
            mask_result(r, secrets);
        }
        self.metrics.observe_fetch(match &result {
            Ok(_) => "ok",
            Err(e) => e.outcome(),
        });
        result
    }

    async fn fetch_within_deadline(
        &self,
        network: &[String],
        req: FetchParams,
        secrets: &CallSecrets,
    ) -> Result<FetchResult, ProxyError> {
        req.check_bounds()
            .map_err(|e| ProxyError::invalid(CAP, e.to_string()))?;
        let mut method = parse_method(&req.method)?;
        let mut headers = request_headers(&req.headers)?;
        let mut body = Bytes::from(req.body.unwrap_or_default());
        if body.len() > self.config.max_request_bytes {
            return Err(ProxyError::TooLarge {
                capability: CAP,
                what: "request body",
                limit: self.config.max_request_bytes as u64,
            });
        }
        let patterns = parse_patterns(network);
        let mut target = Target::parse(&req.url)?;
        let mut from: Option<Target> = None;
        let mut redirects = 0;
        loop {
            check_declared(network, &patterns, &target, from.as_ref())?;
            let addrs = self.resolve_checked(&target).await?;
            tracing::debug!(origin = %target.origin(), addr = %addrs[0], "fetch hop");
            let response = match secrets.is_empty() {
                true => {
                    self.send_to_first(&target, &addrs, &method, &headers, body.clone())
                        .await?
                }
                false => {
                    let (hop, hop_headers, hop_body) =
                        hop_request(secrets, &target, &headers, &body, self.secrets_in_body)?;
                    self.send_to_first(&hop, &addrs, &method, &hop_headers, hop_body)
                        .await?
                }
            };
            let status = response.status();
            let location = match response.headers().get(header::LOCATION) {
                Some(loc) if is_redirect(status) => {
                    loc.to_str()
                        .map(str::to_string)
                        .map_err(|_| ProxyError::Upstream {
                            url: target.display(),
                            reason: "the redirect's Location header is not text".into(),
                        })?
                }
                _ => {
                    let head = method == Method::HEAD;
                    return read_response(response, &target, head, self.config.max_response_bytes)
                        .await;
                }
            };
            drop(response);
            if redirects >= self.config.max_redirects {
                return Err(ProxyError::TooManyRedirects {
                    url: target.display(),
                    max: self.config.max_redirects,
                });
            }
            redirects += 1;
            let next = target.join(&location).map_err(|e| match e {
                ProxyError::InvalidParams { reason, .. } => ProxyError::denied(
                    CAP,
                    format!("redirect from {} refused: {reason}", target.display()),
                ),
                other => other,
            })?;
            let to_get = status == StatusCode::SEE_OTHER
                || (method == Method::POST
                    && matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND));
            if to_get {
                if method != Method::HEAD {
                    method = Method::GET;
                }
                body = Bytes::new();
                headers.remove(header::CONTENT_TYPE);
            }
            if !next.same_origin(&target) {
                headers.remove(header::AUTHORIZATION);
                headers.remove(header::COOKIE);
            }
            from = Some(std::mem::replace(&mut target, next));
        }
    }

    /// Resolves the target's host and checks every address ([`NetPolicy`]); returns
    /// them in order.
    async fn resolve_checked(&self, target: &Target) -> Result<Vec<SocketAddr>, ProxyError> {
        self.policy
            .resolve_checked(target)
            .await
            .map_err(|e| match e {
                PolicyError::Resolve { .. } | PolicyError::NoAddress { .. } => {
                    ProxyError::Upstream {
                        url: target.display(),
                        reason: e.to_string(),
                    }
                }
                refused => ProxyError::denied(CAP, refused.to_string()),
            })
    }

    /// Sends the request to the first address that accepts a connection.
    async fn send_to_first(
        &self,
        target: &Target,
        addrs: &[SocketAddr],
        method: &Method,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response<Incoming>, ProxyError> {
        let mut last = None;
        for addr in addrs {
            match self.send(target, addr, method, headers, body.clone()).await {
                Err(SendError::Connect(reason)) => last = Some(reason),
                Err(SendError::Proxy(e)) => return Err(e),
                Ok(response) => return Ok(response),
            }
        }
        Err(ProxyError::Upstream {
            url: target.display(),
            reason: format!(
                "cannot connect: {}",
                last.unwrap_or_else(|| "no address".into())
            ),
        })
    }

    async fn send(
        &self,
        target: &Target,
        addr: &SocketAddr,
        method: &Method,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response<Incoming>, SendError> {
        let uri: http::Uri = target
            .pinned_url(addr.ip())
            .parse()
            .map_err(|e| ProxyError::invalid(CAP, format!("cannot build the request url: {e}")))?;
        let host = HeaderValue::from_str(&target.host_header())
            .map_err(|_| ProxyError::invalid(CAP, "the host is not a valid Host header"))?;
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method.clone();
        *request.uri_mut() = uri;
        *request.headers_mut() = headers.clone();
        request.headers_mut().insert(header::HOST, host);

        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let sent = match target.scheme {
            Scheme::Http => client(http).request(request).await,
            Scheme::Https => {
                let tls = self.tls.clone().map_err(|reason| ProxyError::Unavailable {
                    capability: CAP,
                    reason: format!("TLS client configuration failed: {reason}"),
                })?;
                let name = ServerName::try_from(target.bare_host().to_string()).map_err(|e| {
                    ProxyError::invalid(
                        CAP,
                        format!("{} is not a valid TLS server name: {e}", target.host),
                    )
                })?;
                let resolver = Arc::new(FixedServerNameResolver::new(name));
                client(HttpsConnector::new(http, tls, true, resolver))
                    .request(request)
                    .await
            }
        };
        sent.map_err(|e| {
            if e.is_connect() {
                SendError::Connect(error_chain(&e))
            } else {
                SendError::Proxy(ProxyError::Upstream {
                    url: target.display(),
                    reason: error_chain(&e),
                })
            }
        })
    }
}

/// One hop's request for a call holding `secrets`: the placeholders of the secrets bound
/// to `target`'s host replaced in its path and query, headers and (when `in_body`) body.
fn hop_request(
    secrets: &CallSecrets,
    target: &Target,
    headers: &HeaderMap,
    body: &Bytes,
    in_body: bool,
) -> Result<(Target, HeaderMap, Bytes), ProxyError> {
    let leak = |e: super::secrets::Leak| ProxyError::denied(CAP, e.to_string());
    let mut hop = target.clone();
    if let Some(line) = secrets
        .rewrite(target.path_and_query.as_bytes(), target, "line")
        .map_err(leak)?
    {
        hop.path_and_query = String::from_utf8(line)
            .map_err(|_| ProxyError::invalid(CAP, "the rewritten URL is not UTF-8"))?;
    }
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let value = match secrets
            .rewrite_header(name.as_str(), value.as_bytes(), target)
            .map_err(leak)?
        {
            Some(bytes) => HeaderValue::from_bytes(&bytes)
                .map_err(|_| ProxyError::invalid(CAP, format!("header {name}: not a value")))?,
            None => value.clone(),
        };
        out.append(name.clone(), value);
    }
    let body = match secrets.rewrite(body, target, "body").map_err(leak)? {
        None => body.clone(),
        Some(replaced) if in_body => Bytes::from(replaced),
        Some(_) => {
            return Err(ProxyError::denied(
                CAP,
                format!(
                    "the request body to {} carries a secret's placeholder, and placeholders in \
                     bodies are replaced only when the operator allows it ([egress] \
                     secrets_in_body = true)",
                    target.host
                ),
            ))
        }
    };
    Ok((hop, out, body))
}

/// A fetch's answer with every secret's value masked in its headers and body.
fn mask_result(r: &mut FetchResult, secrets: &CallSecrets) {
    for value in r.headers.values_mut() {
        if let Some(masked) = secrets.mask(value.as_bytes()) {
            *value = String::from_utf8_lossy(&masked).into_owned();
        }
    }
    if let Some(masked) = secrets.mask(r.body.as_bytes()) {
        r.body = String::from_utf8_lossy(&masked).into_owned();
    }
}

/// Why one attempt failed: a connection error (try the next address) or a final error.
enum SendError {
    Connect(String),
    Proxy(ProxyError),
}

impl From<ProxyError> for SendError {
    fn from(e: ProxyError) -> Self {
        SendError::Proxy(e)
    }
}

/// A legacy client for one hop: no pooling (the next hop may pin another address or
/// server name), `Host` set by the proxy.
fn client<C>(connector: C) -> Client<C, Full<Bytes>>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .set_host(false)
        .build(connector)
}

fn tls_config() -> Result<rustls::ClientConfig, String> {
    super::roots::ExtraRoots::default().client_config()
}

fn check_declared(
    network: &[String],
    patterns: &[NetworkPattern],
    target: &Target,
    from: Option<&Target>,
) -> Result<(), ProxyError> {
    let what = match from {
        None => target.origin(),
        Some(from) => format!("redirect from {} to {}", from.display(), target.origin()),
    };
    policy::check_declared(network, patterns, target, what)
        .map_err(|e| ProxyError::denied(CAP, e.to_string()))
}

#[cfg(test)]
mod tests;
