//! Domain fronting: a request whose `Host` (or absolute-form authority) names another host
//! than the one the proxy checked is refused in every mode where the proxy reads requests
//! — plain forwarding, a plain connection of a skill with bound secrets, and the TLS
//! connection the proxy terminates for such a skill — and nothing reaches the server.

use super::secrets::{connect_api, secret_rig, VALUE};
use super::*;

#[tokio::test]
async fn host_header_fronting_refused() {
    let server = web_server().await;
    let port = server.port;
    let rig = Rig::new(
        &[format!("http://web.test:{port}")],
        pinned(),
        &[format!("web.test:{port}")],
    );
    for (host, status) in [
        (format!("b.test:{port}"), "403"),
        ("web.test".to_string(), "403"),
        (format!("web.test:{port}\r\nHost: b.test"), "400"),
    ] {
        let (mut program, task) = rig.open();
        let answer = ask_all(
            &mut program,
            &format!("GET http://web.test:{port}/echo HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        )
        .await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{answer}"
        );
        assert!(refused_header(&answer).contains("Host"), "{answer}");
        task.await.unwrap();
    }
    for entry in rig.entries() {
        assert_refused_entry(&entry, "web.test", "Host");
    }
    // The host's own name passes, with or without its port's default elided correctly.
    let (mut program, task) = rig.open();
    let answer = ask_all(
        &mut program,
        &format!("GET http://web.test:{port}/hello HTTP/1.1\r\nHost: WEB.test:{port}\r\n\r\n"),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    task.await.unwrap();
}

#[tokio::test]
async fn connect_host_header_fronting_refused() {
    let rig = Rig::new(&["api.test:8443".to_string()], pinned(), &[]);
    let (mut program, task) = rig.open();
    let answer = ask_all(
        &mut program,
        "CONNECT api.test:8443 HTTP/1.1\r\nHost: c.test:8443\r\n\r\n",
    )
    .await;
    assert_refused(&answer, "403", "domain fronting");
    let entry = only_entry(&rig, task).await;
    assert_refused_entry(&entry, "api.test", "domain fronting");
}

#[tokio::test]
async fn host_header_fronting_refused_on_a_read_plain_connection() {
    let cert = api_cert();
    let web = web_server().await;
    let w = web.port;
    let (rig, _) = secret_rig(8443, w, &cert, pinned());
    let (mut program, task) = rig.open();
    let answer = ask_all(
        &mut program,
        &format!(
            "GET http://web.test:{w}/hello HTTP/1.1\r\nHost: web.test:{w}\r\n\r\n\
             GET http://web.test:{w}/echo HTTP/1.1\r\nHost: b.test:{w}\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("domain fronting"), "{answer}");
    assert!(
        !answer.contains("host: b.test"),
        "the server saw it: {answer}"
    );
    task.await.unwrap();
}

const CLOSE: &str = "Connection: close\r\n\r\n";

#[tokio::test]
async fn host_header_fronting_refused_inside_a_terminated_tls_connection() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let (rig, placeholder) = secret_rig(port, 9, &cert, pinned());
    for head in [
        format!("GET /echo HTTP/1.1\r\nHost: c.test:{port}\r\nX-Key: {placeholder}\r\n{CLOSE}"),
        format!("GET https://c.test:{port}/echo HTTP/1.1\r\nHost: api.test:{port}\r\n{CLOSE}"),
        format!("GET /echo HTTP/1.1\r\nHost: api.test\r\n{CLOSE}"),
    ] {
        let (mut tls, task) = connect_api(&rig, port).await;
        let answer = ask_all(&mut tls, &head).await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{head}: {answer}");
        assert!(answer.contains("domain fronting"), "{head}: {answer}");
        assert!(!answer.contains(VALUE), "{answer}");
        drop(tls);
        task.abort();
    }
    // The CONNECT host's own name goes through.
    let (mut tls, task) = connect_api(&rig, port).await;
    let answer = ask_all(
        &mut tls,
        &format!("GET /hello HTTP/1.1\r\nHost: api.test:{port}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    task.abort();
}
