//! Egress proxy tests against servers they start on 127.0.0.1: a plain HTTP server
//! (`web.test`) and a TLS one (`api.test`, a self-signed certificate), both pinned to
//! 127.0.0.1 with `[egress] resolve` and allowed with `[fetch] allow_private`. A program's
//! connection is a tokio duplex stream handed to [`EgressProxy::serve_connection`], or
//! (`channel.rs`) a real `POST /egress` stream over the mutual-TLS channel.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use skillbox_protocol::skill::{discover, DiscoveryOptions, Skill};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::*;
use crate::calls::{ActiveCall, InFlight};
use crate::state::store::{EgressEntry, EgressVerdict};

mod channel;
mod codings;
mod forward;
mod fronting;
mod limits;
mod record;
mod secrets;
mod tunnel;

/// The call id and token of the test call.
const CALL: &str = "call-1";
const TOKEN: &str = "token-1";

/// A server on 127.0.0.1, stopped when dropped.
struct TestServer {
    port: u16,
    task: JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `/hello` → `hello`; `/echo` → method, path, headers and body; `/big?n=N` → N bytes;
/// `/slow` → nothing, ever; `/coded?ce=..&te=..` → the echo, coded (`codings.rs`).
async fn route(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path() == "/coded" {
        return Ok(codings::coded_echo(req).await);
    }
    let text = match req.uri().path() {
        "/hello" => "hello".to_string(),
        "/echo" => {
            let mut out = format!("{} {}\n", req.method(), req.uri());
            for (k, v) in req.headers() {
                out.push_str(&format!("{k}: {}\n", v.to_str().unwrap_or("?")));
            }
            let body = req.into_body().collect().await.unwrap().to_bytes();
            out.push_str(&String::from_utf8_lossy(&body));
            out
        }
        "/big" => {
            let n = req.uri().query().unwrap_or("n=0")[2..].parse().unwrap();
            "x".repeat(n)
        }
        "/slow" => std::future::pending().await,
        // What a bound API checks: the real key in the header and in the query.
        "/auth" => {
            let header = req
                .headers()
                .get("authorization")
                .map(|v| v.as_bytes().to_vec());
            let query = req.uri().query().unwrap_or_default().to_string();
            match (header.as_deref(), query.as_str()) {
                (Some(b"Bearer sk-test-value"), "key=sk-test-value") => "authorized".to_string(),
                (h, q) => format!("denied: {:?} {q}", h.map(String::from_utf8_lossy)),
            }
        }
        _ => "not found".to_string(),
    };
    Ok(Response::new(Full::new(Bytes::from(text))))
}

/// Serves [`route`] over `io`.
async fn serve_http<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(io: S) {
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(io), service_fn(route))
        .await;
}

/// The plain HTTP server.
async fn web_server() -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_http(stream));
        }
    });
    TestServer { port, task }
}

/// The TLS server's certificate (self-signed for `api.test`) and key.
struct ApiCert {
    cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

fn api_cert() -> ApiCert {
    let made = rcgen::generate_simple_self_signed(vec!["api.test".to_string()]).unwrap();
    ApiCert {
        cert: made.cert.der().clone(),
        key: PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()),
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The TLS server for `api.test`.
async fn api_server(cert: &ApiCert) -> TestServer {
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.cert.clone()],
            PrivateKeyDer::Pkcs8(cert.key.clone_key()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(stream).await {
                    serve_http(tls).await;
                }
            });
        }
    });
    TestServer { port, task }
}

/// A TLS client trusting `cert`, sending `sni` (none when `None`).
async fn tls_client<S: AsyncRead + AsyncWrite + Unpin>(
    io: S,
    cert: &ApiCert,
    sni: Option<&str>,
) -> std::io::Result<tokio_rustls::client::TlsStream<S>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.clone()).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.enable_sni = sni.is_some();
    let name = ServerName::try_from(sni.unwrap_or("api.test").to_string()).unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, io)
        .await
}

/// `GET path` over `io` (HTTP/1.1, `Host: host`): the status and the body.
async fn get<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    io: S,
    host: &str,
    path: &str,
) -> (u16, String) {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::get(path)
        .header(http::header::HOST, host)
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A skill declaring `network`.
fn skill(network: &[String]) -> Arc<Skill> {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("netty");
    std::fs::create_dir_all(&dir).unwrap();
    let list: Vec<String> = network.iter().map(|n| format!("\"{n}\"")).collect();
    std::fs::write(
        dir.join("skill.yaml"),
        format!(
            "name: netty\nversion: 0.1.0\ndescription: Reaches the network\n\
             permissions:\n  network: [{}]\ntools:\n  - name: go\n    description: Goes\n    \
             command: [\"true\"]\n    security: read\n",
            list.join(", ")
        ),
    )
    .unwrap();
    let mut catalog = discover(&[root.path().to_path_buf()], DiscoveryOptions::default());
    assert_eq!(catalog.skills.len(), 1, "{:?}", catalog.skipped);
    Arc::new(catalog.skills.remove(0))
}

/// A proxy and one call in flight (`CALL`, `TOKEN`) of a skill.
struct Rig {
    proxy: Arc<EgressProxy>,
    in_flight: Arc<InFlight>,
    call: Arc<ActiveCall>,
    /// The proxy's certificates (its CA in a temporary state folder).
    trust: Arc<EgressTrust>,
    _state: tempfile::TempDir,
}

/// An egress CA in a new state folder, trusting `extra` for servers.
fn test_trust(extra: crate::proxy::roots::ExtraRoots) -> (Arc<EgressTrust>, tempfile::TempDir) {
    let state = tempfile::tempdir().unwrap();
    let trust = EgressTrust::open(state.path(), extra).unwrap();
    (Arc::new(trust), state)
}

/// `[egress]` with `api.test` and `web.test` pinned to 127.0.0.1.
fn pinned() -> EgressConfig {
    EgressConfig {
        resolve: BTreeMap::from([
            ("api.test".to_string(), "127.0.0.1".parse().unwrap()),
            ("web.test".to_string(), "127.0.0.1".parse().unwrap()),
        ]),
        ..EgressConfig::default()
    }
}

impl Rig {
    /// A call of a skill declaring `network`, with `config` and `allow_private`.
    fn new(network: &[String], config: EgressConfig, allow_private: &[String]) -> Self {
        let in_flight = Arc::new(InFlight::default());
        let call = in_flight.insert_for_test(CALL, skill(network), TOKEN);
        Self::around(in_flight, call, config, allow_private, Default::default())
    }

    /// A proxy for `call` (registered in `in_flight`), trusting `extra` for servers.
    fn around(
        in_flight: Arc<InFlight>,
        call: Arc<ActiveCall>,
        config: EgressConfig,
        allow_private: &[String],
        extra: crate::proxy::roots::ExtraRoots,
    ) -> Self {
        let (trust, state) = test_trust(extra);
        let proxy = Arc::new(EgressProxy::new(
            Arc::clone(&in_flight) as Arc<dyn EgressCalls>,
            config,
            allow_private.to_vec(),
            Arc::clone(&trust),
        ));
        Self {
            proxy,
            in_flight,
            call,
            trust,
            _state: state,
        }
    }

    /// A program's connection as `call_id` with `token`, and the proxy's task serving it.
    fn open_as(&self, call_id: &str, token: &str) -> (DuplexStream, JoinHandle<()>) {
        let (program, proxy_side) = tokio::io::duplex(256 * 1024);
        let proxy = Arc::clone(&self.proxy);
        let (call_id, token) = (call_id.to_string(), token.to_string());
        let task = tokio::spawn(async move {
            proxy.serve_connection(&call_id, &token, proxy_side).await;
        });
        (program, task)
    }

    /// A program's connection of the test call.
    fn open(&self) -> (DuplexStream, JoinHandle<()>) {
        self.open_as(CALL, TOKEN)
    }

    /// The call's egress record so far.
    fn entries(&self) -> Vec<EgressEntry> {
        self.call.egress.snapshot().connections
    }
}

/// Sends `head` and reads the proxy's answer head (up to the blank line).
async fn ask<S: AsyncRead + AsyncWrite + Unpin>(io: &mut S, head: &str) -> String {
    io.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        if io.read(&mut byte).await.unwrap() == 0 {
            break;
        }
        got.push(byte[0]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Sends `head` and reads the proxy's whole answer to the end of the connection.
async fn ask_all<S: AsyncRead + AsyncWrite + Unpin>(io: &mut S, head: &str) -> String {
    io.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), io.read_to_end(&mut got)).await;
    String::from_utf8_lossy(&got).into_owned()
}

/// The `X-Skillbox-Refused` value of an answer.
fn refused_header(answer: &str) -> String {
    answer
        .lines()
        .find_map(|l| l.strip_prefix("X-Skillbox-Refused: "))
        .unwrap_or_default()
        .to_string()
}

/// Asserts `answer` is a `status` refusal whose header and body both say `why`.
fn assert_refused(answer: &str, status: &str, why: &str) {
    assert!(
        answer.starts_with(&format!("HTTP/1.1 {status}")),
        "{answer}"
    );
    assert!(refused_header(answer).contains(why), "{answer}");
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    assert!(body.contains(why), "{answer}");
}

/// The only entry of the call's record, once the connection's task ended.
async fn only_entry(rig: &Rig, task: JoinHandle<()>) -> EgressEntry {
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    let entries = rig.entries();
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries.into_iter().next().unwrap()
}

fn assert_refused_entry(entry: &EgressEntry, host: &str, why: &str) {
    assert_eq!(entry.verdict, EgressVerdict::Refused, "{entry:?}");
    assert_eq!(entry.host, host, "{entry:?}");
    assert!(
        entry.reason.as_deref().unwrap_or_default().contains(why),
        "{entry:?}"
    );
    assert_eq!(entry.bytes_out, 0, "{entry:?}");
}
