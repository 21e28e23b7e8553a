//! Which IP addresses the fetch proxy refuses to connect to: everything that is not the
//! public internet (loopback, private, link-local and metadata, CGNAT, multicast,
//! unspecified, reserved), including IPv6 forms that carry such an IPv4 address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `ip` is not a public address, or `None` when the proxy may connect to it.
pub(crate) fn forbidden_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) {
        return Some("the cloud metadata address");
    }
    let reason = match (a, b, c) {
        (0, _, _) if ip.is_unspecified() => "unspecified",
        (0, _, _) => "\"this network\" (0.0.0.0/8)",
        (127, _, _) => "loopback",
        (10, _, _) => "private (10.0.0.0/8)",
        (172, 16..=31, _) => "private (172.16.0.0/12)",
        (192, 168, _) => "private (192.168.0.0/16)",
        (169, 254, _) => "link-local (169.254.0.0/16)",
        (100, 64..=127, _) => "carrier-grade NAT (100.64.0.0/10)",
        (192, 0, 0) => "IETF protocol assignments (192.0.0.0/24)",
        (198, 18..=19, _) => "benchmarking (198.18.0.0/15)",
        (224..=239, _, _) => "multicast",
        (240..=255, _, _) => "reserved or broadcast (240.0.0.0/4)",
        _ => return None,
    };
    Some(reason)
}

fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    // IPv6 forms that embed an IPv4 address are judged by that address.
    if let Some(v4) = embedded_v4(ip) {
        return v4_reason(v4).map(|_| "an IPv6 form of a non-public IPv4 address");
    }
    let first = ip.segments()[0];
    let reason = match first {
        0xfc00..=0xfdff => "unique local (fc00::/7)",
        0xfe80..=0xfebf => "link-local (fe80::/10)",
        0xfec0..=0xfeff => "site-local (fec0::/10)",
        0xff00..=0xffff => "multicast",
        // ::/8 other than the forms above is reserved.
        0x0000..=0x00ff => "reserved (::/8)",
        _ => return None,
    };
    Some(reason)
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
/// (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) or 6to4 (`2002:AABB:CCDD::`) address.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let o = ip.octets();
    let low = || Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match ip.segments() {
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0, 0, _, _] => Some(low()),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low()),
        // Segments 1 and 2 (octets 2..6) carry the address.
        [0x2002, ..] => Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(s: &str) -> bool {
        forbidden_reason(s.parse().unwrap()).is_some()
    }

    #[test]
    fn refuses_non_public_ipv4() {
        for ip in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "240.0.0.1",
        ] {
            assert!(refused(ip), "{ip} must be refused");
        }
    }

    #[test]
    fn allows_public_ipv4() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "93.184.216.34",
        ] {
            assert!(!refused(ip), "{ip} is public");
        }
    }

    #[test]
    fn refuses_non_public_ipv6() {
        for ip in [
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
        ] {
            assert!(refused(ip), "{ip} must be refused");
        }
    }

    #[test]
    fn allows_public_ipv6() {
        for ip in [
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "::ffff:1.1.1.1",
            "64:ff9b::8.8.8.8",
            "2002:808:808::",
        ] {
            assert!(!refused(ip), "{ip} is public");
        }
    }

    #[test]
    fn metadata_address_is_named() {
        assert_eq!(
            forbidden_reason("169.254.169.254".parse().unwrap()),
            Some("the cloud metadata address")
        );
    }
}
