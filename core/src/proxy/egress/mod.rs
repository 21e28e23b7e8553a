//! The egress proxy: the HTTP proxy of every program in a sandbox (docs/sandbox.md).
//!
//! The executor hands each connection a program makes to its proxy to the core over the
//! channel (`POST /egress`, upgraded; `skillbox_channel::stream`), naming the call and
//! presenting its capability token. [`EgressProxy::serve_connection`] serves one such
//! connection:
//!
//! 1. the call must be in flight and the token its own ([`EgressCalls::egress_call`],
//!    answered by the calls in flight): a
//!    program cannot borrow another call's identity, nor reach anything after its call;
//! 2. the first request head is read (bounded, with a deadline, `head.rs`): `CONNECT
//!    host:port` is a TLS tunnel (`tunnel.rs`), an absolute `http://` URL a plain request
//!    (`forward.rs`), anything else `400`; a `Host` naming another host than the one
//!    asked for is refused (`host.rs`), here and in every request a read connection carries;
//! 3. the call may have [`EgressConfig::max_connections_per_call`] connections open;
//! 4. the policy of `core.fetch` (`policy.rs`): the skill's effective
//!    `permissions.network` allows the scheme, host and port; an IP literal is refused
//!    (declare names); the proxy resolves the name (`[egress] resolve` first) and refuses a
//!    non-public address unless `[fetch] allow_private` lists it; it connects to an
//!    address of that same lookup;
//! 5. the bytes are relayed (`relay.rs`), counted against the call's bytes limit, closed
//!    when idle.
//!
//! Refusals answer `403` (`400` for a request the proxy does not serve) with
//! `X-Skillbox-Refused: <reason>` and the reason as the body. Every connection of a call
//! in flight, allowed or refused, is a record in its [`EgressLog`], which the pipeline
//! stores with the call (`GET /v1/calls/{id}` → `"egress"`).

mod cache;
mod calls;
mod forward;
mod head;
mod host;
mod intercept;
mod judge;
mod log;
mod masking;
mod relay;
pub mod trust;
mod tunnel;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use skillbox_channel::stream::{BoxedStream, StreamFuture, StreamHandler};
use skillbox_protocol::methods::SecretValue;
use skillbox_protocol::skill::network::Scheme;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use self::cache::serve::CacheUse;
use self::head::{answer, is_ip_literal, read_head, Asked, HeadError, Mark};
use self::relay::Meter;
use crate::proxy::policy::{check_declared, parse_patterns, NetPolicy, PolicyError};
use crate::proxy::target::Target;
use crate::state::store::{unix_ms_now, EgressEntry, EgressVerdict};

pub use self::cache::DepsCache;
pub use self::calls::{EgressCall, EgressCalls, DEPS_BUILD_TOOL};
pub use self::judge::{judge_reading, Judged, JUDGE_VALUE_ELSEWHERE, JUDGE_VALUE_HERE};
pub use self::log::EgressLog;
pub use self::trust::EgressTrust;
pub use crate::state::config::egress::EgressConfig;

/// How one connection came out: the policy's verdict, and why it was refused or ended
/// early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    allowed: bool,
    reason: Option<String>,
    /// Requests the dependency cache answered on the connection.
    cache_hits: u64,
}

impl Outcome {
    fn allowed(reason: Option<String>) -> Self {
        Self {
            allowed: true,
            reason,
            cache_hits: 0,
        }
    }

    fn refused(reason: String) -> Self {
        Self {
            allowed: false,
            reason: Some(reason),
            cache_hits: 0,
        }
    }
}

/// A refusal before any byte is carried: the status answered and why.
struct Refusal {
    status: u16,
    mark: Mark,
    reason: String,
}

impl Refusal {
    fn forbidden(reason: String) -> Self {
        Self {
            status: 403,
            mark: Mark::Refused,
            reason,
        }
    }
}

/// Serves the connections of the programs of calls in flight (see the module docs).
#[derive(Debug)]
pub struct EgressProxy {
    calls: Arc<dyn EgressCalls>,
    policy: NetPolicy,
    config: EgressConfig,
    trust: Arc<EgressTrust>,
    /// The dependency builds' download cache (`cache/`).
    cache: Option<Arc<DepsCache>>,
}

impl EgressProxy {
    /// A proxy for the calls in flight `calls` names, with `config`'s limits and pinned names, the
    /// private addresses `allow_private` (`[fetch] allow_private`) allows, and `trust`'s
    /// certificates for the connections it reads (skills with bound secrets).
    pub fn new(
        calls: Arc<dyn EgressCalls>,
        config: EgressConfig,
        allow_private: Vec<String>,
        trust: Arc<EgressTrust>,
    ) -> Self {
        Self {
            calls,
            policy: NetPolicy::new(allow_private, &config.resolve),
            config,
            trust,
            cache: None,
        }
    }

    /// The same proxy, answering dependency builds' package downloads from `cache` while
    /// it is on.
    pub fn with_cache(mut self, cache: Arc<DepsCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Serves one program connection of call `call_id`, which presented `token`, until
    /// it ends; records it in the call's [`EgressLog`].
    pub async fn serve_connection<S>(&self, call_id: &str, token: &str, mut io: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let started = Instant::now();
        let started_ms = unix_ms_now();
        let authorized = self
            .calls
            .egress_call(call_id, &SecretValue(token.to_string()));
        // A slot is taken before the head is read: connections that never ask count too.
        let slot = match &authorized {
            Ok(call) => call.egress.open(self.config.max_connections_per_call),
            Err(_) => None,
        };
        // The head is read first, so that the program reads the refusal it gets.
        let mut buf = Vec::new();
        let head = read_head(&mut io, &mut buf).await;
        let call = match authorized {
            // Its record comes in before the guard drops, at the end of this function.
            Ok(call) => call,
            Err(e) => {
                tracing::warn!(%call_id, reason = %e, "egress refused: not the program of a call in flight");
                let reason = format!(
                    "{e}; a program reaches the network only through its own call's identity"
                );
                answer(&mut io, 403, Mark::Refused, &reason).await;
                return;
            }
        };
        let _serving = call.egress.serving();
        let (host, port, outcome, (bytes_out, bytes_in)) = match head {
            Ok(head) => self.serve_head(&call, slot, head, buf, io).await,
            // Nothing was asked.
            Err(HeadError::Closed) => return,
            Err(e) => {
                let reason = e.to_string();
                answer(&mut io, 400, Mark::Refused, &reason).await;
                (String::new(), 0, Outcome::refused(reason), (0, 0))
            }
        };
        let verdict = match outcome.allowed {
            true => EgressVerdict::Allowed,
            false => EgressVerdict::Refused,
        };
        tracing::info!(
            %call_id, skill = %call.skill.name, %host, port, ?verdict,
            reason = outcome.reason.as_deref().unwrap_or_default(), bytes_out, bytes_in,
            "egress"
        );
        call.egress.push(EgressEntry {
            host,
            port,
            verdict,
            reason: outcome.reason,
            bytes_out,
            bytes_in,
            started_ms,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            cache_hits: outcome.cache_hits,
        });
    }

    /// Serves a connection whose head was read (`buf` holds it and any bytes after it),
    /// holding `slot` (`None`: the call's connections limit was reached): the host and
    /// port asked for, the outcome, and the bytes carried each way.
    async fn serve_head<S>(
        &self,
        call: &EgressCall,
        slot: Option<log::OpenSlot>,
        head: head::Head,
        mut buf: Vec<u8>,
        mut io: S,
    ) -> (String, u16, Outcome, (u64, u64))
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let (target, what) = match head.asked() {
            Asked::Connect { host, port } => {
                let what = format!("CONNECT {host}:{port}");
                let target = Target {
                    scheme: Scheme::Https,
                    host,
                    port,
                    path_and_query: "/".into(),
                };
                (target, what)
            }
            Asked::Forward(target) => {
                let what = target.display();
                (target, what)
            }
            Asked::Bad(reason) => {
                answer(&mut io, 400, Mark::Refused, &reason).await;
                return (String::new(), 0, Outcome::refused(reason), (0, 0));
            }
        };
        let (host, port) = (target.host.clone(), target.port);
        let named = (head.headers.iter())
            .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
            .map(|(_, v)| v.as_slice());
        if let Err(e) = host::check_host(named, &target) {
            let refusal = Refusal {
                status: e.status(),
                mark: Mark::Refused,
                reason: format!("{what}: {e}"),
            };
            return (host, port, refuse(&mut io, refusal).await, (0, 0));
        }
        let max = self.config.max_connections_per_call;
        let Some(_slot) = slot else {
            let reason = format!(
                "the call has {max} connections open through the proxy, its limit ([egress] \
                 max_connections_per_call); close one first"
            );
            let outcome = refuse(&mut io, Refusal::forbidden(reason)).await;
            return (host, port, outcome, (0, 0));
        };
        let addrs = match self.admit(call, &target, what).await {
            Ok(addrs) => addrs,
            Err(refusal) => return (host, port, refuse(&mut io, refusal).await, (0, 0)),
        };
        let server = match self.connect(&addrs).await {
            Ok(server) => server,
            Err(why) => {
                answer(&mut io, 502, Mark::Failed, &why).await;
                return (host, port, Outcome::allowed(Some(why)), (0, 0));
            }
        };
        let meter = Meter::new(
            call.egress.clone(),
            self.config.max_bytes_per_call,
            Duration::from_millis(self.config.idle_timeout_ms),
        );
        // A build's connections are read when the cache is on, to answer from it.
        let cache = (self.cache.as_ref())
            .filter(|c| call.deps_build && c.enabled())
            .map(|c| CacheUse {
                cache: Arc::clone(c),
                log: call.egress.clone(),
            });
        if !call.secrets.is_empty() || cache.is_some() {
            let meter = Arc::new(meter);
            let how = (target, head, buf, cache);
            let outcome = self.read(call, how, io, server, &meter).await;
            return (host, port, outcome, meter.counts());
        }
        let early = buf.split_off(head.len.min(buf.len()));
        let outcome = match target.scheme {
            Scheme::Https => tunnel::tunnel(io, server, early, &host, &meter).await,
            Scheme::Http => forward::forward(io, server, &head, &target, &early, &meter).await,
        };
        (host, port, outcome, meter.counts())
    }

    /// Serves a connection of a call with bound secrets, or of a dependency build while
    /// the cache is on (`cache`), by reading its requests (`intercept.rs`): TLS ended with
    /// a certificate of the egress CA after the ClientHello's check, and opened again to
    /// the real server.
    async fn read<S>(
        &self,
        call: &EgressCall,
        (target, head, mut buf, cache): (Target, head::Head, Vec<u8>, Option<CacheUse>),
        mut io: S,
        server: TcpStream,
        meter: &Arc<Meter>,
    ) -> Outcome
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let reading = |plain| intercept::Reading {
            secrets: Arc::clone(&call.secrets),
            target: target.clone(),
            plain,
            in_body: self.config.secrets_in_body,
            max_body: usize::try_from(self.config.max_inspected_body_bytes).unwrap_or(usize::MAX),
            cache: cache.clone(),
        };
        let host = target.host.clone();
        if target.scheme == Scheme::Http {
            let program = intercept::Rewind::new(buf, io);
            return intercept::serve(program, server, reading(true), Arc::clone(meter)).await;
        }
        let early = buf.split_off(head.len.min(buf.len()));
        let hello = match tunnel::accept_hello(&mut io, early, &host).await {
            Ok(hello) => hello,
            Err(outcome) => return outcome,
        };
        let config = match self.trust.server_for(&host) {
            Ok(config) => config,
            Err(e) => {
                return Outcome::refused(format!("cannot make a certificate for {host}: {e}"))
            }
        };
        let program = intercept::Rewind::new(hello, io);
        let program = match tokio_rustls::TlsAcceptor::from(config)
            .accept(program)
            .await
        {
            Ok(tls) => tls,
            Err(e) => {
                return Outcome::refused(format!(
                    "the program's TLS handshake with the proxy failed ({e}); a program of a \
                     skill with bound secrets must trust the workspace's egress CA (the bundle \
                     SSL_CERT_FILE names holds it)"
                ))
            }
        };
        let name = match rustls::pki_types::ServerName::try_from(host.clone()) {
            Ok(name) => name,
            Err(e) => return Outcome::refused(format!("{host}: {e}")),
        };
        let connector = tokio_rustls::TlsConnector::from(self.trust.upstream());
        let server = match connector.connect(name, server).await {
            Ok(tls) => tls,
            Err(e) => {
                return Outcome::allowed(Some(format!(
                    "closed: TLS to the server failed ({e}); a server with a private CA needs \
                     it in [egress] extra_roots"
                )))
            }
        };
        intercept::serve(program, server, reading(false), Arc::clone(meter)).await
    }

    /// The policy: a declared name (never an IP literal) resolving to allowed addresses.
    async fn admit(
        &self,
        call: &EgressCall,
        target: &Target,
        what: String,
    ) -> Result<Vec<SocketAddr>, Refusal> {
        if is_ip_literal(&target.host) {
            return Err(Refusal::forbidden(format!(
                "{what}: {} is an IP address; the proxy reaches declared host names only \
                 (declare the name in permissions.network and ask for it by name)",
                target.host
            )));
        }
        let network = call.skill.permissions.reachable();
        check_declared(&network, &parse_patterns(&network), target, what)
            .map_err(|e| Refusal::forbidden(e.to_string()))?;
        self.policy
            .resolve_checked(target)
            .await
            .map_err(|e| match e {
                PolicyError::Resolve { .. } | PolicyError::NoAddress { .. } => Refusal {
                    status: 502,
                    mark: Mark::Refused,
                    reason: e.to_string(),
                },
                refused => Refusal::forbidden(refused.to_string()),
            })
    }

    /// A connection to the first of `addrs` that accepts one within the connect timeout.
    async fn connect(&self, addrs: &[SocketAddr]) -> Result<TcpStream, String> {
        let limit = Duration::from_millis(self.config.connect_timeout_ms);
        let mut last = String::from("no address");
        for addr in addrs {
            match tokio::time::timeout(limit, TcpStream::connect(addr)).await {
                Ok(Ok(server)) => {
                    let _ = server.set_nodelay(true);
                    return Ok(server);
                }
                Ok(Err(e)) => last = format!("{addr}: {e}"),
                Err(_) => {
                    last = format!(
                        "{addr}: no connection within {} ms ([egress] connect_timeout_ms)",
                        limit.as_millis()
                    )
                }
            }
        }
        Err(format!("cannot connect to the server: {last}"))
    }
}

/// What the proxy makes of the first bytes of a program's connection, in words: the
/// head's verdict (`CONNECT host:port`, a URL, or why not) and, for a request it would
/// carry, the `Host` check's. Pure, no connection made: the `egress_head` fuzz target.
pub fn judge_head(bytes: &[u8]) -> String {
    let head = match head::parse(bytes) {
        Ok(Some(head)) => head,
        Ok(None) => return "incomplete".into(),
        Err(e) => return format!("refused: {e}"),
    };
    let target = match head.asked() {
        Asked::Connect { host, port } => Target {
            scheme: Scheme::Https,
            host,
            port,
            path_and_query: "/".into(),
        },
        Asked::Forward(target) => target,
        Asked::Bad(reason) => return format!("bad: {reason}"),
    };
    let named = (head.headers.iter())
        .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.as_slice());
    match host::check_host(named, &target) {
        Ok(()) => format!("asks {}", target.display()),
        Err(e) => format!("refused: {e}"),
    }
}

/// Answers `refusal` and closes.
async fn refuse<S: AsyncWrite + Unpin>(io: &mut S, refusal: Refusal) -> Outcome {
    answer(io, refusal.status, refusal.mark, &refusal.reason).await;
    Outcome::refused(refusal.reason)
}

impl StreamHandler for EgressProxy {
    fn serve(&self, call_id: String, token: String, io: BoxedStream) -> StreamFuture<'_> {
        Box::pin(async move { self.serve_connection(&call_id, &token, io).await })
    }
}
