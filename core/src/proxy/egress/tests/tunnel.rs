//! `CONNECT`: a declared host's TLS reaches it; undeclared hosts, IP literals, private
//! addresses, domain fronting and non-TLS tunnels are refused with their reason.

use super::*;

/// A rig for a skill declaring `api.test:PORT`, allowed on loopback.
fn api_rig(port: u16) -> Rig {
    Rig::new(
        &[format!("api.test:{port}")],
        pinned(),
        &[format!("api.test:{port}")],
    )
}

#[tokio::test]
async fn connect_to_a_declared_host_carries_tls_to_the_server() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let rig = api_rig(server.port);
    let (mut program, task) = rig.open();
    let port = server.port;
    let answer = ask(
        &mut program,
        &format!("CONNECT api.test:{port} HTTP/1.1\r\nHost: api.test:{port}\r\n\r\n"),
    )
    .await;
    assert_eq!(answer, "HTTP/1.1 200 Connection established\r\n\r\n");
    let tls = tls_client(program, &cert, Some("api.test")).await.unwrap();
    let (status, body) = get(tls, &format!("api.test:{port}"), "/hello").await;
    assert_eq!((status, body.as_str()), (200, "hello"));
    let entry = only_entry(&rig, task).await;
    assert_eq!(entry.verdict, EgressVerdict::Allowed, "{entry:?}");
    assert_eq!((entry.host.as_str(), entry.port), ("api.test", port));
    assert_eq!(entry.reason, None);
    // A ClientHello and a request went out, a certificate and an answer came back.
    assert!(entry.bytes_out > 200, "{entry:?}");
    assert!(entry.bytes_in > entry.bytes_out, "{entry:?}");
}

#[tokio::test]
async fn connect_refuses_a_host_the_skill_did_not_declare() {
    let rig = api_rig(8443);
    let (mut program, task) = rig.open();
    let answer = ask_all(&mut program, "CONNECT evil.test:443 HTTP/1.1\r\n\r\n").await;
    assert_refused(
        &answer,
        "403",
        "https://evil.test is not in the skill's permissions.network",
    );
    let entry = only_entry(&rig, task).await;
    assert_refused_entry(
        &entry,
        "evil.test",
        "not in the skill's permissions.network",
    );
    assert_eq!(entry.port, 443);
}

#[tokio::test]
async fn connect_refuses_an_ip_literal_even_when_declared() {
    let rig = Rig::new(
        &["127.0.0.1:8443".into()],
        pinned(),
        &["127.0.0.1:8443".into()],
    );
    let (mut program, task) = rig.open();
    let answer = ask_all(&mut program, "CONNECT 127.0.0.1:8443 HTTP/1.1\r\n\r\n").await;
    assert_refused(&answer, "403", "127.0.0.1 is an IP address");
    let entry = only_entry(&rig, task).await;
    assert_refused_entry(&entry, "127.0.0.1", "is an IP address");
}

#[tokio::test]
async fn connect_refuses_a_declared_name_that_resolves_to_a_private_address() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    // Declared and pinned to loopback, but not in allow_private.
    let rig = Rig::new(&[format!("api.test:{port}")], pinned(), &[]);
    let (mut program, task) = rig.open();
    let answer = ask_all(
        &mut program,
        &format!("CONNECT api.test:{port} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert_refused(
        &answer,
        "403",
        "api.test resolves to 127.0.0.1, which is loopback",
    );
    assert!(
        answer.contains(&format!("\"127.0.0.1:{port}\" to [fetch] allow_private")),
        "{answer}"
    );
    let entry = only_entry(&rig, task).await;
    assert_refused_entry(&entry, "api.test", "loopback");
}

#[tokio::test]
async fn connect_refuses_sni_that_differs_from_the_connect_host() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let rig = api_rig(port);
    let (mut program, task) = rig.open();
    let answer = ask(
        &mut program,
        &format!("CONNECT api.test:{port} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // Domain fronting: the tunnel of a declared host, TLS for another name.
    let tls = tls_client(program, &cert, Some("evil.test")).await;
    assert!(tls.is_err(), "the handshake must not complete");
    let entry = only_entry(&rig, task).await;
    assert_refused_entry(
        &entry,
        "api.test",
        "the TLS server name \"evil.test\" differs from the CONNECT host \"api.test\" (domain fronting)",
    );
}

#[tokio::test]
async fn connect_refuses_a_client_hello_without_server_name() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let rig = api_rig(port);
    let (mut program, task) = rig.open();
    let answer = ask(
        &mut program,
        &format!("CONNECT api.test:{port} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(tls_client(program, &cert, None).await.is_err());
    let entry = only_entry(&rig, task).await;
    assert_refused_entry(&entry, "api.test", "carries no server name (SNI)");
}

#[tokio::test]
async fn connect_refuses_plain_bytes_in_the_tunnel() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let rig = api_rig(port);
    let (mut program, task) = rig.open();
    let answer = ask(
        &mut program,
        &format!("CONNECT api.test:{port} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let rest = ask_all(
        &mut program,
        "GET /hello HTTP/1.1\r\nHost: api.test\r\n\r\n",
    )
    .await;
    assert_eq!(rest, "", "nothing comes back through a refused tunnel");
    let entry = only_entry(&rig, task).await;
    assert_refused_entry(&entry, "api.test", "not a TLS ClientHello");
}
