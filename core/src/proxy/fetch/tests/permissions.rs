//! The fetch proxy refuses hosts, ports, addresses and redirects the skill did not
//! declare or the operator did not allow-list, and drops credentials across origins.

use super::*;

#[tokio::test]
async fn fetch_refuses_host_the_skill_did_not_declare() {
    let s = server().await;
    let other = server().await;
    let reason = denied(
        proxy(&[&s, &other])
            .fetch(&network(&[&other]), get(&s.url("/hello")))
            .await,
    );
    assert!(
        reason.contains(&format!("http://127.0.0.1:{}", s.port)),
        "{reason}"
    );
    assert!(
        reason.contains("not in the skill's permissions.network"),
        "{reason}"
    );
    // The same host under another name or scheme is not declared either.
    let reason = denied(
        proxy(&[&s])
            .fetch(
                &network(&[&s]),
                get(&format!("https://127.0.0.1:{}/hello", s.port)),
            )
            .await,
    );
    assert!(
        reason.contains("not in the skill's permissions.network"),
        "{reason}"
    );
}

#[tokio::test]
async fn fetch_refuses_when_skill_declares_no_network() {
    let s = server().await;
    let reason = denied(proxy(&[&s]).fetch(&[], get(&s.url("/hello"))).await);
    assert!(
        reason.contains("declares no permissions.network"),
        "{reason}"
    );
}

#[tokio::test]
async fn fetch_refuses_loopback_not_allow_listed() {
    let s = server().await;
    let reason = denied(
        proxy(&[])
            .fetch(&network(&[&s]), get(&s.url("/hello")))
            .await,
    );
    assert!(reason.contains("127.0.0.1, which is loopback"), "{reason}");
    assert!(
        reason.contains(&format!("\"127.0.0.1:{}\"", s.port)),
        "{reason}"
    );
    assert!(reason.contains("allow_private"), "{reason}");
    // Allow-listing another port of the same address does not help.
    let other = server().await;
    let reason = denied(
        proxy(&[&other])
            .fetch(&network(&[&s]), get(&s.url("/hello")))
            .await,
    );
    assert!(reason.contains("loopback"), "{reason}");
}

#[tokio::test]
async fn fetch_refuses_metadata_and_private_addresses() {
    for (net, url, why) in [
        (
            "http://169.254.169.254",
            "http://169.254.169.254/latest/meta-data/",
            "metadata",
        ),
        (
            "http://10.0.0.1",
            "http://10.0.0.1/",
            "private (10.0.0.0/8)",
        ),
        ("http://[::1]:8080", "http://[::1]:8080/", "loopback"),
        (
            "http://[::ffff:192.168.0.1]",
            "http://[::ffff:192.168.0.1]/",
            "non-public IPv4",
        ),
        ("http://0.0.0.0", "http://0.0.0.0/", "unspecified"),
        (
            "http://100.64.1.1",
            "http://100.64.1.1/",
            "carrier-grade NAT",
        ),
    ] {
        let reason = denied(proxy(&[]).fetch(&[net.to_string()], get(url)).await);
        assert!(reason.contains(why), "{url}: {reason}");
    }
}

#[tokio::test]
async fn fetch_allows_host_port_allow_list_entry() {
    let s = server().await;
    let p = FetchProxy::new(FetchConfig {
        allow_private: vec![format!("localhost:{}", s.port)],
        ..FetchConfig::default()
    });
    let url = format!("http://localhost:{}/echo", s.port);
    let r = p
        .fetch(&[format!("http://localhost:{}", s.port)], get(&url))
        .await
        .unwrap();
    // The Host header keeps the name although the connection went to the checked address.
    assert_eq!(
        echoed(r)["headers"]["host"],
        format!("localhost:{}", s.port)
    );
}

#[tokio::test]
async fn fetch_follows_redirect_to_declared_host() {
    let a = server().await;
    let b = server().await;
    let url = a.url(&format!("/redirect?status=302&to={}", b.url("/hello")));
    let r = proxy(&[&a, &b])
        .fetch(&network(&[&a, &b]), get(&url))
        .await
        .unwrap();
    assert_eq!((r.status, r.body.as_str()), (200, "hello"));
    // A relative Location stays on the same origin.
    let url = a.url("/redirect?status=301&to=/hello");
    let r = proxy(&[&a])
        .fetch(&network(&[&a]), get(&url))
        .await
        .unwrap();
    assert_eq!(r.body, "hello");
}

#[tokio::test]
async fn fetch_refuses_redirect_to_undeclared_port() {
    let a = server().await;
    let b = server().await;
    let url = a.url(&format!("/redirect?status=302&to={}", b.url("/hello")));
    let reason = denied(proxy(&[&a, &b]).fetch(&network(&[&a]), get(&url)).await);
    assert!(reason.starts_with("redirect from"), "{reason}");
    assert!(
        reason.contains(&format!("127.0.0.1:{}", b.port)),
        "{reason}"
    );
    assert!(
        reason.contains("not in the skill's permissions.network"),
        "{reason}"
    );
}

#[tokio::test]
async fn fetch_refuses_redirect_to_private_address() {
    let a = server().await;
    let url = a.url("/redirect?status=307&to=http://169.254.169.254/latest/meta-data/");
    let mut net = network(&[&a]);
    net.push("http://169.254.169.254".into());
    let reason = denied(proxy(&[&a]).fetch(&net, get(&url)).await);
    assert!(reason.contains("cloud metadata"), "{reason}");
}

#[tokio::test]
async fn fetch_refuses_redirect_to_file_scheme() {
    let a = server().await;
    let url = a.url("/redirect?status=302&to=file:///etc/passwd");
    let reason = denied(proxy(&[&a]).fetch(&network(&[&a]), get(&url)).await);
    assert!(reason.starts_with("redirect from"), "{reason}");
    assert!(reason.contains("only http:// and https://"), "{reason}");
}

#[tokio::test]
async fn fetch_refuses_too_many_redirects() {
    let a = server().await;
    let config = FetchConfig {
        max_redirects: 3,
        ..FetchConfig::default()
    };
    let err = proxy_with(&[&a], config)
        .fetch(&network(&[&a]), get(&a.url("/loop")))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProxyError::TooManyRedirects { max: 3, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("more than 3 redirects"), "{err}");
}

#[tokio::test]
async fn fetch_drops_credentials_on_cross_origin_redirect() {
    let a = server().await;
    let b = server().await;
    let with_auth = |url: String| {
        let mut req = get(&url);
        req.headers
            .insert("Authorization".into(), "Bearer s3cret".into());
        req.headers.insert("Cookie".into(), "sid=1".into());
        req
    };
    let p = proxy(&[&a, &b]);
    let net = network(&[&a, &b]);
    let cross = a.url(&format!("/redirect?status=307&to={}", b.url("/echo")));
    let e = echoed(p.fetch(&net, with_auth(cross)).await.unwrap());
    assert!(e["headers"].get("authorization").is_none(), "{e}");
    assert!(e["headers"].get("cookie").is_none(), "{e}");
    let same = a.url("/redirect?status=307&to=/echo");
    let e = echoed(p.fetch(&net, with_auth(same)).await.unwrap());
    assert_eq!(e["headers"]["authorization"], "Bearer s3cret");
}

#[tokio::test]
async fn fetch_redirect_303_turns_post_into_get_and_307_keeps_it() {
    let a = server().await;
    let p = proxy(&[&a]);
    let net = network(&[&a]);
    let see_other = request("POST", &a.url("/redirect?status=303&to=/echo"), Some("x"));
    let e = echoed(p.fetch(&net, see_other).await.unwrap());
    assert_eq!(
        (e["method"].as_str(), e["body"].as_str()),
        (Some("GET"), Some(""))
    );
    let temporary = request("POST", &a.url("/redirect?status=307&to=/echo"), Some("x"));
    let e = echoed(p.fetch(&net, temporary).await.unwrap());
    assert_eq!(
        (e["method"].as_str(), e["body"].as_str()),
        (Some("POST"), Some("x"))
    );
}
