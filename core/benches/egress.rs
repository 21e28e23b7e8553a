//! The egress proxy against the same work done directly, measured side by side in one run
//! (docs/hot-path.md, "Egress proxy", keeps the results). Everything runs in this process
//! over 127.0.0.1, on three tokio runtimes standing for three processes: the test servers
//! (one worker), the client (a current-thread runtime: the program), and
//! [`EgressProxy::serve_connection`] (the core's runtime, one worker per core) serving the
//! client's connections for one call in flight of a skill that declares the servers'
//! names (`web.test`, `api.test`), pinned to 127.0.0.1 with `[egress] resolve` and allowed
//! with `[fetch] allow_private`. Writes `target/egress-bench.md`.
//!
//! Run: `cargo bench -p skillbox-core --bench egress` (`EGRESS_MB` the download's size
//! in MiB, default 100; `EGRESS_ROUNDS` rounds of the downloads, default 10; `EGRESS_N`
//! requests of each latency series, default 200; `EGRESS_RELAY_KB` the bare relay's
//! buffers, default 64 as the proxy's reads).
//!
//! Downloads, rounds interleaved after one of warm-up whose bodies are checked byte for
//! byte, each on a fresh connection, the body read to the end into a 1 MiB buffer:
//! - `http direct` — `GET /big` to the plain server;
//! - `http proxy` — `GET http://web.test:PORT/big` (absolute form) on a loopback TCP
//!   connection to the proxy (as the executor's relay would present it, minus the channel);
//! - `http proxy, duplex` — the same on a tokio duplex stream (256 KiB) handed to the proxy:
//!   the proxy's own cost without the program's socket;
//! - `http relay` — `GET /big` through a bare relay on the core's runtime (accept, connect
//!   to the server, `tokio::io::copy_bidirectional_with_sizes` with the proxy's 64 KiB
//!   buffers; no head read, no policy, no counting): what any user-space relay costs here;
//! - `tls direct` — a TLS 1.3 connection to the TLS server (rcgen's self-signed
//!   certificate, tokio-rustls on both sides), `GET /big`;
//! - `tls relay` — the same TLS connection and `GET` through a bare relay to the TLS server;
//! - `tls tunnel` — `CONNECT api.test:PORT` to the proxy over loopback TCP, then the same
//!   TLS connection and `GET` through the tunnel (the proxy checks the ClientHello's SNI).
//!
//! Then latency, interleaved request by request after 20 of warm-up, each a fresh
//! connection doing one `GET /small` (5 bytes): TLS direct (connect, handshake, `GET`)
//! against the tunnel (connect to the proxy, `CONNECT`, handshake, `GET`), and plain HTTP
//! direct against the proxy. TLS session resumption is off: every handshake is a full one,
//! as for a program started per call. Nothing here asserts a time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use skillbox_core::calls::{ActiveCall, InFlight};
use skillbox_core::proxy::egress::{EgressConfig, EgressProxy, EgressTrust};
use skillbox_core::proxy::roots::ExtraRoots;
use skillbox_core::state::store::{CallEgress, EgressVerdict};
use skillbox_protocol::skill::{discover, DiscoveryOptions, Skill};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::{Handle, Runtime};

#[path = "egress/setup.rs"]
mod setup;
use setup::*;

/// The call id and token of the one call in flight.
const CALL: &str = "bench-call";
const TOKEN: &str = "bench-token";
/// The plain HTTP server's name and the TLS server's.
const WEB: &str = "web.test";
const API: &str = "api.test";
/// The small answer of the latency series.
const SMALL: &[u8] = b"hello";
/// The duplex stream's buffer (as the proxy's unit tests have it).
const DUPLEX: usize = 256 * 1024;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `bytes` of a cheap pseudo-random pattern.
fn pattern(bytes: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(bytes + 8);
    while out.len() < bytes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(bytes);
    out
}

/// The value at fraction `p` of `v` (sorted here), nearest rank.
fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    // `p` is a fraction in 0..=1, so the index lies in 0..len (and is clamped below).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// A fresh loopback connection to `port`.
async fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Sends `GET target` and reads the `200` answer's body to the end of its
/// `Content-Length`, `buf` at a time (into `whole` too when given); the body's length.
async fn get<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut S,
    target: &str,
    host: &str,
    buf: &mut [u8],
    mut whole: Option<&mut Vec<u8>>,
) -> usize {
    let req = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n");
    io.write_all(req.as_bytes()).await.unwrap();
    let mut have = 0;
    let end = loop {
        let n = io.read(&mut buf[have..]).await.unwrap();
        assert!(n > 0, "the connection closed before a whole answer head");
        have += n;
        if let Some(at) = find(&buf[..have], b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{target}: {head}");
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap();
    let mut body = have - end;
    if let Some(w) = whole.as_mut() {
        w.extend_from_slice(&buf[end..have]);
    }
    while body < length {
        let n = io.read(buf).await.unwrap();
        assert!(
            n > 0,
            "{target}: the body ended after {body} of {length} bytes"
        );
        if let Some(w) = whole.as_mut() {
            w.extend_from_slice(&buf[..n]);
        }
        body += n;
    }
    assert_eq!(body, length, "{target}: more than Content-Length");
    length
}

/// `CONNECT host:port` on `io`; reads the proxy's `200`.
async fn connect_tunnel<S: AsyncRead + AsyncWrite + Unpin>(io: &mut S, host_port: &str) {
    let req = format!("CONNECT {host_port} HTTP/1.1\r\nHost: {host_port}\r\n\r\n");
    io.write_all(req.as_bytes()).await.unwrap();
    // The proxy sends nothing after its answer until the ClientHello: one read is all of it.
    let mut got = Vec::new();
    let mut chunk = [0u8; 256];
    while !got.ends_with(b"\r\n\r\n") {
        let n = io.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the proxy closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(got, b"HTTP/1.1 200 Connection established\r\n\r\n");
}

/// A TLS client trusting `cert`, without session resumption (every handshake a full one).
fn tls_connector(cert: &ApiCert) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.clone()).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::disabled();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// The ways the bench reaches a server, all of them from the same client code.
struct Client {
    http_port: u16,
    tls_port: u16,
    /// The bare relays to the plain server and to the TLS server.
    http_relay: u16,
    tls_relay: u16,
    proxy: Proxy,
    /// The core's runtime, which serves the duplex streams too.
    core: Handle,
    tls: tokio_rustls::TlsConnector,
}

impl Client {
    fn web(&self) -> String {
        format!("{WEB}:{}", self.http_port)
    }

    fn api(&self) -> String {
        format!("{API}:{}", self.tls_port)
    }

    async fn http_direct(&self, path: &str, buf: &mut [u8], whole: Option<&mut Vec<u8>>) -> usize {
        let mut s = connect(self.http_port).await;
        get(&mut s, path, &self.web(), buf, whole).await
    }

    async fn http_relay(&self, path: &str, buf: &mut [u8], whole: Option<&mut Vec<u8>>) -> usize {
        let mut s = connect(self.http_relay).await;
        get(&mut s, path, &self.web(), buf, whole).await
    }

    async fn http_proxy(&self, path: &str, buf: &mut [u8], whole: Option<&mut Vec<u8>>) -> usize {
        let mut s = connect(self.proxy.port).await;
        let url = format!("http://{}{path}", self.web());
        get(&mut s, &url, &self.web(), buf, whole).await
    }

    async fn http_duplex(&self, path: &str, buf: &mut [u8], whole: Option<&mut Vec<u8>>) -> usize {
        let (mut program, proxy_side) = tokio::io::duplex(DUPLEX);
        let proxy = Arc::clone(&self.proxy.proxy);
        self.core
            .spawn(async move { proxy.serve_connection(CALL, TOKEN, proxy_side).await });
        let url = format!("http://{}{path}", self.web());
        get(&mut program, &url, &self.web(), buf, whole).await
    }

    async fn tls_direct(&self, path: &str, buf: &mut [u8], whole: Option<&mut Vec<u8>>) -> usize {
        let s = connect(self.tls_port).await;
        let name = ServerName::try_from(API).unwrap();
        let mut tls = self.tls.connect(name, s).await.unwrap();
        get(&mut tls, path, &self.api(), buf, whole).await
    }

    async fn tls_relay(&self, path: &str, buf: &mut [u8], whole: Option<&mut Vec<u8>>) -> usize {
        let s = connect(self.tls_relay).await;
        let name = ServerName::try_from(API).unwrap();
        let mut tls = self.tls.connect(name, s).await.unwrap();
        get(&mut tls, path, &self.api(), buf, whole).await
    }

    async fn tls_tunnel(&self, path: &str, buf: &mut [u8], whole: Option<&mut Vec<u8>>) -> usize {
        let mut s = connect(self.proxy.port).await;
        connect_tunnel(&mut s, &self.api()).await;
        let name = ServerName::try_from(API).unwrap();
        let mut tls = self.tls.connect(name, s).await.unwrap();
        get(&mut tls, path, &self.api(), buf, whole).await
    }

    /// The negotiated TLS version and cipher suite, for the report.
    async fn tls_params(&self) -> String {
        let s = connect(self.tls_port).await;
        let name = ServerName::try_from(API).unwrap();
        let mut tls = self.tls.connect(name, s).await.unwrap();
        let (_, conn) = tls.get_ref();
        let said = format!(
            "{:?}, {:?}",
            conn.protocol_version().unwrap(),
            conn.negotiated_cipher_suite().unwrap().suite()
        );
        let mut buf = vec![0u8; 4096];
        get(&mut tls, "/small", &self.api(), &mut buf, None).await;
        said
    }
}

/// Which way a download went.
#[derive(Clone, Copy)]
enum Way {
    HttpDirect,
    HttpRelay,
    HttpProxy,
    HttpDuplex,
    TlsDirect,
    TlsRelay,
    TlsTunnel,
}

impl Way {
    /// Whether the proxy serves it (and so records it with the call).
    fn proxied(self) -> bool {
        matches!(self, Way::HttpProxy | Way::HttpDuplex | Way::TlsTunnel)
    }
}

const WAYS: [(Way, &str); 7] = [
    (Way::HttpDirect, "http direct, `GET /big`"),
    (
        Way::HttpRelay,
        "http through a bare relay (`copy_bidirectional`)",
    ),
    (
        Way::HttpProxy,
        "http through the proxy, `GET http://web.test:PORT/big` over loopback TCP",
    ),
    (
        Way::HttpDuplex,
        "http through the proxy, the same over a tokio duplex (no program socket)",
    ),
    (Way::TlsDirect, "https direct, TLS + `GET /big`"),
    (
        Way::TlsRelay,
        "https through a bare relay, TLS + `GET /big`",
    ),
    (
        Way::TlsTunnel,
        "https through the proxy, `CONNECT api.test:PORT` + TLS + `GET /big`",
    ),
];

impl Client {
    async fn fetch(
        &self,
        way: Way,
        path: &str,
        buf: &mut [u8],
        whole: Option<&mut Vec<u8>>,
    ) -> usize {
        match way {
            Way::HttpDirect => self.http_direct(path, buf, whole).await,
            Way::HttpRelay => self.http_relay(path, buf, whole).await,
            Way::HttpProxy => self.http_proxy(path, buf, whole).await,
            Way::HttpDuplex => self.http_duplex(path, buf, whole).await,
            Way::TlsDirect => self.tls_direct(path, buf, whole).await,
            Way::TlsRelay => self.tls_relay(path, buf, whole).await,
            Way::TlsTunnel => self.tls_tunnel(path, buf, whole).await,
        }
    }

    /// One request of `way` for `path`; ms.
    async fn timed(&self, way: Way, path: &str, buf: &mut [u8], expect: usize) -> f64 {
        let t = Instant::now();
        let n = self.fetch(way, path, buf, None).await;
        let ms = ms_since(t);
        assert_eq!(n, expect);
        ms
    }
}

/// One series' MiB/s: median, lowest, highest.
fn rates(mib: f64, ms: &[f64]) -> (f64, f64, f64) {
    let mut r: Vec<f64> = ms.iter().map(|ms| mib / (ms / 1000.0)).collect();
    let (lo, hi) = (percentile(&mut r, 0.0), percentile(&mut r, 1.0));
    (percentile(&mut r, 0.5), lo, hi)
}

async fn run(servers: Handle, core: Handle) -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split(' ').take(3).collect::<Vec<_>>().join(" ");
    let mib = env_or("EGRESS_MB", 100).max(1);
    let rounds = env_or("EGRESS_ROUNDS", 10).max(1);
    let n = env_or("EGRESS_N", 200).max(1);
    let relay_kib = env_or("EGRESS_RELAY_KB", 64).max(1);
    let bytes = mib * 1024 * 1024;
    let data = pattern(bytes);
    let big = Bytes::from(data.clone());
    let cert = api_cert();
    let http_port = servers.spawn(http_server(big.clone())).await.unwrap();
    let tls_port = servers
        .spawn(tls_server(tls_acceptor(&cert), big))
        .await
        .unwrap();
    let client = Client {
        http_port,
        tls_port,
        http_relay: core
            .spawn(relay(http_port, relay_kib * 1024))
            .await
            .unwrap(),
        tls_relay: core.spawn(relay(tls_port, relay_kib * 1024)).await.unwrap(),
        proxy: core.spawn(proxy(http_port, tls_port)).await.unwrap(),
        core: core.clone(),
        tls: tls_connector(&cert),
    };
    let mut buf = vec![0u8; 1024 * 1024];

    // Warm-up, each way's body checked byte for byte.
    let mut whole = Vec::with_capacity(bytes);
    for (way, name) in WAYS {
        whole.clear();
        client.fetch(way, "/big", &mut buf, Some(&mut whole)).await;
        assert!(whole == data, "{name}: the body differs");
    }
    drop(whole);
    drop(data);

    let mut ms: Vec<Vec<f64>> = WAYS.iter().map(|_| Vec::with_capacity(rounds)).collect();
    for _ in 0..rounds {
        for (i, (way, _)) in WAYS.iter().enumerate() {
            ms[i].push(client.timed(*way, "/big", &mut buf, bytes).await);
        }
    }
    let params = client.tls_params().await;
    let mut report = format!(
        "# Egress proxy benchmark\n\nOne process, everything over 127.0.0.1, three tokio runtimes standing for three processes: the test servers (1 worker), the client (current-thread) and `EgressProxy::serve_connection` serving the client's connections as one call's (the core's runtime, {} workers). TLS: {params}, rcgen's self-signed certificate, tokio-rustls on both sides. Load average at the start: {load}.\n\n\
         {mib} MiB downloads, {rounds} rounds interleaved after one of warm-up (each way's body checked byte for byte), a fresh connection each, the body read into a 1 MiB buffer; the bare relay's buffers {relay_kib} KiB each way (the proxy reads 64 KiB at a time):\n\n\
         | series | MiB/s, median | lowest | highest |\n|---|---|---|---|\n",
        core.metrics().num_workers()
    );
    let mut medians = Vec::new();
    for ((_, name), s) in WAYS.iter().zip(&ms) {
        let (m, lo, hi) = rates(mib as f64, s);
        medians.push(m);
        report.push_str(&format!("| {name} | {m:.0} | {lo:.0} | {hi:.0} |\n"));
    }
    let verdict = |r: f64| if r >= 0.8 { "met" } else { "not met" };
    let (http, tls) = (medians[2] / medians[0], medians[6] / medians[4]);
    report.push_str(&format!(
        "\nProxy / direct, medians (goal: at least 0.8): http **{http:.2}** ({}), https tunnel **{tls:.2}** ({}); http over the duplex {:.2}. \
         A bare relay / direct: http {:.2}, https {:.2}; the proxy / a bare relay: http {:.2}, https {:.2}.\n",
        verdict(http),
        verdict(tls),
        medians[3] / medians[0],
        medians[1] / medians[0],
        medians[5] / medians[4],
        medians[2] / medians[1],
        medians[6] / medians[5],
    ));

    // Latency of one small request on a fresh connection.
    let pairs = [
        (
            Way::TlsDirect,
            Way::TlsTunnel,
            "https: connect + TLS handshake + `GET /small`",
            "through the proxy: + `CONNECT`",
        ),
        (
            Way::HttpDirect,
            Way::HttpProxy,
            "http: connect + `GET /small`",
            "through the proxy, absolute form",
        ),
    ];
    for (direct, proxied, _, _) in pairs {
        for _ in 0..20 {
            client.timed(direct, "/small", &mut buf, SMALL.len()).await;
            client.timed(proxied, "/small", &mut buf, SMALL.len()).await;
        }
    }
    let mut lat: Vec<Vec<f64>> = (0..4).map(|_| Vec::with_capacity(n)).collect();
    for _ in 0..n {
        for (i, (direct, proxied, _, _)) in pairs.iter().enumerate() {
            lat[2 * i].push(client.timed(*direct, "/small", &mut buf, SMALL.len()).await);
            lat[2 * i + 1].push(
                client
                    .timed(*proxied, "/small", &mut buf, SMALL.len())
                    .await,
            );
        }
    }
    report.push_str(&format!(
        "\nOne small request ({} bytes) on a fresh connection, {n} of each interleaved after 20 of warm-up; TLS without session resumption (a full handshake each):\n\n\
         | series | p50 ms | p90 ms | p99 ms |\n|---|---|---|---|\n",
        SMALL.len()
    ));
    let mut added = Vec::new();
    let quantiles =
        |v: &mut Vec<f64>| [percentile(v, 0.5), percentile(v, 0.9), percentile(v, 0.99)];
    let q: Vec<[f64; 3]> = lat.iter_mut().map(quantiles).collect();
    for (i, (_, _, what, via)) in pairs.iter().enumerate() {
        let (dq, pq) = (q[2 * i], q[2 * i + 1]);
        report.push_str(&format!(
            "| {what}, direct | {:.3} | {:.3} | {:.3} |\n| {what}, {via} | {:.3} | {:.3} | {:.3} |\n",
            dq[0], dq[1], dq[2], pq[0], pq[1], pq[2]
        ));
        added.push((pq[0] - dq[0], pq[2] - dq[2]));
    }
    report.push_str(&format!(
        "\nAdded by the proxy per request: https **{:+.3} ms at p50, {:+.3} ms at p99**; http {:+.3} ms at p50, {:+.3} ms at p99.\n",
        added[0].0, added[0].1, added[1].0, added[1].1
    ));

    // Every proxied connection is on the call's record (once its task ended), allowed: the
    // first `MAX_EGRESS_LISTED` listed, the rest counted.
    let per_round = WAYS.iter().filter(|(w, _)| w.proxied()).count();
    let proxied = per_round * (1 + rounds) + 2 * (20 + n);
    let mut record = CallEgress::default();
    for _ in 0..100 {
        record = client.proxy.call.egress.snapshot();
        if record.connections.len() + usize::try_from(record.unlisted).unwrap() >= proxied {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let listed = &record.connections;
    assert_eq!(
        listed.len() + usize::try_from(record.unlisted).unwrap(),
        proxied,
        "the call's egress record"
    );
    assert!(
        listed.iter().all(|e| e.verdict == EgressVerdict::Allowed),
        "a proxied connection was refused: {:?}",
        listed.iter().find(|e| e.verdict != EgressVerdict::Allowed)
    );
    let cut: Vec<&str> = listed.iter().filter_map(|e| e.reason.as_deref()).collect();
    report.push_str(&format!(
        "\nThe call's egress record: {proxied} connections, the first {} listed, all of them allowed; {} of those ended with a reason{}.\n",
        listed.len(),
        cut.len(),
        cut.first().map_or(String::new(), |r| format!(" (first: {r})"))
    ));
    report
}

/// A multi-thread runtime of `workers` (one per core when `None`, as the core's).
fn runtime(workers: Option<usize>) -> Runtime {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        b.worker_threads(n);
    }
    b.enable_all().build().unwrap()
}

fn main() {
    let servers = runtime(Some(1));
    let core = runtime(None);
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = client.block_on(run(servers.handle().clone(), core.handle().clone()));
    print!("{report}");
    // `target/`, above the profile's folder (`target/release/deps/egress-…`).
    let exe = std::env::current_exe().unwrap();
    if let Some(target) = exe.ancestors().nth(3) {
        let _ = std::fs::write(target.join("egress-bench.md"), &report);
    }
}
