//! The network call's allow list (`tool_network_allow`): `tool_allow` plus exactly the
//! rules of `policies/seccomp/tool-network.json`, and what those let through.
use serde_json::Value;

use super::bpf_eval::{run, Data};
use super::*;

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;

/// What the network rules may name: the rest of the deny list stays closed. `listen` and
/// `accept` serve the call's own loopback (its namespace is its own: nothing outside the
/// call reaches a port there).
const NETWORK_ONLY: &[&str] = &["socket", "connect", "bind", "listen", "accept", "accept4"];

fn socket(filters: &ToolFilters, domain: i32, kind: i32, protocol: i32) -> bool {
    let data = Data {
        nr: u32::try_from(libc::SYS_socket).unwrap(),
        arch: AUDIT_ARCH_X86_64,
        args: [domain, kind, protocol, 0, 0, 0].map(|a| u64::try_from(a).unwrap()),
    };
    run(&filters.allow, &data) == SECCOMP_RET_ALLOW
}

#[test]
fn network_rules_name_only_sockets_of_the_calls_own_loopback() {
    let added: Value = serde_json::from_str(NETWORK_POLICY_JSON).unwrap();
    let rules = added[NETWORK_FILTER]["filter"].as_array().unwrap();
    for rule in rules {
        let name = rule["syscall"].as_str().unwrap();
        assert!(NETWORK_ONLY.contains(&name), "{name} is not a network rule");
        assert!(
            !rule["comment"].as_str().unwrap_or_default().is_empty(),
            "{rule}"
        );
    }
    let policy = network_policy().unwrap();
    let tool: Value = serde_json::from_str(POLICY_JSON).unwrap();
    let all = policy[NETWORK_FILTER]["filter"].as_array().unwrap();
    assert_eq!(
        all.len(),
        tool[ALLOW_FILTER]["filter"].as_array().unwrap().len() + rules.len()
    );
    for name in [
        "unshare",
        "setns",
        "socketpair_with_netlink",
        "sendmmsg_raw",
    ] {
        assert!(
            !all.iter().any(|r| r["syscall"] == name),
            "{name} must stay denied to network calls"
        );
    }
}

#[test]
fn only_the_unix_variant_allows_unix_sockets_and_still_no_netlink_or_raw() {
    let network = compile_network().unwrap();
    let unix = compile_unix().unwrap();
    let cloexec = libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    for kind in [libc::SOCK_STREAM, libc::SOCK_DGRAM, libc::SOCK_SEQPACKET] {
        assert!(socket(&unix, libc::AF_UNIX, kind, 0), "unix {kind}");
        assert!(
            socket(&unix, libc::AF_UNIX, kind | cloexec, 0),
            "unix {kind}"
        );
        assert!(!socket(&network, libc::AF_UNIX, kind, 0), "network {kind}");
    }
    // What the network variant allows, the unix one too; nothing else is added.
    assert!(socket(&unix, libc::AF_INET, libc::SOCK_STREAM, 0));
    assert!(!socket(&unix, libc::AF_NETLINK, libc::SOCK_RAW, 0));
    assert!(!socket(&unix, libc::AF_PACKET, libc::SOCK_RAW, 0));
    assert!(!socket(&unix, libc::AF_INET, libc::SOCK_RAW, 1));
    assert!(
        !socket(&unix, libc::AF_UNIX, libc::SOCK_STREAM, 1),
        "a protocol"
    );
}

#[test]
fn network_filter_allows_only_tcp_and_udp_sockets_over_ip() {
    let filters = compile_network().unwrap();
    let cloexec = libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    for domain in [libc::AF_INET, libc::AF_INET6] {
        assert!(socket(&filters, domain, libc::SOCK_STREAM, 0));
        assert!(socket(&filters, domain, libc::SOCK_STREAM | cloexec, 6));
        assert!(socket(&filters, domain, libc::SOCK_DGRAM, 0));
        assert!(socket(&filters, domain, libc::SOCK_DGRAM | cloexec, 17));
        assert!(!socket(&filters, domain, libc::SOCK_RAW, 0), "raw");
        assert!(!socket(&filters, domain, libc::SOCK_RAW, 1), "raw ICMP");
        assert!(!socket(&filters, domain, libc::SOCK_DGRAM, 1), "ping");
        assert!(!socket(&filters, domain, libc::SOCK_STREAM, 132), "SCTP");
        assert!(!socket(&filters, domain, libc::SOCK_STREAM, 262), "MPTCP");
        assert!(!socket(&filters, domain, libc::SOCK_SEQPACKET, 0));
    }
    for domain in [
        libc::AF_UNIX,
        libc::AF_NETLINK,
        libc::AF_PACKET,
        libc::AF_VSOCK,
    ] {
        for kind in [libc::SOCK_STREAM, libc::SOCK_DGRAM, libc::SOCK_RAW] {
            assert!(!socket(&filters, domain, kind, 0), "domain {domain}");
        }
    }
    // The plain tool filter allows no socket at all.
    let tool = compile().unwrap();
    assert!(!socket(&tool, libc::AF_INET, libc::SOCK_STREAM, 0));
}

#[test]
fn network_search_tree_decides_as_the_linear_chain() {
    let policy = network_policy().unwrap();
    let linear = seccompiler::compile_from_json(
        policy.to_string().as_bytes(),
        seccompiler::TargetArch::x86_64,
    )
    .unwrap()
    .remove(NETWORK_FILTER)
    .unwrap();
    let tree = compile_network().unwrap().allow;
    let values = [0u64, 1, 2, 6, 10, 17, 0x80001, 0x801, 3, 16, 17, u64::MAX];
    for nr in 0..=460u32 {
        for index in 0..3 {
            for &v in &values {
                let mut args = [0u64; 6];
                args[index] = v;
                args[(index + 1) % 3] = 1;
                let data = Data {
                    nr,
                    arch: AUDIT_ARCH_X86_64,
                    args,
                };
                assert_eq!(run(&tree, &data), run(&linear, &data), "{nr} {args:x?}");
            }
        }
    }
}

#[test]
fn mount_is_refused_but_for_a_plain_bind_and_a_propagation_change() {
    use super::bpf_eval::{run, Data};
    const ALLOW: u32 = 0x7fff_0000;
    // The executor's own filter (`serve`'s, compiled as self_filter.rs does).
    let json = include_str!("../../../../policies/seccomp/executor.json");
    let mut programs =
        seccompiler::compile_from_json(json.as_bytes(), seccompiler::TargetArch::x86_64).unwrap();
    let program = programs.remove("executor_deny").unwrap();
    let mount = |flags: libc::c_ulong| {
        let data = Data {
            nr: u32::try_from(libc::SYS_mount).unwrap(),
            arch: 0xc000_003e,
            args: [0, 0, 0, flags, 0, 0],
        };
        run(&program, &data) == ALLOW
    };
    assert!(mount(libc::MS_BIND), "the call's /tmp and the empty /run");
    assert!(mount(libc::MS_REC | libc::MS_PRIVATE), "no propagation");
    for refused in [
        0,                                                  // a new file system
        libc::MS_REMOUNT,                                   // the root made writable
        libc::MS_REMOUNT | libc::MS_BIND,                   // a bind made writable
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY, // any remount
        libc::MS_BIND | libc::MS_REC,                       // a whole tree
        libc::MS_MOVE,                                      // a mount moved away
        libc::MS_BIND | (1 << 32),                          // high bits are flags too
        libc::MS_REC | libc::MS_SHARED,                     // propagation to the host
    ] {
        assert!(!mount(refused), "flags {refused:#x}");
    }
}
