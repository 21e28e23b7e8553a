//! Plain HTTP in absolute form reaches a declared host in origin form; requests the proxy
//! does not serve are `400` with their reason.

use super::*;

/// A rig for a skill declaring `http://web.test:PORT`, allowed on loopback.
fn web_rig(port: u16, config: EgressConfig) -> Rig {
    Rig::new(
        &[format!("http://web.test:{port}")],
        config,
        &[format!("web.test:{port}")],
    )
}

#[tokio::test]
async fn absolute_form_get_reaches_a_declared_host_in_origin_form() {
    let server = web_server().await;
    let port = server.port;
    let rig = web_rig(port, pinned());
    let (mut program, task) = rig.open();
    let answer = ask_all(
        &mut program,
        &format!(
            "GET http://web.test:{port}/echo?q=1 HTTP/1.1\r\nHost: web.test:{port}\r\n\
             Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\
             X-Kept: yes\r\n\r\n"
        ),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    let body = answer.split("\r\n\r\n").nth(1).unwrap();
    assert!(body.starts_with("GET /echo?q=1\n"), "{body}");
    assert!(body.contains(&format!("host: web.test:{port}\n")), "{body}");
    assert!(body.contains("connection: close\n"), "{body}");
    assert!(body.contains("x-kept: yes\n"), "{body}");
    assert!(!body.contains("proxy-"), "{body}");
    let entry = only_entry(&rig, task).await;
    assert_eq!(entry.verdict, EgressVerdict::Allowed, "{entry:?}");
    assert_eq!(
        (entry.host.as_str(), entry.port, entry.reason.as_deref()),
        ("web.test", port, None)
    );
    assert!(entry.bytes_out > 30, "{entry:?}");
    assert_eq!(entry.bytes_in, answer.len() as u64, "{entry:?}");
}

#[tokio::test]
async fn absolute_form_post_carries_its_body() {
    let server = web_server().await;
    let port = server.port;
    let rig = web_rig(port, pinned());
    let (mut program, task) = rig.open();
    let answer = ask_all(
        &mut program,
        &format!(
            "POST http://web.test:{port}/echo HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world"
        ),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(answer.contains("content-length: 11\n"), "{answer}");
    assert!(answer.ends_with("\nhello world"), "{answer}");
    assert_eq!(only_entry(&rig, task).await.verdict, EgressVerdict::Allowed);
}

#[tokio::test]
async fn http_to_a_host_declared_for_https_only_is_refused() {
    let rig = Rig::new(&["web.test".into()], pinned(), &["web.test:80".into()]);
    let (mut program, task) = rig.open();
    let answer = ask_all(&mut program, "GET http://web.test/ HTTP/1.1\r\n\r\n").await;
    assert_refused(
        &answer,
        "403",
        "http://web.test is not in the skill's permissions.network",
    );
    let entry = only_entry(&rig, task).await;
    assert_refused_entry(&entry, "web.test", "not in the skill's permissions.network");
    assert_eq!(entry.port, 80);
}

#[tokio::test]
async fn requests_the_proxy_does_not_serve_are_400_with_the_reason() {
    let rig = web_rig(80, pinned());
    for (head, why) in [
        (
            "GET /hello HTTP/1.1\r\nHost: web.test\r\n\r\n",
            "send absolute-form requests",
        ),
        (
            "GET https://web.test/ HTTP/1.1\r\n\r\n",
            "use CONNECT host:443",
        ),
        (
            "GET ftp://web.test/ HTTP/1.1\r\n\r\n",
            "only http:// and https://",
        ),
        ("\x16\x03\x01\x00\x05hello", "not an HTTP/1 request"),
    ] {
        let (mut program, task) = rig.open();
        let answer = ask_all(&mut program, head).await;
        assert_refused(&answer, "400", why);
        task.await.unwrap();
    }
    let entries = rig.entries();
    assert_eq!(entries.len(), 4, "{entries:?}");
    assert!(entries.iter().all(|e| e.verdict == EgressVerdict::Refused));
}
