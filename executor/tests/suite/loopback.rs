//! A call's own loopback (docs/sandbox.md, "Loopback inside the call"): the programs of a
//! call in a network namespace of its own (a skill with network, or one that asks with
//! `execution.loopback`) may listen there and reach each other, as a web app and the
//! browser driving it do. And what that widening does not allow, each attack asserting the
//! refusal and its reason: another call's loopback server, the host's loopback, the
//! host's connections to the call's server, the network outside (no route), and the
//! socket families the network filter keeps closed. A tool of a skill that asks for
//! neither still has no socket at all (`egress_attacks.rs`).

use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use skillbox_executor::call;
use skillbox_executor::registry::Registry;
use skillbox_executor::sandbox::Sandbox;
use skillbox_protocol::methods::{Envelope, SecretValue, ToolExecuteParams};
use skillbox_protocol::result::ToolResult;

use super::context_files::{runtime, sandbox};
use super::egress::{namespaces_available, network_skill};
use super::harness::fake_core::FakeCore;
use super::harness::{assert_errno, unique, Manifest, SkillRoot};

/// The manifest line of a skill without network that asks for a loopback.
const LOOPBACK: &str = "execution: { loopback: true }";

fn loopback_skill(root: &SkillRoot, name: &str, script: &str) {
    let manifest = Manifest {
        skill: LOOPBACK,
        ..Manifest::default()
    };
    root.python_skill_with(name, script, manifest);
}

/// The call `skill:run` with `args`, as a future (several may run at once).
async fn call_of(sandbox: &Sandbox, root: &SkillRoot, skill: &str, args: Value) -> ToolResult {
    let params = ToolExecuteParams {
        call_id: unique("loop"),
        capability_token: SecretValue("tok".into()),
        skill: skill.into(),
        tool: "run".into(),
        args,
        envelope: Envelope::default(),
        traceparent: None,
        workdir: None,
        script: None,
    };
    let registry = Registry::load(root.skills());
    let core = FakeCore::default();
    call::execute(sandbox, &registry, &core, params, Instant::now()).await
}

fn data(r: &ToolResult) -> Value {
    assert!(r.success, "{r:?}");
    r.data.clone().unwrap()
}

/// A port free on the host's loopback now (what the tests ask a call to listen on, so
/// that a connection the host makes to it could only reach the call's server).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A web server started by the script (`python3 -m http.server`, a process of its own),
/// and the script's client reading a file from it, over IPv4 and IPv6.
const SERVE_AND_FETCH: &str = r#"
import subprocess, urllib.request
home = os.environ["HOME"]
with open(os.path.join(home, "page.html"), "w") as f:
    f.write("served inside the call")
port = args["port"]
server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "::"],
                          cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
bodies, last = {}, None
for host in ["127.0.0.1", "[::1]", "localhost"]:
    for _ in range(100):
        try:
            bodies[host] = urllib.request.urlopen("http://%s:%d/page.html" % (host, port), timeout=5).read().decode()
            break
        except OSError as e:
            last = repr(e)
            time.sleep(0.05)
server.kill()
reply({"bodies": bodies, "last_error": last, "proxy": os.environ.get("HTTP_PROXY")})
"#;

#[test]
fn a_calls_server_and_its_client_reach_each_other_on_the_calls_own_loopback() {
    if !namespaces_available("a_calls_server_and_its_client_reach_each_other") {
        return;
    }
    let root = SkillRoot::new();
    loopback_skill(&root, "webapp", SERVE_AND_FETCH);
    // A skill with network has its own loopback too; its clients reach it without the
    // proxy (NO_PROXY names the loopback).
    network_skill(&root, "netapp", SERVE_AND_FETCH);
    let sandbox = sandbox();
    for (skill, proxy) in [
        ("webapp", Value::Null),
        ("netapp", json!("http://127.0.0.1:3128")),
    ] {
        let r = runtime().block_on(call_of(&sandbox, &root, skill, json!({"port": 8080})));
        let out = data(&r);
        for host in ["127.0.0.1", "[::1]", "localhost"] {
            assert_eq!(
                out["bodies"][host], "served inside the call",
                "{skill} {host}: {out}"
            );
        }
        assert_eq!(out["proxy"], proxy, "{skill}: {out}");
    }
}

/// Two calls in flight at once, each in its own namespace: the second one's connection to
/// the port the first listens on is refused (its loopback has nothing there), and the
/// first one's server never sees it.
#[test]
fn call_cannot_reach_another_calls_loopback_server() {
    if !namespaces_available("call_cannot_reach_another_calls_loopback_server") {
        return;
    }
    let root = SkillRoot::new();
    loopback_skill(
        &root,
        "server",
        r#"
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", args["port"]))
        s.listen(8)
        s.settimeout(0.2)
        accepted, until = 0, time.time() + 4
        while time.time() < until:
            try:
                s.accept()[0].close()
                accepted += 1
            except socket.timeout:
                pass
        reply({"accepted": accepted})
        "#,
    );
    loopback_skill(
        &root,
        "prober",
        r#"
        def tcp(host, family=socket.AF_INET):
            s = socket.socket(family, socket.SOCK_STREAM)
            s.settimeout(3)
            s.connect((host, args["port"]))
        reply({"v4": attempt(lambda: tcp("127.0.0.1")), "v6": attempt(lambda: tcp("::1", socket.AF_INET6))})
        "#,
    );
    let sandbox = sandbox();
    let port = free_port();
    let (served, probed) = runtime().block_on(async {
        let server = call_of(&sandbox, &root, "server", json!({"port": port}));
        let prober = async {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            call_of(&sandbox, &root, "prober", json!({"port": port})).await
        };
        tokio::join!(server, prober)
    });
    let (served, probed) = (data(&served), data(&probed));
    assert_errno(
        &probed["v4"],
        libc::ECONNREFUSED,
        "another call's 127.0.0.1",
    );
    assert_errno(&probed["v6"], libc::ECONNREFUSED, "another call's ::1");
    assert_eq!(
        served["accepted"], 0,
        "the server saw another call: {served}"
    );
}

/// The host and a call cannot reach each other's loopback: the host's connection to the
/// port the call listens on is refused (nothing listens there on the host's loopback),
/// and the call's connection to the host's listener is refused too (its loopback is its
/// own). Neither listener sees a connection.
#[test]
fn host_and_call_cannot_reach_each_others_loopback() {
    if !namespaces_available("host_and_call_cannot_reach_each_others_loopback") {
        return;
    }
    let root = SkillRoot::new();
    loopback_skill(
        &root,
        "server",
        r#"
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", args["port"]))
        s.listen(8)
        s.settimeout(0.2)
        def host_tcp():
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.settimeout(3)
            c.connect(("127.0.0.1", args["host_port"]))
        to_host = attempt(host_tcp)
        accepted, until = 0, time.time() + 3
        while time.time() < until:
            try:
                s.accept()[0].close()
                accepted += 1
            except socket.timeout:
                pass
        reply({"accepted": accepted, "to_host": to_host})
        "#,
    );
    let host = TcpListener::bind("127.0.0.1:0").unwrap();
    host.set_nonblocking(true).unwrap();
    let host_port = host.local_addr().unwrap().port();
    let port = free_port();
    let sandbox = sandbox();
    let (r, from_host) = runtime().block_on(async {
        let call = call_of(
            &sandbox,
            &root,
            "server",
            json!({"port": port, "host_port": host_port}),
        );
        let knock = async {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            tokio::task::spawn_blocking(move || {
                TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2))
            })
            .await
            .unwrap()
        };
        tokio::join!(call, knock)
    });
    let out = data(&r);
    let refused = from_host.expect_err("the host reached the call's server");
    assert_eq!(
        refused.raw_os_error(),
        Some(libc::ECONNREFUSED),
        "{refused}"
    );
    assert_eq!(out["accepted"], 0, "{out}");
    assert_errno(&out["to_host"], libc::ECONNREFUSED, "the host's loopback");
    assert!(
        host.accept().is_err(),
        "the call reached the host's listener"
    );
}

/// A call with a loopback and no network reaches nothing else: no route out, no proxy,
/// no name resolution, the socket families the network filter keeps closed; and of
/// `/etc` it reads the files that name `localhost` only.
#[test]
fn loopback_call_reaches_nothing_outside_its_namespace() {
    if !namespaces_available("loopback_call_reaches_nothing_outside_its_namespace") {
        return;
    }
    let root = SkillRoot::new();
    loopback_skill(
        &root,
        "outside",
        r#"
        def tcp(host, port):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(3)
            s.connect((host, port))
        def udp(host, port):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b"out", (host, port))
        reply({
            "documentation_net": attempt(lambda: tcp("192.0.2.1", 80)),
            "udp_out": attempt(lambda: udp("192.0.2.1", 53)),
            "proxy_port": attempt(lambda: tcp("127.0.0.1", 3128)),
            "dns": attempt(lambda: socket.getaddrinfo("example.com", 443)),
            "packet": attempt(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW)),
            "raw": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
            "netlink": attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)),
            "unix": attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
            "proxy_env": os.environ.get("HTTP_PROXY"),
            "hosts": attempt(lambda: len(open("/etc/hosts").read())),
            "passwd": attempt(lambda: open("/etc/passwd").read()),
            "resolv": attempt(lambda: open("/etc/resolv.conf").read()),
        })
        "#,
    );
    let out = data(&runtime().block_on(call_of(&sandbox(), &root, "outside", json!({}))));
    // `localhost` resolves from /etc/hosts; the rest of /etc stays closed.
    assert_eq!(out["hosts"]["ok"], true, "{out}");
    assert_errno(&out["passwd"], libc::EACCES, "/etc/passwd");
    if std::path::Path::new("/etc/resolv.conf").exists() {
        assert_errno(&out["resolv"], libc::EACCES, "/etc/resolv.conf");
    }
    assert_errno(&out["documentation_net"], libc::ENETUNREACH, "TCP out");
    assert_errno(&out["udp_out"], libc::ENETUNREACH, "UDP out");
    assert_errno(&out["proxy_port"], libc::ECONNREFUSED, "no egress proxy");
    assert_eq!(out["dns"]["ok"], false, "{out}");
    for family in ["packet", "raw", "netlink", "unix"] {
        assert_errno(&out[family], libc::EPERM, family);
    }
    assert_eq!(out["proxy_env"], Value::Null, "{out}");
}
