//! The egress bench's servers and proxy: a plain HTTP and a TLS server answering `/big`
//! and `/small`, the proxy serving one call in flight, and a bare relay to compare with.

use super::*;
/// Where `needle` starts in `hay`.
pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

// ---- the servers ----

/// Answers one request on `io`: `/big` → `big`, anything else → [`SMALL`]; then closes
/// (a TLS stream with its `close_notify`).
pub(crate) async fn answer<S: AsyncRead + AsyncWrite + Unpin>(mut io: S, big: Bytes) {
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    while find(&head, b"\r\n\r\n").is_none() {
        match io.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
    let path = head.split(|b| *b == b' ').nth(1).unwrap_or_default();
    let body = if path == b"/big" {
        big
    } else {
        Bytes::from_static(SMALL)
    };
    let out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if io.write_all(out.as_bytes()).await.is_ok() && io.write_all(&body).await.is_ok() {
        let _ = io.shutdown().await;
    }
}

/// The plain HTTP server's port.
pub(crate) async fn http_server(big: Bytes) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(answer(stream, big.clone()));
        }
    });
    port
}

/// The TLS server's certificate (self-signed for [`API`]) and key.
pub(crate) struct ApiCert {
    pub(crate) cert: CertificateDer<'static>,
    pub(crate) key: PrivatePkcs8KeyDer<'static>,
}

pub(crate) fn api_cert() -> ApiCert {
    let made = rcgen::generate_simple_self_signed(vec![API.to_string()]).unwrap();
    ApiCert {
        cert: made.cert.der().clone(),
        key: PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()),
    }
}

pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The TLS server's side of the handshake.
pub(crate) fn tls_acceptor(cert: &ApiCert) -> tokio_rustls::TlsAcceptor {
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.cert.clone()],
            PrivateKeyDer::Pkcs8(cert.key.clone_key()),
        )
        .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// The TLS server's port.
pub(crate) async fn tls_server(acceptor: tokio_rustls::TlsAcceptor, big: Bytes) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let (acceptor, big) = (acceptor.clone(), big.clone());
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(stream).await {
                    answer(tls, big).await;
                }
            });
        }
    });
    port
}

// ---- the proxy ----

/// A skill declaring `network`.
pub(crate) fn skill(network: &[String]) -> Arc<Skill> {
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

/// The proxy, the call in flight (kept in the table for the whole run) and the port of a
/// loopback listener whose connections the proxy serves as the call's.
pub(crate) struct Proxy {
    pub(crate) proxy: Arc<EgressProxy>,
    pub(crate) call: Arc<ActiveCall>,
    pub(crate) port: u16,
    /// The egress CA's folder.
    pub(crate) _state: tempfile::TempDir,
}

pub(crate) async fn proxy(http_port: u16, tls_port: u16) -> Proxy {
    let in_flight = Arc::new(InFlight::default());
    let network = [
        format!("http://{WEB}:{http_port}"),
        format!("{API}:{tls_port}"),
    ];
    let call = in_flight.insert_for_test(CALL, skill(&network), TOKEN);
    let config = EgressConfig {
        resolve: BTreeMap::from([
            (WEB.to_string(), "127.0.0.1".parse().unwrap()),
            (API.to_string(), "127.0.0.1".parse().unwrap()),
        ]),
        // Every round moves hundreds of MiB through the one call.
        max_bytes_per_call: u64::MAX,
        ..EgressConfig::default()
    };
    let allow = vec![format!("{WEB}:{http_port}"), format!("{API}:{tls_port}")];
    // The egress CA, in a state folder of its own: only calls with bound secrets use it
    // (this one has none, so its tunnels are relayed, not read).
    let state = tempfile::tempdir().unwrap();
    let trust = EgressTrust::open(state.path(), ExtraRoots::default()).unwrap();
    let proxy = Arc::new(EgressProxy::new(in_flight, config, allow, Arc::new(trust)));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let serving = Arc::clone(&proxy);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let proxy = Arc::clone(&serving);
            tokio::spawn(async move { proxy.serve_connection(CALL, TOKEN, stream).await });
        }
    });
    Proxy {
        proxy,
        call,
        port,
        _state: state,
    }
}

/// The port of a bare relay to `to` with buffers of `size` each way (see the module docs).
pub(crate) async fn relay(to: u16, size: usize) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut program, _)) = listener.accept().await {
            let _ = program.set_nodelay(true);
            tokio::spawn(async move {
                let mut server = connect(to).await;
                let _ =
                    tokio::io::copy_bidirectional_with_sizes(&mut program, &mut server, size, size)
                        .await;
            });
        }
    });
    port
}

// ---- the client ----
