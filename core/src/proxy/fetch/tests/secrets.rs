//! `core.fetch` for a call with a bound secret: the bound host gets the value, another
//! host (asked for, or reached by a redirect) refuses the request, answers are masked.

use super::*;
use crate::random::SystemSource;
use skillbox_protocol::methods::SecretValue;
use skillbox_protocol::skill::SecretBinding;

const VALUE: &str = "sk-fetch-value";

/// `API_KEY` bound to `bound`; the placeholder.
fn bound_to(bound: &TestServer) -> (CallSecrets, String) {
    let bindings = [SecretBinding {
        name: "API_KEY".into(),
        hosts: vec![format!("http://127.0.0.1:{}", bound.port)],
    }];
    let values = BTreeMap::from([("API_KEY".to_string(), SecretValue(VALUE.into()))]);
    let (env, secrets) = CallSecrets::bind(&bindings, &values, &SystemSource::default()).unwrap();
    (secrets, env["API_KEY"].0.clone())
}

fn with_header(mut req: FetchParams, name: &str, value: &str) -> FetchParams {
    req.headers.insert(name.into(), value.into());
    req
}

#[tokio::test]
async fn fetch_puts_the_value_in_requests_to_the_bound_host_and_masks_the_answer() {
    let s = server().await;
    let (secrets, placeholder) = bound_to(&s);
    let req = with_header(
        get(&s.url(&format!("/echo?key={placeholder}"))),
        "x-api-key",
        &placeholder,
    );
    let r = proxy(&[&s])
        .fetch_with(&network(&[&s]), req, &secrets)
        .await
        .unwrap();
    let echo = echoed(r);
    let stars = "*".repeat(VALUE.len());
    assert_eq!(echo["headers"]["x-api-key"], stars.as_str(), "{echo}");
    assert!(!echo.to_string().contains("skillbox-secret"), "{echo}");
    assert!(!echo.to_string().contains(VALUE), "{echo}");
}

#[tokio::test]
async fn fetch_refuses_the_placeholder_toward_another_host_even_after_a_redirect() {
    let (bound, other) = (server().await, server().await);
    let (secrets, placeholder) = bound_to(&bound);
    let both = network(&[&bound, &other]);
    let fetch = proxy(&[&bound, &other]);
    let asked = with_header(get(&other.url("/echo")), "x-api-key", &placeholder);
    let why = denied(fetch.fetch_with(&both, asked, &secrets).await);
    assert!(
        why.contains("exfiltration") && why.contains("API_KEY"),
        "{why}"
    );
    // The bound host redirects to the other: the header would follow; the hop is refused.
    let to = other.url("/echo");
    let redirected = with_header(
        get(&bound.url(&format!("/redirect?status=302&to={to}"))),
        "x-api-key",
        &placeholder,
    );
    let why = denied(fetch.fetch_with(&both, redirected, &secrets).await);
    assert!(why.contains("exfiltration"), "{why}");
    // A placeholder in a body is refused unless bodies are substituted.
    let post = request("POST", &bound.url("/echo"), Some(&placeholder));
    let why = denied(fetch.fetch_with(&both, post.clone(), &secrets).await);
    assert!(why.contains("secrets_in_body"), "{why}");
    let r = proxy(&[&bound])
        .with_secrets_in_body(true)
        .fetch_with(&both, post, &secrets)
        .await
        .unwrap();
    assert_eq!(echoed(r)["body"], "*".repeat(VALUE.len()).as_str());
}
