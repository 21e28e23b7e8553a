//! Fetch proxy tests against local HTTP servers on 127.0.0.1, which the tests allow
//! through `allow_private` and a skill network pattern `http://127.0.0.1:PORT`.

use std::collections::BTreeMap;
use std::convert::Infallible;

use http_body_util::BodyExt;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

mod limits;
mod permissions;
mod secrets;

/// A server on 127.0.0.1, stopped when dropped.
struct TestServer {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// A hyper server with the routes of [`route`].
async fn server() -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(route))
                    .await;
            });
        }
    });
    TestServer { port, task }
}

/// A server that answers every connection with the same raw bytes.
async fn raw_server(answer: Vec<u8>) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let _ = stream.write_all(&answer).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    TestServer { port, task }
}

fn text(body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    Response::new(Full::new(body.into()))
}

fn redirect(status: u16, location: &str) -> Response<Full<Bytes>> {
    let mut r = text("");
    *r.status_mut() = StatusCode::from_u16(status).unwrap();
    r.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_str(location).unwrap());
    r
}

/// `/hello`, `/echo` (method, headers and body as JSON), `/redirect?status=N&to=URL`,
/// `/loop`, `/big` (4096 bytes), `/binary`, `/slow` (answers after 10 s).
async fn route(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let response = match path.as_str() {
        "/hello" => {
            let mut r = text("hello");
            r.headers_mut()
                .insert("x-test", HeaderValue::from_static("yes"));
            r
        }
        "/echo" => {
            let method = req.method().to_string();
            let headers: BTreeMap<String, String> = req
                .headers()
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("?").to_string()))
                .collect();
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let body = String::from_utf8_lossy(&body).into_owned();
            text(json!({"method": method, "headers": headers, "body": body}).to_string())
        }
        "/redirect" => {
            let (status, to) = query.split_once("&to=").unwrap();
            let status = status.trim_start_matches("status=").parse().unwrap();
            redirect(status, to)
        }
        "/loop" => redirect(302, "/loop"),
        "/big" => text(vec![b'x'; 4096]),
        "/binary" => text(vec![b'a', 0xff, b'b']),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(10)).await;
            text("late")
        }
        _ => {
            let mut r = text("not found");
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    };
    Ok(response)
}

fn proxy(allowed: &[&TestServer]) -> FetchProxy {
    proxy_with(allowed, FetchConfig::default())
}

fn proxy_with(allowed: &[&TestServer], config: FetchConfig) -> FetchProxy {
    FetchProxy::new(FetchConfig {
        allow_private: allowed
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect(),
        ..config
    })
}

fn network(servers: &[&TestServer]) -> Vec<String> {
    servers
        .iter()
        .map(|s| format!("http://127.0.0.1:{}", s.port))
        .collect()
}

fn get(url: &str) -> FetchParams {
    request("GET", url, None)
}

fn request(method: &str, url: &str, body: Option<&str>) -> FetchParams {
    FetchParams {
        url: url.to_string(),
        method: method.to_string(),
        headers: BTreeMap::new(),
        body: body.map(str::to_string),
    }
}

fn denied(result: Result<FetchResult, ProxyError>) -> String {
    match result {
        Err(ProxyError::PermissionDenied { reason, .. }) => reason,
        other => panic!("expected a permission refusal, got {other:?}"),
    }
}

fn invalid(result: Result<FetchResult, ProxyError>) -> String {
    match result {
        Err(ProxyError::InvalidParams { reason, .. }) => reason,
        other => panic!("expected an invalid-params refusal, got {other:?}"),
    }
}

fn echoed(result: FetchResult) -> Value {
    serde_json::from_str(&result.body).unwrap()
}

#[tokio::test]
async fn fetch_get_returns_status_headers_and_body() {
    let s = server().await;
    let r = proxy(&[&s])
        .fetch(&network(&[&s]), get(&s.url("/hello")))
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, "hello");
    assert_eq!(r.headers.get("x-test").map(String::as_str), Some("yes"));
    let missing = proxy(&[&s])
        .fetch(&network(&[&s]), get(&s.url("/nope")))
        .await
        .unwrap();
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn fetch_post_forwards_body_and_drops_host_and_hop_by_hop_headers() {
    let s = server().await;
    let mut req = request("post", &s.url("/echo"), Some("ping"));
    for (k, v) in [
        ("Host", "evil.example"),
        ("Connection", "close, X-Hop"),
        ("X-Hop", "1"),
        ("Transfer-Encoding", "chunked"),
        ("Proxy-Authorization", "Basic x"),
        ("X-Custom", "1"),
        ("Content-Type", "text/plain"),
    ] {
        req.headers.insert(k.into(), v.into());
    }
    let r = proxy(&[&s]).fetch(&network(&[&s]), req).await.unwrap();
    let e = echoed(r);
    assert_eq!(e["method"], "POST");
    assert_eq!(e["body"], "ping");
    assert_eq!(e["headers"]["host"], format!("127.0.0.1:{}", s.port));
    assert_eq!(e["headers"]["x-custom"], "1");
    assert_eq!(e["headers"]["content-type"], "text/plain");
    assert_eq!(e["headers"]["content-length"], "4");
    // Hop-by-hop headers, and those the Connection header names, are not forwarded.
    for dropped in ["transfer-encoding", "proxy-authorization", "x-hop"] {
        assert!(
            e["headers"].get(dropped).is_none(),
            "{dropped} was forwarded"
        );
    }
    assert_ne!(e["headers"]["connection"], "close, X-Hop");
}

#[tokio::test]
async fn fetch_head_returns_empty_body() {
    let s = server().await;
    let r = proxy(&[&s])
        .fetch(&network(&[&s]), request("HEAD", &s.url("/big"), None))
        .await
        .unwrap();
    assert_eq!((r.status, r.body.as_str()), (200, ""));
}

#[tokio::test]
async fn fetch_returns_binary_body_as_lossy_text() {
    let s = server().await;
    let r = proxy(&[&s])
        .fetch(&network(&[&s]), get(&s.url("/binary")))
        .await
        .unwrap();
    assert_eq!(r.body, "a\u{fffd}b");
}

#[tokio::test]
async fn fetch_refuses_file_and_ftp_schemes() {
    let p = proxy(&[]);
    let net = vec!["http://127.0.0.1".to_string()];
    for url in ["file:///etc/passwd", "ftp://127.0.0.1/a", "127.0.0.1/a"] {
        let reason = invalid(p.fetch(&net, get(url)).await);
        assert!(
            reason.contains("only http:// and https://") || reason.contains("not an absolute"),
            "{url}: {reason}"
        );
    }
}

#[tokio::test]
async fn fetch_refuses_url_with_userinfo() {
    let s = server().await;
    let url = format!("http://user:pw@127.0.0.1:{}/hello", s.port);
    let reason = invalid(proxy(&[&s]).fetch(&network(&[&s]), get(&url)).await);
    assert!(reason.contains("user info"), "{reason}");
}

#[tokio::test]
async fn fetch_refuses_method_not_allowed() {
    let s = server().await;
    for method in ["CONNECT", "TRACE", "OPTIONS", "PROPFIND"] {
        let reason = invalid(
            proxy(&[&s])
                .fetch(&network(&[&s]), request(method, &s.url("/echo"), None))
                .await,
        );
        assert!(
            reason.contains("is not allowed; use GET"),
            "{method}: {reason}"
        );
    }
}

#[tokio::test]
async fn fetch_refuses_invalid_header() {
    let s = server().await;
    let mut req = get(&s.url("/echo"));
    req.headers
        .insert("X-Bad".into(), "a\r\nInjected: 1".into());
    let reason = invalid(proxy(&[&s]).fetch(&network(&[&s]), req).await);
    assert!(reason.contains("x-bad"), "{reason}");
    let mut req = get(&s.url("/echo"));
    req.headers.insert("bad name".into(), "v".into());
    let reason = invalid(proxy(&[&s]).fetch(&network(&[&s]), req).await);
    assert!(reason.contains("not a valid header name"), "{reason}");
}

#[tokio::test]
async fn fetch_https_verifies_tls_with_the_original_host() {
    // A plain-HTTP server cannot complete a TLS handshake: the https path fails upstream
    // instead of silently downgrading.
    let s = server().await;
    let url = format!("https://127.0.0.1:{}/hello", s.port);
    let err = proxy(&[&s])
        .fetch(&[format!("https://127.0.0.1:{}", s.port)], get(&url))
        .await
        .unwrap_err();
    match err {
        ProxyError::Upstream { reason, .. } => {
            assert!(reason.contains("cannot connect"), "{reason}")
        }
        other => panic!("expected Upstream, got {other:?}"),
    }
}

#[tokio::test]
async fn fetch_reports_unreachable_server_upstream() {
    let s = server().await;
    let port = s.port;
    drop(s);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let p = FetchProxy::new(FetchConfig {
        allow_private: vec![format!("127.0.0.1:{port}")],
        ..FetchConfig::default()
    });
    let err = p
        .fetch(
            &[format!("http://127.0.0.1:{port}")],
            get(&format!("http://127.0.0.1:{port}/")),
        )
        .await
        .unwrap_err();
    match err {
        ProxyError::Upstream { reason, .. } => {
            assert!(reason.contains("cannot connect"), "{reason}")
        }
        other => panic!("expected Upstream, got {other:?}"),
    }
}
