//! The egress proxy behind the real channel: `POST /egress` upgraded over mutual TLS (the
//! core's callback server and the executor's [`StreamClient`], the test PKI of
//! `state::pki`).

use serde_json::Value;
use skillbox_channel::client::{ClientError, StreamClient, WARM_STREAMS};
use skillbox_channel::server::{self, ReloadingServerConfig, RpcFuture, RpcHandler, ServerOptions};
use skillbox_channel::{TlsFiles, CORE_IDENTITY, EXECUTOR_IDENTITY};
use skillbox_protocol::jsonrpc::ErrorObject;

use super::*;
use crate::state::pki;

/// Answers no method (the streams are what is tested), counting the requests it got.
struct NoMethods(Arc<std::sync::atomic::AtomicUsize>);

impl RpcHandler for NoMethods {
    fn handle<'a>(&'a self, method: &'a str, _: Option<Value>) -> RpcFuture<'a> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move { Err(ErrorObject::new(-32601, format!("no {method}"))) })
    }
}

/// A callback server (with `streams`) and an executor's stream client of it.
struct Channel {
    _pki: tempfile::TempDir,
    url: String,
    client: StreamClient,
    /// JSON-RPC requests the server's handler got.
    rpc_calls: Arc<std::sync::atomic::AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn channel(streams: Option<Arc<dyn StreamHandler>>) -> Channel {
    let state = tempfile::tempdir().unwrap();
    pki::ensure(state.path()).unwrap();
    let tls = Arc::new(ReloadingServerConfig::new(pki::core_files(state.path())).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let rpc_calls = Arc::default();
    let task = tokio::spawn(server::serve_with_streams(
        listener,
        tls,
        ServerOptions {
            expected_peer: EXECUTOR_IDENTITY.to_string(),
            max_body_bytes: 1024,
        },
        Arc::new(NoMethods(Arc::clone(&rpc_calls))),
        streams,
    ));
    let files = TlsFiles::in_dir(&pki::pki_dir(state.path()), EXECUTOR_IDENTITY);
    let client = StreamClient::new(&url, CORE_IDENTITY, &files).unwrap();
    let url = url.clone();
    Channel {
        _pki: state,
        url,
        client,
        rpc_calls,
        task,
    }
}

#[tokio::test]
async fn connect_through_the_channel_reaches_a_declared_tls_server() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let rig = Rig::new(
        &[format!("api.test:{port}")],
        pinned(),
        &[format!("api.test:{port}")],
    );
    let channel = channel(Some(Arc::clone(&rig.proxy) as Arc<dyn StreamHandler>)).await;
    let mut stream = channel.client.open_egress(CALL, TOKEN).await.unwrap();
    let answer = ask(
        &mut stream,
        &format!("CONNECT api.test:{port} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert_eq!(answer, "HTTP/1.1 200 Connection established\r\n\r\n");
    let tls = tls_client(stream, &cert, Some("api.test")).await.unwrap();
    let (status, body) = get(tls, &format!("api.test:{port}"), "/hello").await;
    assert_eq!((status, body.as_str()), (200, "hello"));
    // The record is written when the proxy's side ends.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while rig.entries().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let entries = rig.entries();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].verdict, EgressVerdict::Allowed);
    assert!(entries[0].bytes_in > 0 && entries[0].bytes_out > 0);
}

#[tokio::test]
async fn a_stream_with_another_calls_token_is_refused_on_the_stream() {
    let rig = Rig::new(&["api.test".into()], pinned(), &[]);
    let channel = channel(Some(Arc::clone(&rig.proxy) as Arc<dyn StreamHandler>)).await;
    let mut stream = channel.client.open_egress(CALL, "stolen").await.unwrap();
    let answer = ask_all(&mut stream, "CONNECT api.test:443 HTTP/1.1\r\n\r\n").await;
    assert_refused(
        &answer,
        "403",
        "the capability token does not belong to call",
    );
}

#[tokio::test]
async fn a_channel_without_a_stream_handler_refuses_egress_404() {
    let channel = channel(None).await;
    let err = channel.client.open_egress(CALL, TOKEN).await.unwrap_err();
    assert!(
        matches!(&err, ClientError::Refused { status: 404, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn a_peer_without_the_executor_identity_gets_no_stream() {
    let rig = Rig::new(&["api.test".into()], pinned(), &[]);
    let channel = channel(Some(Arc::clone(&rig.proxy) as Arc<dyn StreamHandler>)).await;
    // The core's own certificate is from the same CA but is not the executor.
    let state = channel._pki.path();
    let wrong = StreamClient::new(&channel.url, CORE_IDENTITY, &pki::core_files(state)).unwrap();
    let err = wrong.open_egress(CALL, TOKEN).await.unwrap_err();
    assert!(
        matches!(
            &err,
            ClientError::Unreachable { .. } | ClientError::Connect { .. }
        ),
        "{err}"
    );
}

/// Opens an egress stream with a token of no call and checks the proxy's refusal comes
/// back on it: the stream reached the proxy, whichever connection it went on.
async fn open_and_check_refused(client: &StreamClient) {
    let mut stream = client.open_egress(CALL, "stolen").await.unwrap();
    let answer = ask_all(&mut stream, "CONNECT api.test:443 HTTP/1.1\r\n\r\n").await;
    assert_refused(
        &answer,
        "403",
        "the capability token does not belong to call",
    );
}

/// Waits until `client` has `n` connections made ahead.
async fn until_warm(client: &StreamClient, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while client.warm_ready() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {n} connections made ahead after 10 s",
            client.warm_ready()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn later_streams_go_on_connections_made_ahead() {
    let rig = Rig::new(&["api.test".into()], pinned(), &[]);
    let channel = channel(Some(Arc::clone(&rig.proxy) as Arc<dyn StreamHandler>)).await;
    assert_eq!(
        channel.client.warm_ready(),
        0,
        "nothing is made before a stream"
    );
    open_and_check_refused(&channel.client).await;
    until_warm(&channel.client, WARM_STREAMS).await;
    for _ in 0..3 {
        open_and_check_refused(&channel.client).await;
        until_warm(&channel.client, WARM_STREAMS).await;
    }
}

/// A program's bytes behind a refused call, on a stream upgraded ahead of its call (the
/// call named in its first bytes), are the proxy's to refuse: a JSON-RPC request written
/// there never reaches the channel's handler as the executor's own request would.
#[tokio::test]
async fn a_channel_request_behind_a_refused_call_on_a_stream_made_ahead_is_never_served() {
    let rig = Rig::new(&["api.test".into()], pinned(), &[]);
    let channel = channel(Some(Arc::clone(&rig.proxy) as Arc<dyn StreamHandler>)).await;
    open_and_check_refused(&channel.client).await;
    until_warm(&channel.client, WARM_STREAMS).await;
    let mut stream = channel.client.open_egress(CALL, "stolen").await.unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"core.fetch","params":{}}"#;
    let request = format!(
        "POST /rpc HTTP/1.1\r\nHost: skillbox-core\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let answer = ask_all(&mut stream, &request).await;
    assert!(answer.starts_with("HTTP/1.1 4"), "{answer}");
    assert!(!refused_header(&answer).is_empty(), "{answer}");
    assert!(!answer.contains("jsonrpc"), "{answer}");
    let served = channel.rpc_calls.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(served, 0, "the channel served a request a program wrote");
}

/// A TCP forwarder to `to`; sending on the returned channel cuts every connection it
/// carries (new ones are still forwarded).
async fn cuttable_forwarder(to: std::net::SocketAddr) -> (String, tokio::sync::watch::Sender<u32>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    let (cut, cuts) = tokio::sync::watch::channel(0u32);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let mut cuts = cuts.clone();
            cuts.mark_unchanged();
            tokio::spawn(async move {
                let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await else {
                    return;
                };
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    _ = cuts.changed() => {}
                }
            });
        }
    });
    (format!("https://{at}"), cut)
}

#[tokio::test]
async fn a_connection_made_ahead_and_closed_since_is_replaced_by_a_fresh_one() {
    let rig = Rig::new(&["api.test".into()], pinned(), &[]);
    let channel = channel(Some(Arc::clone(&rig.proxy) as Arc<dyn StreamHandler>)).await;
    let server: std::net::SocketAddr = channel.url.trim_start_matches("https://").parse().unwrap();
    let (url, cut) = cuttable_forwarder(server).await;
    let files = TlsFiles::in_dir(&pki::pki_dir(channel._pki.path()), EXECUTOR_IDENTITY);
    let client = StreamClient::new(&url, CORE_IDENTITY, &files).unwrap();
    open_and_check_refused(&client).await;
    until_warm(&client, WARM_STREAMS).await;
    // Every connection made ahead is closed under the client (as a restarted core would).
    cut.send(1).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    for _ in 0..=WARM_STREAMS {
        open_and_check_refused(&client).await;
    }
}
