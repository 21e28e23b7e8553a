//! The fetch proxy's caps: request and response bodies (declared or streamed) and the
//! deadline of the whole fetch.

use super::*;

#[tokio::test]
async fn fetch_refuses_oversize_response() {
    let s = server().await;
    let config = FetchConfig {
        max_response_bytes: 1024,
        ..FetchConfig::default()
    };
    let err = proxy_with(&[&s], config)
        .fetch(&network(&[&s]), get(&s.url("/big")))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ProxyError::TooLarge {
                what: "response body",
                limit: 1024,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn fetch_refuses_oversize_chunked_response_while_streaming() {
    let mut answer = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..8 {
        answer.extend_from_slice(b"200\r\n");
        answer.extend_from_slice(&[b'y'; 0x200]);
        answer.extend_from_slice(b"\r\n");
    }
    answer.extend_from_slice(b"0\r\n\r\n");
    let s = raw_server(answer).await;
    let small = FetchConfig {
        max_response_bytes: 1024,
        ..FetchConfig::default()
    };
    let err = proxy_with(&[&s], small)
        .fetch(&network(&[&s]), get(&s.url("/")))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ProxyError::TooLarge {
                what: "response body",
                ..
            }
        ),
        "{err:?}"
    );
    // Under the cap the same answer is returned whole.
    let r = proxy(&[&s])
        .fetch(&network(&[&s]), get(&s.url("/")))
        .await
        .unwrap();
    assert_eq!(r.body.len(), 8 * 0x200);
}

#[tokio::test]
async fn fetch_refuses_oversize_request_body() {
    let s = server().await;
    let config = FetchConfig {
        max_request_bytes: 8,
        ..FetchConfig::default()
    };
    let err = proxy_with(&[&s], config)
        .fetch(
            &network(&[&s]),
            request("POST", &s.url("/echo"), Some("123456789")),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ProxyError::TooLarge {
                what: "request body",
                limit: 8,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn fetch_times_out_on_slow_server() {
    let s = server().await;
    let config = FetchConfig {
        timeout_ms: 300,
        ..FetchConfig::default()
    };
    let started = std::time::Instant::now();
    let err = proxy_with(&[&s], config)
        .fetch(&network(&[&s]), get(&s.url("/slow?key=secret")))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ProxyError::Timeout {
                timeout_ms: 300,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // The query (which may carry an API key) is not in the message.
    assert!(!err.to_string().contains("secret"), "{err}");
}
