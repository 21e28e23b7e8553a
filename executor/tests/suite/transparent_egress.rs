//! Programs that ignore the proxy variables (docs/sandbox.md, "Programs that ignore the
//! proxy"): in a network call's namespace their lookups are answered there and their
//! connections, to the ports the skill's hosts name, are carried to the proxy as proxied
//! ones are. Python's `http.client` (which reads no proxy variable), Node's built-in
//! `fetch` (which ignores them before Node 22.21), a Go program whose HTTP client has no
//! proxy (Go's own resolver, over UDP), a TLS-looking raw connection (sent as `CONNECT`),
//! and a host the proxy refuses, whose `403` reaches the program.

use std::time::Instant;

use serde_json::{json, Value};
use skillbox_executor::call;
use skillbox_executor::registry::Registry;
use skillbox_protocol::methods::{Envelope, SecretValue, ToolExecuteParams};
use skillbox_protocol::result::ToolResult;

use super::context_files::{runtime, sandbox};
use super::egress::{namespaces_available, network_skill, CALL_ID, TOKEN};
use super::harness::fake_core::FakeCore;
use super::harness::fake_proxy::TestServer;
use super::harness::{build_go, SkillRoot};

/// Runs `skill:run` with the operator's grant of `http://api.test:<port>` and
/// `http://elsewhere.test:<port>` (the proxy refuses the second, as the core refuses an
/// undeclared host).
fn run_granted(root: &SkillRoot, core: &FakeCore, port: u16) -> ToolResult {
    let params = ToolExecuteParams {
        call_id: CALL_ID.into(),
        capability_token: SecretValue(TOKEN.into()),
        skill: "direct".into(),
        tool: "run".into(),
        args: json!({ "port": port }),
        envelope: Envelope {
            granted_network: vec![
                format!("http://api.test:{port}"),
                format!("http://elsewhere.test:{port}"),
            ],
            ..Envelope::default()
        },
        traceparent: None,
        workdir: None,
        script: None,
    };
    let registry = Registry::load(root.skills());
    runtime().block_on(call::execute(
        &sandbox(),
        &registry,
        core,
        params,
        Instant::now(),
    ))
}

const DIRECT: &str = r#"
import http.client, subprocess
port = args["port"]
def plain(host, path):
    c = http.client.HTTPConnection(host, port, timeout=20)
    c.request("GET", path)
    r = c.getresponse()
    return {"status": r.status, "body": r.read().decode(), "refused": r.getheader("X-Skillbox-Refused")}
def tls_looking():
    s = socket.create_connection(("api.test", port), timeout=20)
    s.sendall(b"\x16GET /tls HTTP/1.1\r\n\r\n")
    return s.recv(4096).decode(errors="replace")
def go_direct():
    home = os.environ.get("SKILLBOX_SKILL_DIR") or os.path.dirname(os.path.abspath(__file__))
    exe = os.path.join(home, "bin", "direct-go")
    if not os.path.exists(exe):
        return {"code": -1, "out": "no go", "err": ""}
    p = subprocess.run([exe, "http://api.test:%d/go" % port], capture_output=True, text=True, timeout=60)
    return {"code": p.returncode, "out": p.stdout.strip(), "err": p.stderr[-500:]}
def node_fetch():
    js = "fetch('http://api.test:%d/node').then(r => r.text()).then(t => console.log(t), e => { console.log('failed: ' + e.cause); process.exit(3) })" % port
    p = subprocess.run(["node", "-e", js], capture_output=True, text=True, timeout=60)
    return {"code": p.returncode, "out": p.stdout.strip(), "err": p.stderr[-500:]}
reply({
    "proxy_env": os.environ.get("HTTP_PROXY"),
    "address": socket.getaddrinfo("api.test", port, socket.AF_INET)[0][4][0],
    "python": attempt(lambda: plain("api.test", "/python")),
    "refused": attempt(lambda: plain("elsewhere.test", "/nope")),
    "tls": attempt(tls_looking),
    "node": attempt(node_fetch),
    "go": attempt(go_direct),
})
"#;

/// A Go program fetching its argument with a client that has no proxy at all (as a Go
/// binary built without proxy support does).
const GO_DIRECT: &str = r#"package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	r, err := client.Get(os.Args[1])
	if err != nil {
		fmt.Println("failed:", err)
		os.Exit(3)
	}
	body, _ := io.ReadAll(r.Body)
	fmt.Println(string(body))
}
"#;

#[test]
fn programs_that_ignore_the_proxy_reach_their_hosts_through_it_and_nothing_else() {
    if !namespaces_available("programs_that_ignore_the_proxy") {
        return;
    }
    let server = TestServer::start();
    let root = SkillRoot::new();
    network_skill(&root, "direct", DIRECT);
    let go = build_go(&root.skills().join("direct/bin"), "direct-go", GO_DIRECT).is_some();
    let core = FakeCore::default();
    let r = run_granted(&root, &core, server.port);
    assert!(r.success, "{r:?}");
    let out = r.data.unwrap();
    let port = server.port;
    assert!(
        out["address"]
            .as_str()
            .is_some_and(|a| a.starts_with("198.18.")),
        "{out}"
    );
    let python = &out["python"]["value"];
    assert_eq!(python["status"], 200, "{out}");
    assert_body(python["body"].as_str(), "/python HTTP/1.1", &out);
    let refused = &out["refused"]["value"];
    assert_eq!(refused["status"], 403, "{out}");
    assert_eq!(
        refused["refused"], "host elsewhere.test is not declared",
        "{out}"
    );
    let tls = out["tls"]["value"].as_str().unwrap_or_default();
    assert!(tls.contains(TestServer::BODY), "{out}");
    let node = &out["node"]["value"];
    assert_eq!(node["code"], 0, "{out}");
    assert_body(node["out"].as_str(), "/node HTTP/1.1", &out);
    let mut lines: Vec<String> = (core.proxy.served().into_iter())
        .inspect(|p| assert_eq!((p.call_id.as_str(), p.token.as_str()), (CALL_ID, TOKEN)))
        .map(|p| p.request_line)
        .collect();
    lines.sort();
    let go_out = &out["go"]["value"];
    if go {
        assert_eq!(go_out["code"], 0, "{out}");
        assert_body(go_out["out"].as_str(), "/go HTTP/1.1", &out);
    }
    let mut expected = vec![
        format!("CONNECT api.test:{port} HTTP/1.1"),
        format!("GET http://api.test:{port}/node HTTP/1.1"),
        format!("GET http://api.test:{port}/python HTTP/1.1"),
        format!("GET http://elsewhere.test:{port}/nope HTTP/1.1"),
    ];
    if go {
        expected.push(format!("GET http://api.test:{port}/go HTTP/1.1"));
    }
    expected.sort();
    assert_eq!(lines, expected, "what reached the proxy: {out}");
}

/// Asserts the test server answered `body` for a request line ending in `line` (it echoes
/// the line; the fake proxy forwards the absolute form as it is).
#[track_caller]
fn assert_body(body: Option<&str>, line: &str, out: &Value) {
    let body = body.unwrap_or_default();
    assert!(
        body.starts_with(TestServer::BODY) && body.contains(line),
        "expected the test server's answer to {line:?}: {out}"
    );
}
