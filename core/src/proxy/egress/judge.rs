//! The reading of a skill with bound secrets (`intercept.rs`) run over bytes in memory,
//! with no socket: the `egress_intercept` fuzz target's entry. A program's bytes go to
//! the proxy as a plain HTTP connection to `api.test:80` of a call that binds one secret
//! to that host and another to `other.test`; a server behind it records what it receives
//! and answers every request with the first secret's value in its body.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use ring::error::Unspecified;
use skillbox_protocol::methods::SecretValue;
use skillbox_protocol::skill::network::Scheme;
use skillbox_protocol::skill::SecretBinding;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::intercept::{self, Reading, Rewind};
use super::relay::Meter;
use super::EgressLog;
use crate::proxy::secrets::CallSecrets;
use crate::proxy::target::Target;
use crate::random::RandomSource;

/// The value of the secret bound to the connection's host.
pub const JUDGE_VALUE_HERE: &str = "sk-judge-value-bound-to-api-test";
/// The value of the secret bound to another host.
pub const JUDGE_VALUE_ELSEWHERE: &str = "sk-judge-value-bound-to-other-test";

/// What one connection came to.
#[derive(Debug, Default)]
pub struct Judged {
    /// The placeholders the call's program holds: of the secret bound to the connection's
    /// host, and of the one bound elsewhere.
    pub placeholders: (String, String),
    /// Every byte the server received.
    pub server_saw: Vec<u8>,
    /// Every byte the program got back.
    pub program_got: Vec<u8>,
}

/// Serves `bytes` as a program's plain connection through the reading (placeholders in
/// bodies replaced when `in_body`), bounded by a second of time.
pub fn judge_reading(bytes: &[u8], in_body: bool) -> Judged {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Judged::default();
    };
    runtime.block_on(read(bytes.to_vec(), in_body))
}

/// Draws whose bytes all hold the draw's number, so placeholders are known and distinct.
#[derive(Debug, Default)]
struct Counting(AtomicU8);

impl RandomSource for Counting {
    fn fill(&self, dest: &mut [u8]) -> Result<(), Unspecified> {
        let n = self.0.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        dest.fill(n);
        Ok(())
    }
}

async fn read(bytes: Vec<u8>, in_body: bool) -> Judged {
    let bindings = [
        SecretBinding {
            name: "HERE".into(),
            hosts: vec!["api.test".into()],
        },
        SecretBinding {
            name: "ELSEWHERE".into(),
            hosts: vec!["other.test".into()],
        },
    ];
    let values = BTreeMap::from([
        ("HERE".to_string(), SecretValue(JUDGE_VALUE_HERE.into())),
        (
            "ELSEWHERE".into(),
            SecretValue(JUDGE_VALUE_ELSEWHERE.into()),
        ),
    ]);
    let Ok((env, secrets)) = CallSecrets::bind(&bindings, &values, &Counting::default()) else {
        return Judged::default();
    };
    let placeholders = (env["HERE"].0.clone(), env["ELSEWHERE"].0.clone());
    let reading = Reading {
        secrets: Arc::new(secrets),
        target: Target {
            scheme: Scheme::Http,
            host: "api.test".into(),
            port: 80,
            path_and_query: "/".into(),
        },
        plain: true,
        in_body,
        max_body: 64 * 1024,
        cache: None,
    };
    let (program, proxy_side) = tokio::io::duplex(256 * 1024);
    let (server_side, server) = tokio::io::duplex(256 * 1024);
    let saw = Arc::new(Mutex::new(Vec::new()));
    let server = tokio::spawn(serve_server(server, Arc::clone(&saw)));
    let meter = Arc::new(Meter::new(
        EgressLog::default(),
        16 * 1024 * 1024,
        Duration::from_secs(1),
    ));
    let proxy = intercept::serve(
        Rewind::new(Vec::new(), proxy_side),
        server_side,
        reading,
        meter,
    );
    let program = async move {
        let (mut rx, mut tx) = tokio::io::split(program);
        let _ = tx.write_all(&bytes).await;
        let _ = tx.shutdown().await;
        let mut got = Vec::new();
        let _ = rx.read_to_end(&mut got).await;
        got
    };
    let both = async { tokio::join!(proxy, program) };
    let program_got = match tokio::time::timeout(Duration::from_secs(1), both).await {
        Ok((_, got)) => got,
        Err(_) => Vec::new(),
    };
    server.abort();
    let server_saw = saw.lock().map(|s| s.clone()).unwrap_or_default();
    Judged {
        placeholders,
        server_saw,
        program_got,
    }
}

/// The server: records each request's head and body, answers with the value of the
/// secret bound to it.
async fn serve_server(io: tokio::io::DuplexStream, saw: Arc<Mutex<Vec<u8>>>) {
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let saw = Arc::clone(&saw);
        async move {
            let (parts, body) = req.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            if let Ok(mut saw) = saw.lock() {
                saw.extend_from_slice(format!("{} {}\n", parts.method, parts.uri).as_bytes());
                for (name, value) in &parts.headers {
                    saw.extend_from_slice(name.as_str().as_bytes());
                    saw.extend_from_slice(b": ");
                    saw.extend_from_slice(value.as_bytes());
                    saw.push(b'\n');
                }
                saw.extend_from_slice(&body);
            }
            let answer = Bytes::from(format!("key={JUDGE_VALUE_HERE}"));
            Ok::<_, Infallible>(hyper::Response::new(Full::new(answer)))
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(io), service)
        .await;
}
