//! A bound secret never comes back inside a coded answer: a server echoing the request
//! (`Authorization: Bearer <value>`) with `Content-Encoding` or a `Transfer-Encoding`
//! coding, stacked or not, gets to the program decoded and masked, or not at all — through
//! the TLS connection the proxy terminates and on plain HTTP alike.

use std::io::Write;

use skillbox_protocol::skill::SecretBinding;

use super::secrets::{connect_api, secret_rig, VALUE};
use super::*;
use crate::proxy::secrets::CallSecrets;
use crate::random::SystemSource;

/// `/coded?ce=a,b&te=c&neg=1&pad=N`: the echo of the request (then `N` bytes of `a`),
/// coded with `ce` as `Content-Encoding` and `te` as `Transfer-Encoding` codings (before
/// `chunked`), in order. `gzip`/`x-gzip` and `deflate` really code; any other coding is
/// only a label on the plain bytes. With `neg=1` the codings apply only when the request's
/// `Accept-Encoding` names `gzip` (a server that negotiates).
pub(super) async fn coded_echo(req: Request<Incoming>) -> Response<Full<Bytes>> {
    let query = req.uri().query().unwrap_or_default().to_string();
    let param = |key: &str| {
        (query.split('&'))
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
            .unwrap_or_default()
            .to_string()
    };
    let list = |key: &str| -> Vec<String> {
        let value = param(key);
        value
            .split(',')
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect()
    };
    let accepts_gzip = (req.headers().get_all("accept-encoding").iter())
        .any(|v| v.to_str().unwrap_or_default().contains("gzip"));
    let (mut ce, mut te) = (list("ce"), list("te"));
    if param("neg") == "1" && !accepts_gzip {
        (ce, te) = (Vec::new(), Vec::new());
    }
    let pad: usize = param("pad").parse().unwrap_or(0);
    let mut text = format!("{} {}\n", req.method(), req.uri());
    for (k, v) in req.headers() {
        text.push_str(&format!("{k}: {}\n", v.to_str().unwrap_or("?")));
    }
    text.push_str(&"a".repeat(pad));
    let mut body = text.into_bytes();
    for coding in ce.iter().chain(&te) {
        body = code(coding, &body);
    }
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    if !ce.is_empty() {
        let value = ce.join(", ").parse().unwrap();
        resp.headers_mut().insert("content-encoding", value);
    }
    if !te.is_empty() {
        let value = format!("{}, chunked", te.join(", ")).parse().unwrap();
        resp.headers_mut().insert("transfer-encoding", value);
    }
    resp
}

fn code(coding: &str, bytes: &[u8]) -> Vec<u8> {
    match coding {
        "gzip" | "x-gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(bytes).unwrap();
            e.finish().unwrap()
        }
        "deflate" => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(bytes).unwrap();
            e.finish().unwrap()
        }
        _ => bytes.to_vec(),
    }
}

/// What the program got: status, its headers, the body as sent (never decoded here).
struct Got {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
}

impl Got {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn refused(&self) -> String {
        (self.headers.get("x-skillbox-refused"))
            .map(|v| v.to_str().unwrap_or_default().to_string())
            .unwrap_or_default()
    }
}

/// Sends `GET path` asking for compressed answers with the placeholder as a bearer token.
async fn ask_coded<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    io: S,
    host: &str,
    path: &str,
    placeholder: &str,
) -> Got {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::get(path)
        .header("host", host)
        .header("authorization", format!("Bearer {placeholder}"))
        .header("accept-encoding", "gzip, deflate, br, zstd")
        .header("te", "gzip, trailers")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    Got {
        status,
        headers,
        body,
    }
}

/// Asserts the answer is the masked echo, plain: no coding, no value, the mask in place.
fn assert_masked_plain(got: &Got, what: &str) {
    let text = got.text();
    assert_eq!(got.status, 200, "{what}: {text}");
    assert!(
        got.headers.get("content-encoding").is_none(),
        "{what}: {:?}",
        got.headers
    );
    let te = got.headers.get("transfer-encoding");
    assert!(
        te.is_none_or(|v| v == "chunked"),
        "{what}: {:?}",
        got.headers
    );
    assert!(!text.contains(VALUE), "{what}: the value came back: {text}");
    let masked = format!("authorization: Bearer {}", "*".repeat(VALUE.len()));
    assert!(text.contains(&masked), "{what}: {text}");
    // The server was asked for identity, whatever the program asked.
    assert!(
        text.contains("accept-encoding: identity\n"),
        "{what}: {text}"
    );
}

#[tokio::test]
async fn secret_in_gzip_echo_is_masked() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let host = format!("api.test:{port}");
    for ce in ["gzip", "x-gzip", "deflate", "gzip,gzip", "deflate,gzip", ""] {
        for te in ["", "gzip", "deflate"] {
            if ce.is_empty() && te.is_empty() {
                continue;
            }
            let what = format!("ce={ce} te={te}");
            let (rig, placeholder) = secret_rig(port, 9, &cert, pinned());
            let (tls, task) = connect_api(&rig, port).await;
            let path = format!("/coded?ce={ce}&te={te}");
            let got = ask_coded(tls, &host, &path, &placeholder).await;
            assert_masked_plain(&got, &what);
            let entry = only_entry(&rig, task).await;
            assert_eq!(entry.verdict, EgressVerdict::Allowed, "{what}: {entry:?}");
        }
    }
}

#[tokio::test]
async fn secret_in_negotiated_gzip_echo_comes_back_plain_and_masked() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let (rig, placeholder) = secret_rig(port, 9, &cert, pinned());
    let (tls, task) = connect_api(&rig, port).await;
    let host = format!("api.test:{port}");
    let got = ask_coded(tls, &host, "/coded?ce=gzip&neg=1", &placeholder).await;
    assert_masked_plain(&got, "negotiated");
    drop(only_entry(&rig, task).await);
}

#[tokio::test]
async fn secret_in_br_or_zstd_echo_is_withheld() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let host = format!("api.test:{port}");
    for (ce, te) in [
        ("br", ""),
        ("zstd", ""),
        ("gzip,br", ""),
        ("compress", ""),
        ("", "br"),
        ("gzip", "zstd"),
    ] {
        let what = format!("ce={ce} te={te}");
        let (rig, placeholder) = secret_rig(port, 9, &cert, pinned());
        let (tls, task) = connect_api(&rig, port).await;
        let path = format!("/coded?ce={ce}&te={te}");
        let got = ask_coded(tls, &host, &path, &placeholder).await;
        assert_eq!(got.status, 502, "{what}: {}", got.text());
        assert!(
            got.refused().contains("withheld"),
            "{what}: {}",
            got.refused()
        );
        assert!(!got.text().contains(VALUE), "{what}: {}", got.text());
        let entry = only_entry(&rig, task).await;
        assert_eq!(entry.verdict, EgressVerdict::Refused, "{what}: {entry:?}");
        assert!(
            entry
                .reason
                .as_deref()
                .unwrap_or_default()
                .contains("withheld"),
            "{what}: {entry:?}"
        );
    }
}

#[tokio::test]
async fn gzip_bomb_past_the_inspected_limit_is_withheld() {
    let cert = api_cert();
    let server = api_server(&cert).await;
    let port = server.port;
    let small = EgressConfig {
        max_inspected_body_bytes: 64 * 1024,
        ..pinned()
    };
    let (rig, placeholder) = secret_rig(port, 9, &cert, small);
    let (tls, task) = connect_api(&rig, port).await;
    let host = format!("api.test:{port}");
    let got = ask_coded(tls, &host, "/coded?ce=gzip&pad=4000000", &placeholder).await;
    assert_eq!(got.status, 502, "{}", got.text());
    assert!(
        got.refused().contains("max_inspected_body_bytes"),
        "{}",
        got.refused()
    );
    drop(only_entry(&rig, task).await);
}

#[tokio::test]
async fn secret_in_gzip_echo_over_plain_http_is_masked() {
    let web = web_server().await;
    let w = web.port;
    let origin = format!("http://web.test:{w}");
    let bindings = [SecretBinding {
        name: "API_KEY".into(),
        hosts: vec![origin.clone()],
    }];
    let values = BTreeMap::from([("API_KEY".to_string(), SecretValue(VALUE.into()))]);
    for (ce, te) in [("gzip", ""), ("deflate", "gzip"), ("", "gzip"), ("br", "")] {
        let what = format!("ce={ce} te={te}");
        let (env, secrets) =
            CallSecrets::bind(&bindings, &values, &SystemSource::default()).unwrap();
        let placeholder = env["API_KEY"].0.clone();
        let in_flight = Arc::new(InFlight::default());
        let call = in_flight.insert_with_secrets_for_test(
            CALL,
            skill(std::slice::from_ref(&origin)),
            TOKEN,
            secrets,
        );
        let allow = [format!("web.test:{w}")];
        let rig = Rig::around(in_flight, call, pinned(), &allow, Default::default());
        let (program, task) = rig.open();
        let path = format!("{origin}/coded?ce={ce}&te={te}");
        let got = ask_coded(program, &format!("web.test:{w}"), &path, &placeholder).await;
        if ce == "br" {
            assert_eq!(got.status, 502, "{what}: {}", got.text());
            assert!(!got.text().contains(VALUE), "{what}");
        } else {
            assert_masked_plain(&got, &what);
        }
        task.abort();
    }
}
