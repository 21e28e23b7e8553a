//! Network for any program under `skillbox up`: a published-shaped skill that declares
//! nothing, granted one host by the operator (`[grants.<skill>] network`), reaches it with
//! Python's urllib and curl through the executor's relay and the core's egress proxy
//! (`HTTP_PROXY` in its environment, its own network namespace); a host it was not granted
//! is refused with the proxy's reason; a direct connection to an address is taken to the
//! proxy by the call's namespace and refused there (no host was declared for it); the call's record
//! lists each connection.

use std::path::Path;

use serde_json::{json, Value};

use crate::harness::server::HELLO;
use crate::harness::skills::{open_up, write};
use crate::harness::{on_sandbox_path, Options, Skillbox};

/// The port of the suite's allowed test server, read back from the config the harness
/// wrote (its `[fetch] allow_private` entry).
fn allowed_port(ws: &Path) -> String {
    let toml = std::fs::read_to_string(ws.join("skillbox.toml")).unwrap();
    toml.split("allow_private = [\"127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("the allowed server's port in skillbox.toml")
        .to_string()
}

/// The port of the suite's private test server (declared by the `net` skill, not in
/// `[fetch] allow_private`).
fn private_port(ws: &Path) -> String {
    let yaml = std::fs::read_to_string(ws.join("skills/net/skill.yaml")).unwrap();
    yaml.rsplit("http://127.0.0.1:")
        .next()
        .and_then(|r| r.split('"').next())
        .expect("the private server's port in the net skill")
        .to_string()
}

/// A weather skill as published (a SKILL.md, no permissions), and the operator's grant of
/// `http://api.test:PORT`, the name pinned to the test server.
fn granted_skill(ws: &Path) {
    let dir = ws.join("skills/weather");
    write(
        &dir.join("SKILL.md"),
        "---\nname: weather\ndescription: Current weather from a weather API with curl.\n---\n\
         Run `curl -s http://api.test/...`.\n",
    );
    open_up(&dir);
    let port = allowed_port(ws);
    let private = private_port(ws);
    let mut toml = std::fs::read_to_string(ws.join("skillbox.toml")).unwrap();
    toml.push_str(&format!(
        "\n[grants.weather]\nnetwork = [\"http://api.test:{port}\", \"http://private.test:{private}\"]\n\n\
         [egress]\nresolve = {{ \"api.test\" = \"127.0.0.1\", \"private.test\" = \"127.0.0.1\" }}\n"
    ));
    std::fs::write(ws.join("skillbox.toml"), toml).unwrap();
}

fn exec(sb: &Skillbox, cmd: &str) -> Value {
    sb.request(
        "POST",
        "/v1/tools/call",
        Some(&json!({"tool": "exec_command", "context_id": "net-1",
                     "args": {"cmd": cmd, "skill": "weather", "yield_ms": 20000}})),
    )
    .json()
}

#[test]
fn a_granted_host_is_reached_by_any_program_through_the_egress_proxy_and_nothing_else() {
    let sb = Skillbox::start(Options {
        prepare: Some(granted_skill),
        ..Options::default()
    });
    let port = sb.allowed.port;
    let r = exec(
        &sb,
        &format!("python3 -c \"import urllib.request as u; print(u.urlopen('http://api.test:{port}/hello').read().decode())\""),
    );
    assert_eq!(r["data"]["exit_code"], 0, "{r}");
    assert!(r["data"]["output"].as_str().unwrap().contains(HELLO), "{r}");
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
            && e["verdict"] == "allowed"
            && e["bytes_in"].as_u64() > Some(0)),
        "{call}"
    );
    if on_sandbox_path("curl") {
        let r = exec(&sb, &format!("curl -s http://api.test:{port}/hello"));
        assert_eq!(r["data"]["output"], HELLO, "{r}");
    }
    // A host the skill was not granted: the proxy's refusal, with its reason.
    let r = exec(
        &sb,
        &format!("python3 -c \"import urllib.request as u; u.urlopen('http://other.test:{port}/hello')\""),
    );
    let out = r["data"]["output"].as_str().unwrap();
    assert_ne!(r["data"]["exit_code"], 0, "{r}");
    assert!(out.contains("403"), "{r}");
    // A redirect from the granted host to a granted name that resolves to a private
    // address: the program follows it, the proxy refuses the second request.
    let private = sb.private.port;
    let r = exec(
        &sb,
        &format!("python3 -c \"import urllib.request as u; u.urlopen('http://api.test:{port}/redirect?to=http://private.test:{private}/hello')\""),
    );
    assert_ne!(r["data"]["exit_code"], 0, "{r}");
    assert!(r["data"]["output"].as_str().unwrap().contains("403"), "{r}");
    assert!(sb.private.hits().is_empty(), "{:?}", sb.private.hits());
    let call = sb
        .request(
            "GET",
            &format!("/v1/calls/{}", r["call_id"].as_str().unwrap()),
            None,
        )
        .json();
    assert!(
        call["egress"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["host"] == "private.test"
                && e["verdict"] == "refused"
                && e["reason"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("127.0.0.1")),
        "{call}"
    );
    // Around the proxy: the namespace takes the connection (its own listener of a port the
    // skill's hosts name) to the proxy, which refuses an address nobody declared.
    let r = exec(
        &sb,
        &format!(
            "python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=5); \
             s.sendall(b'GET /hello HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n'); \
             print(s.recv(4096).decode().splitlines()[0])\""
        ),
    );
    let status = r["data"]["output"].as_str().unwrap_or_default();
    assert!(status.contains(" 403 "), "{r}");
    let hits = sb.allowed.hits();
    assert_eq!(
        hits.iter().filter(|h| h.starts_with("/hello")).count(),
        if on_sandbox_path("curl") { 2 } else { 1 },
        "only the proxied requests reached the server: {hits:?}"
    );
}

/// `[egress]` applies on reload: a host whose name the proxy cannot resolve is reached once
/// the operator pins it (`resolve`) and reloads, with no restart.
#[test]
fn a_reload_applies_a_new_egress_resolve_without_a_restart() {
    let sb = Skillbox::start(Options {
        prepare: Some(|ws: &Path| {
            granted_skill(ws);
            let port = allowed_port(ws);
            let toml = std::fs::read_to_string(ws.join("skillbox.toml")).unwrap();
            let toml = toml.replacen(
                "network = [",
                &format!("network = [\"http://later.test:{port}\", "),
                1,
            );
            std::fs::write(ws.join("skillbox.toml"), toml).unwrap();
        }),
        ..Options::default()
    });
    let port = sb.allowed.port;
    let fetch = format!(
        "python3 -c \"import urllib.request as u; print(u.urlopen('http://later.test:{port}/hello').read().decode())\""
    );
    let r = exec(&sb, &fetch);
    assert_ne!(r["data"]["exit_code"], 0, "not pinned yet: {r}");
    let path = sb.ws.join("skillbox.toml");
    let toml = std::fs::read_to_string(&path).unwrap();
    let toml = toml.replacen(
        "resolve = {",
        "resolve = { \"later.test\" = \"127.0.0.1\",",
        1,
    );
    std::fs::write(&path, toml).unwrap();
    let reloaded = sb.request("POST", "/v1/skills/reload", None);
    assert_eq!(reloaded.status, 200, "{}", reloaded.body);
    let r = exec(&sb, &fetch);
    assert_eq!(r["data"]["exit_code"], 0, "pinned by the reload: {r}");
    assert!(r["data"]["output"].as_str().unwrap().contains(HELLO), "{r}");
}
