//! HTTPS and secrets by placeholder under `skillbox up`, against an HTTPS server on
//! 127.0.0.1 whose CA the operator trusts with `[egress] extra_roots`:
//!
//! - a skill granted the host reaches it with curl and Python over TLS through a `CONNECT`
//!   tunnel (the sandbox's CA bundle holds the extra roots), and with Node's `fetch`, which
//!   ignores the proxy variables and is taken to the proxy by the call's namespace;
//! - a skill granted `API_KEY` bound to that host holds only a placeholder; the server gets
//!   the real key in the header and the query (the proxy ends the program's TLS with the
//!   workspace's egress CA, which the sandbox trusts), and never the placeholder;
//! - the placeholder sent to another host the skill may reach is refused as an
//!   exfiltration attempt, and the call's record says so.

use std::path::Path;
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::harness::server::HELLO;
use crate::harness::skills::{open_up, write};
use crate::harness::tls_server::TlsServer;
use crate::harness::{on_sandbox_path, Options, Skillbox};

/// The name the HTTPS server answers as (pinned to 127.0.0.1 with `[egress] resolve`).
const NAME: &str = "api.egress.test";
/// The real key: in the core's secrets, never in a sandbox.
const KEY: &str = "sk-e2e-real-key-0042";

/// The HTTPS server of this test process (one test per process under nextest).
fn server() -> &'static TlsServer {
    static SERVER: OnceLock<TlsServer> = OnceLock::new();
    SERVER.get_or_init(|| TlsServer::start(NAME, KEY))
}

/// Two published-shaped skills (a SKILL.md, no permissions) and the operator's grants:
/// `tls-weather` may reach the HTTPS server, `keyed-api` has `API_KEY` bound to it and may
/// reach the plain test server too.
fn prepare(ws: &Path) {
    let s = server();
    for (name, text) in [
        ("tls-weather", "Weather over HTTPS with curl."),
        ("keyed-api", "Calls a keyed API with curl; needs API_KEY."),
    ] {
        let dir = ws.join("skills").join(name);
        write(
            &dir.join("SKILL.md"),
            &format!("---\nname: {name}\ndescription: {text}\n---\nRun curl.\n"),
        );
        open_up(&dir);
    }
    write(&ws.join("egress-test-ca.pem"), &s.ca_pem);
    let mut toml = std::fs::read_to_string(ws.join("skillbox.toml")).unwrap();
    let plain_port = toml
        .split("allow_private = [\"127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_string();
    let host = format!("{NAME}:{}", s.port);
    toml = toml.replacen(
        "allow_private = [",
        &format!("allow_private = [\"{host}\", \"api.test:{plain_port}\", "),
        1,
    );
    toml.push_str(&format!(
        "\n[grants.tls-weather]\nnetwork = [\"{host}\"]\n\n\
         [grants.keyed-api]\nnetwork = [\"http://api.test:{plain_port}\"]\n\
         secrets = [{{ name = \"API_KEY\", hosts = [\"{host}\"] }}]\n\n\
         [egress]\nresolve = {{ \"{NAME}\" = \"127.0.0.1\", \"api.test\" = \"127.0.0.1\" }}\n\
         extra_roots = [\"egress-test-ca.pem\"]\n"
    ));
    std::fs::write(ws.join("skillbox.toml"), toml).unwrap();
}

fn exec(sb: &Skillbox, skill: &str, cmd: &str) -> Value {
    sb.request(
        "POST",
        "/v1/tools/call",
        Some(&json!({"tool": "exec_command", "context_id": "tls-1",
                     "args": {"cmd": cmd, "skill": skill, "yield_ms": 20000}})),
    )
    .json()
}

fn output(r: &Value) -> &str {
    r["data"]["output"].as_str().unwrap_or_default()
}

#[test]
fn https_and_a_bound_secret_reach_their_host_and_the_key_never_enters_the_sandbox() {
    let s = server();
    let sb = Skillbox::start(Options {
        prepare: Some(prepare),
        secrets: vec![("API_KEY".into(), KEY.into())],
        ..Options::default()
    });
    let url = format!("https://{NAME}:{}", s.port);

    // TLS tunnelled untouched: the server's CA is in the sandbox's bundle.
    let r = exec(
        &sb,
        "tls-weather",
        &format!("python3 -c \"import urllib.request as u; print(u.urlopen('{url}/hello').read().decode())\""),
    );
    assert_eq!(r["data"]["exit_code"], 0, "{r}");
    assert!(output(&r).contains(HELLO), "{r}");
    if on_sandbox_path("curl") {
        let r = exec(&sb, "tls-weather", &format!("curl -sS {url}/hello"));
        assert_eq!(output(&r), HELLO, "{r}");
    }
    // Node's fetch (which before Node 22.21 reads no proxy variable) dials the host
    // itself: the namespace takes the connection to the proxy all the same.
    let node = on_sandbox_path("node");
    if node {
        let r = exec(
            &sb,
            "tls-weather",
            &format!("node -e \"fetch('{url}/hello').then(r => r.text()).then(console.log)\""),
        );
        assert!(output(&r).contains(HELLO), "{r}");
    } else {
        eprintln!("skipped Node fetch: no node on the sandbox's path");
    }

    // The keyed skill holds a placeholder, never the key.
    let r = exec(&sb, "keyed-api", "printenv API_KEY");
    let placeholder = output(&r).trim().to_string();
    assert!(placeholder.starts_with("skillbox-secret:"), "{r}");
    assert!(!placeholder.contains(KEY), "{r}");
    let r = exec(&sb, "keyed-api", "env; cat /proc/self/environ");
    assert!(
        !output(&r).contains(KEY),
        "the key is nowhere in the sandbox: {r}"
    );

    // The bound host gets the key, in the header and the query, from Python and curl.
    let r = exec(
        &sb,
        "keyed-api",
        &format!(
            "python3 -c \"import os, urllib.request as u; k = os.environ['API_KEY']; \
             q = u.Request('{url}/auth?key=' + k, headers={{'Authorization': 'Bearer ' + k}}); \
             print(u.urlopen(q).read().decode())\""
        ),
    );
    assert_eq!(output(&r).trim(), "authorized", "{r}");
    if on_sandbox_path("curl") {
        let r = exec(
            &sb,
            "keyed-api",
            &format!("curl -sS -H \"Authorization: Bearer $API_KEY\" \"{url}/auth?key=$API_KEY\""),
        );
        assert_eq!(output(&r), "authorized", "{r}");
    }
    if node {
        // The same substitution for a program that ignores the proxy.
        let r = exec(
            &sb,
            "keyed-api",
            &format!(
                "node -e \"const k = process.env.API_KEY; fetch('{url}/auth?key=' + k, \
                 {{headers: {{Authorization: 'Bearer ' + k}}}}).then(r => r.text()).then(console.log)\""
            ),
        );
        assert_eq!(output(&r).trim(), "authorized", "{r}");
    }
    let seen = s.seen();
    let auth: Vec<_> = seen
        .iter()
        .filter(|r| r.target.starts_with("/auth"))
        .collect();
    assert!(!auth.is_empty(), "{seen:?}");
    for r in &auth {
        assert_eq!(r.target, format!("/auth?key={KEY}"), "{seen:?}");
        assert_eq!(r.authorization.as_deref(), Some(&*format!("Bearer {KEY}")));
    }
    assert!(
        !seen
            .iter()
            .any(|r| format!("{r:?}").contains("skillbox-secret")),
        "no placeholder reached the server: {seen:?}"
    );

    // The placeholder toward another host the skill may reach: refused, recorded.
    let plain = sb.allowed.port;
    let r = exec(
        &sb,
        "keyed-api",
        &format!(
            "python3 -c \"import os, urllib.request as u; \
             u.urlopen(u.Request('http://api.test:{plain}/hello', headers={{'X-Key': os.environ['API_KEY']}}))\""
        ),
    );
    assert_ne!(r["data"]["exit_code"], 0, "{r}");
    assert!(output(&r).contains("403"), "{r}");
    let call = sb
        .request(
            "GET",
            &format!("/v1/calls/{}", r["call_id"].as_str().unwrap()),
            None,
        )
        .json();
    let egress = call["egress"]
        .as_array()
        .unwrap_or_else(|| panic!("{call}"));
    assert!(
        egress.iter().any(|e| e["host"] == "api.test"
            && e["verdict"] == "refused"
            && e["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("exfiltration")),
        "{call}"
    );
    assert!(
        !sb.allowed.hits().contains(&"/hello".to_string()),
        "the refused request never reached the server: {:?}",
        sb.allowed.hits()
    );
}

/// The bound key sent to a server that echoes the request gzip-coded whatever it was asked
/// (Python decoding the answer itself, and curl `--compressed`): the program reads the
/// masked echo, never the key, and the server did get the key.
#[test]
fn secret_in_gzip_echo_is_masked() {
    let s = server();
    let sb = Skillbox::start(Options {
        prepare: Some(prepare),
        secrets: vec![("API_KEY".into(), KEY.into())],
        ..Options::default()
    });
    let url = format!("https://{NAME}:{}", s.port);
    let masked = format!("Bearer {}", "*".repeat(KEY.len()));
    let r = exec(
        &sb,
        "keyed-api",
        &format!(
            "python3 -c \"import os, gzip, urllib.request as u; k = os.environ['API_KEY']; \
             a = u.urlopen(u.Request('{url}/echo?gzip', headers={{'Authorization': 'Bearer ' + k, \
             'Accept-Encoding': 'gzip, deflate, br, zstd'}})); b = a.read(); \
             ce = a.headers.get('Content-Encoding', 'identity'); print('coding:', ce); \
             print(gzip.decompress(b).decode() if ce == 'gzip' else b.decode())\""
        ),
    );
    assert_eq!(r["data"]["exit_code"], 0, "{r}");
    assert!(!output(&r).contains(KEY), "the key came back: {r}");
    assert!(output(&r).contains("coding: identity"), "{r}");
    assert!(output(&r).contains(&masked), "{r}");
    if on_sandbox_path("curl") {
        let r = exec(
            &sb,
            "keyed-api",
            &format!("curl -sS --compressed -H \"Authorization: Bearer $API_KEY\" {url}/echo?gzip"),
        );
        assert!(!output(&r).contains(KEY), "the key came back: {r}");
        assert!(output(&r).contains(&masked), "{r}");
    }
    assert!(
        s.seen().iter().any(|r| r.target == "/echo?gzip"
            && r.authorization.as_deref() == Some(&*format!("Bearer {KEY}"))),
        "the server got the key: {:?}",
        s.seen()
    );
}

/// A request on a connection the proxy reads whose `Host` names another host than the one
/// it checked (domain fronting), over the terminated TLS and over plain HTTP: refused,
/// recorded, and never at the server.
#[test]
fn host_header_fronting_refused() {
    let s = server();
    let sb = Skillbox::start(Options {
        prepare: Some(prepare),
        secrets: vec![("API_KEY".into(), KEY.into())],
        ..Options::default()
    });
    if !on_sandbox_path("curl") {
        eprintln!("SKIPPED host_header_fronting_refused: no curl on the sandbox's PATH");
        return;
    }
    let url = format!("https://{NAME}:{}", s.port);
    let plain = sb.allowed.port;
    let before = s.seen().len();
    for (what, target, host) in [
        ("tls", format!("{url}/hello"), format!("c.test:{}", s.port)),
        (
            "plain",
            format!("http://api.test:{plain}/hello"),
            format!("b.test:{plain}"),
        ),
    ] {
        let r = exec(
            &sb,
            "keyed-api",
            &format!("curl -sS -o /dev/null -D - -H 'Host: {host}' {target}"),
        );
        assert!(output(&r).contains("HTTP/1.1 403"), "{what}: {r}");
        assert!(output(&r).contains("domain fronting"), "{what}: {r}");
        let call = sb
            .request(
                "GET",
                &format!("/v1/calls/{}", r["call_id"].as_str().unwrap()),
                None,
            )
            .json();
        let refused = call["egress"].as_array().into_iter().flatten().any(|e| {
            e["verdict"] == "refused"
                && e["reason"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("domain fronting")
        });
        assert!(refused, "{what}: {call}");
    }
    assert_eq!(
        s.seen().len(),
        before,
        "the TLS server saw a fronted request"
    );
    assert!(
        !sb.allowed.hits().contains(&"/hello".to_string()),
        "the plain server saw a fronted request: {:?}",
        sb.allowed.hits()
    );
}
