//! The name server of a network call's namespace: the program's lookups, sent to whatever
//! nameserver `/etc/resolv.conf` names, land on the namespace's UDP port 53
//! ([`crate::sandbox::netns`]) and are answered here, never sent on. Every name gets an
//! address of its own from 198.18.0.0/15 (the range kept for benchmarks, never a real
//! host), the same one for the whole call; a connection to that address is carried to the
//! egress proxy by that name ([`super::transparent`]), where the core judges the host as
//! for any proxied request. IPv6 questions get no address (the namespace has no IPv6 way
//! out), other types an empty answer. No lookup leaves the executor, so a program cannot
//! reach anything, nor say anything to anyone, through DNS.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::{IoSlice, IoSliceMut};
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::sync::Mutex;

use nix::sys::socket::{
    recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags, SockaddrIn,
};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// The first address handed out: 198.18.0.1.
const FIRST_ADDRESS: u32 = u32::from_be_bytes([198, 18, 0, 1]);
/// Most names one call may look up (the range holds 131,070); later ones fail (SERVFAIL).
pub const MAX_NAMES: usize = 4096;
/// Time to live of an answer, in seconds: the whole call.
const TTL_SECONDS: u32 = 3600;
/// Longest name (RFC 1035).
const MAX_NAME_BYTES: usize = 255;

const TYPE_A: u16 = 1;
const CLASS_IN: u16 = 1;
const RCODE_NO_ERROR: u16 = 0;
const RCODE_FORMAT_ERROR: u16 = 1;
const RCODE_SERVER_FAILURE: u16 = 2;
const RCODE_NOT_IMPLEMENTED: u16 = 4;

/// The names one call looked up, and the address each got.
#[derive(Debug, Default)]
pub struct Names {
    by_name: HashMap<String, Ipv4Addr>,
    by_address: HashMap<Ipv4Addr, String>,
}

impl Names {
    /// The address of `name` (lower case, no trailing dot), given on first ask; `None`
    /// past [`MAX_NAMES`].
    pub fn address_of(&mut self, name: &str) -> Option<Ipv4Addr> {
        if let Some(address) = self.by_name.get(name) {
            return Some(*address);
        }
        if self.by_name.len() >= MAX_NAMES {
            return None;
        }
        let offset = u32::try_from(self.by_name.len()).ok()?;
        let address = Ipv4Addr::from(FIRST_ADDRESS + offset);
        self.by_name.insert(name.to_string(), address);
        self.by_address.insert(address, name.to_string());
        Some(address)
    }

    /// The name that was given `address`.
    pub fn name_of(&self, address: Ipv4Addr) -> Option<&str> {
        self.by_address.get(&address).map(String::as_str)
    }
}

/// The answer to one DNS message, `None` when it is not a question at all (dropped).
pub fn answer(query: &[u8], names: &Mutex<Names>) -> Option<Vec<u8>> {
    if query.len() < 12 || query[2] & 0x80 != 0 {
        return None; // too short for a header, or a response
    }
    let opcode = (query[2] >> 3) & 0x0f;
    let questions = u16::from_be_bytes([query[4], query[5]]);
    if opcode != 0 {
        return Some(reply(query, 12, RCODE_NOT_IMPLEMENTED, None));
    }
    let Some((name, end)) = (questions == 1).then(|| read_name(query)).flatten() else {
        return Some(reply(query, 12, RCODE_FORMAT_ERROR, None));
    };
    let kind = u16::from_be_bytes([query[end], query[end + 1]]);
    let class = u16::from_be_bytes([query[end + 2], query[end + 3]]);
    let question_end = end + 4;
    if class != CLASS_IN || kind != TYPE_A {
        // AAAA and every other type: the name exists, with no such record.
        return Some(reply(query, question_end, RCODE_NO_ERROR, None));
    }
    let address = names.lock().ok()?.address_of(&name);
    match address {
        Some(address) => Some(reply(query, question_end, RCODE_NO_ERROR, Some(address))),
        None => Some(reply(query, question_end, RCODE_SERVER_FAILURE, None)),
    }
}

/// The question's name, lower case without the trailing dot, and where its type starts;
/// `None` when it is malformed or its type and class are cut off.
fn read_name(query: &[u8]) -> Option<(String, usize)> {
    let mut at = 12;
    let mut labels: Vec<String> = Vec::new();
    loop {
        let len = usize::from(*query.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            return None; // a compression pointer, or a label too long: not in a question
        }
        let label = query.get(at..at + len)?;
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        at += len;
        if at - 12 > MAX_NAME_BYTES {
            return None;
        }
    }
    query.get(at..at + 4)?;
    Some((labels.join("."), at))
}

/// A response to `query` whose question ends at `question_end`: the same id and question,
/// `rcode`, and one A record when `address` is given.
fn reply(query: &[u8], question_end: usize, rcode: u16, address: Option<Ipv4Addr>) -> Vec<u8> {
    let mut out = Vec::with_capacity(question_end + 16);
    out.extend_from_slice(&query[..2]); // id
                                        // QR, the question's opcode and RD, RA, the code.
    let flags = 0x8000 | (u16::from(query[2] & 0x79) << 8) | 0x0080 | rcode;
    out.extend_from_slice(&flags.to_be_bytes());
    let has_question = u16::from(question_end > 12);
    out.extend_from_slice(&has_question.to_be_bytes());
    out.extend_from_slice(&u16::from(address.is_some()).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]); // no authority, no additional
    out.extend_from_slice(&query[12..question_end]);
    if let Some(address) = address {
        out.extend_from_slice(&[0xc0, 12]); // the question's name
        out.extend_from_slice(&TYPE_A.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&TTL_SECONDS.to_be_bytes());
        out.extend_from_slice(&4u16.to_be_bytes());
        out.extend_from_slice(&address.octets());
    }
    out
}

/// Answers the questions sent to `socket` until dropped, each from the address it was
/// sent to (`IP_PKTINFO`: a resolver that connected its socket to the nameserver's address
/// takes only an answer from there). Never returns.
pub async fn serve(socket: &UdpSocket, names: &Mutex<Names>) -> Infallible {
    let mut buf = [0u8; 1500];
    loop {
        let received = socket
            .async_io(Interest::READABLE, || receive(socket, &mut buf))
            .await;
        let (len, from, to) = match received {
            Ok(got) => got,
            Err(e) => {
                tracing::debug!(error = %e, "reading a call's name lookup failed");
                continue;
            }
        };
        let Some(reply) = answer(&buf[..len], names) else {
            continue;
        };
        let sent = socket
            .async_io(Interest::WRITABLE, || send(socket, &reply, &from, to))
            .await;
        if let Err(e) = sent {
            tracing::debug!(error = %e, "answering a call's name lookup failed");
        }
    }
}

/// One datagram: its length, sender and the address it was sent to.
fn receive(socket: &UdpSocket, buf: &mut [u8]) -> std::io::Result<(usize, SockaddrIn, Ipv4Addr)> {
    let mut space = nix::cmsg_space!(libc::in_pktinfo);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<SockaddrIn>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::empty(),
    )?;
    let mut to = Ipv4Addr::UNSPECIFIED;
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::Ipv4PacketInfo(info) = cmsg {
            to = Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr));
        }
    }
    let from = msg
        .address
        .ok_or_else(|| std::io::Error::other("a datagram with no sender"))?;
    Ok((msg.bytes, from, to))
}

/// Sends `reply` to `to_peer` from `from_address`.
fn send(
    socket: &UdpSocket,
    reply: &[u8],
    to_peer: &SockaddrIn,
    from_address: Ipv4Addr,
) -> std::io::Result<()> {
    let info = libc::in_pktinfo {
        ipi_ifindex: 0,
        ipi_spec_dst: libc::in_addr {
            s_addr: u32::from(from_address).to_be(),
        },
        ipi_addr: libc::in_addr { s_addr: 0 },
    };
    let cmsgs = [ControlMessage::Ipv4PacketInfo(&info)];
    sendmsg(
        socket.as_raw_fd(),
        &[IoSlice::new(reply)],
        &cmsgs,
        MsgFlags::empty(),
        Some(to_peer),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPE_AAAA: u16 = 28;

    /// A question for `name` of `kind`, id 0x1234, recursion desired.
    fn question(name: &str, kind: u16) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            q.push(u8::try_from(label.len()).unwrap());
            q.extend_from_slice(label.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&kind.to_be_bytes());
        q.extend_from_slice(&CLASS_IN.to_be_bytes());
        q
    }

    fn rcode(reply: &[u8]) -> u16 {
        u16::from(reply[3] & 0x0f)
    }

    #[test]
    fn a_name_gets_one_address_for_the_call_and_it_maps_back() {
        let names = Mutex::new(Names::default());
        let q = question("API.Example.com", TYPE_A);
        let r = answer(&q, &names).unwrap();
        assert_eq!(&r[..2], &[0x12, 0x34], "same id");
        assert_eq!(r[2] & 0x80, 0x80, "a response");
        assert_eq!(rcode(&r), 0);
        assert_eq!(u16::from_be_bytes([r[6], r[7]]), 1, "one answer");
        assert_eq!(&r[r.len() - 4..], &[198, 18, 0, 1]);
        let again = answer(&question("api.example.com", TYPE_A), &names).unwrap();
        assert_eq!(&again[again.len() - 4..], &[198, 18, 0, 1]);
        let other = answer(&question("other.test", TYPE_A), &names).unwrap();
        assert_eq!(&other[other.len() - 4..], &[198, 18, 0, 2]);
        let n = names.lock().unwrap();
        assert_eq!(
            n.name_of(Ipv4Addr::new(198, 18, 0, 1)),
            Some("api.example.com")
        );
        assert_eq!(n.name_of(Ipv4Addr::new(198, 18, 0, 9)), None);
    }

    #[test]
    fn ipv6_and_other_types_get_an_empty_answer() {
        let names = Mutex::new(Names::default());
        for kind in [TYPE_AAAA, 16, 15] {
            let r = answer(&question("api.example.com", kind), &names).unwrap();
            assert_eq!(rcode(&r), 0);
            assert_eq!(
                u16::from_be_bytes([r[6], r[7]]),
                0,
                "no answer for type {kind}"
            );
        }
        assert!(names.lock().unwrap().by_name.is_empty());
    }

    #[test]
    fn malformed_questions_are_refused_and_responses_dropped() {
        let names = Mutex::new(Names::default());
        assert!(answer(&[0u8; 5], &names).is_none(), "shorter than a header");
        let mut response = question("a.test", TYPE_A);
        response[2] |= 0x80;
        assert!(
            answer(&response, &names).is_none(),
            "a response is not answered"
        );
        let mut cut = question("a.test", TYPE_A);
        cut.truncate(cut.len() - 3);
        assert_eq!(rcode(&answer(&cut, &names).unwrap()), RCODE_FORMAT_ERROR);
        let mut pointer = question("a.test", TYPE_A);
        pointer[12] = 0xc0;
        assert_eq!(
            rcode(&answer(&pointer, &names).unwrap()),
            RCODE_FORMAT_ERROR
        );
        let mut two = question("a.test", TYPE_A);
        two[5] = 2;
        assert_eq!(rcode(&answer(&two, &names).unwrap()), RCODE_FORMAT_ERROR);
        let mut update = question("a.test", TYPE_A);
        update[2] = 5 << 3;
        assert_eq!(
            rcode(&answer(&update, &names).unwrap()),
            RCODE_NOT_IMPLEMENTED
        );
    }

    #[test]
    fn names_past_the_limit_fail() {
        let mut names = Names::default();
        for i in 0..MAX_NAMES {
            assert!(names.address_of(&format!("n{i}.test")).is_some());
        }
        assert_eq!(names.address_of("one-more.test"), None);
        assert!(
            names.address_of("n0.test").is_some(),
            "a known name still answers"
        );
    }
}
