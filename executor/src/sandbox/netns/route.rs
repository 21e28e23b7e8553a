//! One route for a network call's namespace: `local 0.0.0.0/0 dev lo` in the local table,
//! so that every IPv4 address is the namespace's own. A program's connection to any
//! address then lands on the namespace's loopback, where the executor's listeners take it
//! to the egress proxy ([`crate::egress`]); a port nobody listens on answers refused. The
//! namespace still has no interface but `lo`: nothing leaves it.
//!
//! One `RTM_NEWROUTE` request on a `NETLINK_ROUTE` socket, written here (about forty
//! lines) rather than by a netlink crate: the executor needs this one message and its
//! acknowledgement, nothing else of rtnetlink.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `struct nlmsghdr`: length, type, flags, sequence, port id.
const NLMSG_HEADER_LEN: usize = 16;
/// `struct rtmsg`: family, dst_len, src_len, tos, table, protocol, scope, type, flags (u32).
const RTMSG_LEN: usize = 12;
/// One `rtattr` holding a u32: length and type (u16 each), then the value.
const RTA_U32_LEN: usize = 8;
/// `lo`'s index: the first interface of every network namespace.
const LOOPBACK_INDEX: u32 = 1;

/// Adds `local 0.0.0.0/0 dev lo table local` to the calling thread's network namespace.
pub fn all_addresses_local() -> io::Result<()> {
    // SAFETY: socket takes integers; the new fd is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nothing else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let request = new_route_request();
    // SAFETY: sends `request.len()` bytes of a live buffer to the kernel (the netlink
    // socket's default destination).
    let sent = unsafe { libc::send(sock.as_raw_fd(), request.as_ptr().cast(), request.len(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut answer = [0u8; 256];
    // SAFETY: receives into a live buffer of that length.
    let got = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            answer.as_mut_ptr().cast(),
            answer.len(),
            0,
        )
    };
    let got = usize::try_from(got).map_err(|_| io::Error::last_os_error())?;
    acknowledged(&answer[..got])
}

/// The request's bytes, in the host's byte order as netlink wants.
fn new_route_request() -> Vec<u8> {
    let len = NLMSG_HEADER_LEN + RTMSG_LEN + RTA_U32_LEN;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&u32::try_from(len).unwrap_or(0).to_ne_bytes());
    m.extend_from_slice(&libc::RTM_NEWROUTE.to_ne_bytes());
    let flags = libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_CREATE | libc::NLM_F_EXCL;
    m.extend_from_slice(&u16::try_from(flags).unwrap_or(0).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    m.push(u8::try_from(libc::AF_INET).unwrap_or(0)); // family
    m.push(0); // dst_len: 0.0.0.0/0
    m.push(0); // src_len
    m.push(0); // tos
    m.push(libc::RT_TABLE_LOCAL);
    m.push(libc::RTPROT_BOOT);
    m.push(libc::RT_SCOPE_HOST);
    m.push(libc::RTN_LOCAL);
    m.extend_from_slice(&0u32.to_ne_bytes()); // flags
    m.extend_from_slice(&u16::try_from(RTA_U32_LEN).unwrap_or(0).to_ne_bytes());
    m.extend_from_slice(&libc::RTA_OIF.to_ne_bytes());
    m.extend_from_slice(&LOOPBACK_INDEX.to_ne_bytes());
    m
}

/// Reads the kernel's answer: an `NLMSG_ERROR` whose error is 0 is the acknowledgement.
fn acknowledged(answer: &[u8]) -> io::Result<()> {
    let kind = answer.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let error = answer
        .get(NLMSG_HEADER_LEN..NLMSG_HEADER_LEN + 4)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match (kind, error) {
        (Some(k), Some(0)) if i32::from(k) == libc::NLMSG_ERROR => Ok(()),
        (Some(k), Some(e)) if i32::from(k) == libc::NLMSG_ERROR => {
            Err(io::Error::from_raw_os_error(-e))
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the kernel's answer to RTM_NEWROUTE is not an acknowledgement",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_one_whole_netlink_message() {
        let m = new_route_request();
        assert_eq!(m.len(), NLMSG_HEADER_LEN + RTMSG_LEN + RTA_U32_LEN);
        assert_eq!(
            u32::from_ne_bytes([m[0], m[1], m[2], m[3]]) as usize,
            m.len()
        );
        assert_eq!(m[NLMSG_HEADER_LEN + 7], libc::RTN_LOCAL);
    }

    #[test]
    fn an_error_answer_is_the_kernels_errno() {
        let mut answer = vec![0u8; 36];
        answer[4..6].copy_from_slice(&u16::try_from(libc::NLMSG_ERROR).unwrap().to_ne_bytes());
        answer[16..20].copy_from_slice(&(-libc::EPERM).to_ne_bytes());
        let e = acknowledged(&answer).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM));
        answer[16..20].copy_from_slice(&0i32.to_ne_bytes());
        assert!(acknowledged(&answer).is_ok());
    }
}
