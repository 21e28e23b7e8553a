//! A network namespace per network call (docs/sandbox.md): the only thing outside the call
//! a tool of a skill that declares `permissions.network` can reach is the proxy port on its
//! own loopback. The loopback is the call's own: its programs may listen there and connect
//! to each other (a server and the client driving it), and nothing outside the call
//! reaches it. A skill without network that asks for a loopback (`execution.loopback`)
//! gets the same namespace without the proxy ([`Proxy::None`]).
//!
//! [`create`] makes one on a thread of its own, never a runtime's worker (a thread that
//! unshares its network namespace stays in it): `unshare(CLONE_NEWNET)`, `lo` brought up
//! (`SIOCSIFFLAGS`, no `ip` binary), a TCP listener bound on `127.0.0.1:`[`PROXY_PORT`]
//! when the call has the proxy, and `/proc/thread-self/ns/net` opened; the fds come back
//! and the thread ends. A
//! socket stays in the namespace it was created in, so the executor serves the listener
//! from any thread ([`crate::egress`]), and the tool's process joins the namespace by the
//! fd (`setns` between clone and exec, [`super::child::ChildSetup::netns`]). The namespace
//! has no other interface: its loopback is not the host's, and nothing leaves it. It goes
//! away with the last of its fds, its listeners and its processes.
//!
//! A network call's namespace also takes the connections of programs that ignore the proxy
//! variables (Node's `fetch`, Go, Java, a raw socket): every IPv4 address is made local
//! ([`route`]), a TCP listener is bound on `0.0.0.0` at each port the skill's hosts name
//! (and 80 and 443), and a UDP socket on `0.0.0.0:53` answers the program's name lookups
//! (whatever nameserver `/etc/resolv.conf` names lands there). [`crate::egress`] carries
//! those connections to the same proxy, by the name the lookup gave.

mod route;

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The port of the egress proxy on a network call's loopback. Every call has a namespace
/// of its own, so one constant serves all of them.
pub const PROXY_PORT: u16 = 3128;

/// The proxy URL a network call's environment names ([`super::env::proxy`]).
pub const PROXY_URL: &str = "http://127.0.0.1:3128";

/// What the executor can tell when a network call cannot have its namespace.
pub const UNAVAILABLE: &str = "the executor cannot create network namespaces (it needs CAP_SYS_ADMIN and CAP_NET_ADMIN: run it as root, or in a container with --cap-add SYS_ADMIN --cap-add NET_ADMIN and a seccomp profile that allows unshare); programs of skills that declare network get no network of their own (socket() stays denied), the fetch capability still works";

/// Why a call's network namespace could not be made.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The thread that makes it could not start.
    #[error("cannot start the thread that makes a call's network namespace: {0}")]
    Thread(io::Error),
    /// The kernel refused a new network namespace (no CAP_SYS_ADMIN, or a seccomp
    /// profile of the container).
    #[error("unshare(CLONE_NEWNET) failed: {0}")]
    Unshare(io::Error),
    /// The loopback interface could not be brought up (no CAP_NET_ADMIN).
    #[error("bringing up lo in a call's network namespace failed: {0}")]
    Loopback(io::Error),
    /// A port of the namespace could not be bound.
    #[error("binding port {0} in a call's network namespace failed: {1}")]
    Listen(u16, io::Error),
    /// Every address could not be made the namespace's own.
    #[error("adding the route local 0.0.0.0/0 dev lo in a call's network namespace failed: {0}")]
    Route(io::Error),
    /// `/proc/thread-self/ns/net` could not be opened.
    #[error("opening /proc/thread-self/ns/net failed: {0}")]
    Open(io::Error),
    /// The thread ended without answering.
    #[error("the thread that makes a call's network namespace ended without an answer")]
    Lost,
}

/// Whether a call's namespace has the egress proxy's listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proxy {
    /// `127.0.0.1:`[`PROXY_PORT`], relayed to the core's egress proxy: a network call.
    Egress,
    /// Nothing but the loopback: a call that asked for a loopback of its own only.
    None,
}

/// Ports whose connections a network call's namespace always takes to the proxy, whatever
/// its skill's hosts name: plain HTTP and HTTPS.
pub const TRANSPARENT_PORTS: [u16; 2] = [80, 443];

/// The port of the name server in a network call's namespace.
pub const RESOLVER_PORT: u16 = 53;

/// A call's namespace: its fd, for the tool's process to join, and the listeners inside
/// it, each non-blocking (for tokio's `from_std`).
#[derive(Debug)]
pub struct CallNetwork {
    /// `/proc/thread-self/ns/net` of the namespace.
    pub namespace: OwnedFd,
    /// `127.0.0.1:`[`PROXY_PORT`] in the namespace; `None` without the proxy.
    pub listener: Option<TcpListener>,
    /// `0.0.0.0:<port>` for each port of the skill's hosts (and [`TRANSPARENT_PORTS`]):
    /// connections of programs that do not use the proxy. Empty without the proxy.
    pub transparent: Vec<TcpListener>,
    /// `0.0.0.0:`[`RESOLVER_PORT`] over UDP, with `IP_PKTINFO` on (an answer goes out from
    /// the address the question was sent to); `None` without the proxy.
    pub resolver: Option<UdpSocket>,
}

/// Makes a namespace on a new thread and waits for it (blocking the calling thread);
/// with the proxy, connections to `ports` are taken too (see the module docs).
pub fn create(proxy: Proxy, ports: &[u16]) -> Result<CallNetwork, NetnsError> {
    let ports = ports.to_vec();
    std::thread::Builder::new()
        .name("call-netns".into())
        .spawn(move || make_here(proxy, &ports))
        .map_err(NetnsError::Thread)?
        .join()
        .map_err(|_| NetnsError::Lost)?
}

/// [`create`] for a task: the runtime's worker runs other tasks while the thread works.
pub async fn create_async(proxy: Proxy, ports: &[u16]) -> Result<CallNetwork, NetnsError> {
    let ports = ports.to_vec();
    let (answer, answered) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("call-netns".into())
        .spawn(move || drop(answer.send(make_here(proxy, &ports))))
        .map_err(NetnsError::Thread)?;
    answered.await.map_err(|_| NetnsError::Lost)?
}

/// Whether this process can make a call's namespace: makes one and drops it. `Ok(true)`
/// when that namespace also takes the connections of programs that ignore the proxy
/// (its name server and listeners below 1024 could be bound), `Ok(false)` when it is the
/// proxy-only one.
pub fn probe() -> Result<bool, NetnsError> {
    create(Proxy::Egress, &[]).map(|made| made.resolver.is_some())
}

/// The steps, on the calling thread, which stays in the new namespace: only for a thread
/// that ends right after.
fn make_here(proxy: Proxy, ports: &[u16]) -> Result<CallNetwork, NetnsError> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| NetnsError::Unshare(e.into()))?;
    loopback_up().map_err(NetnsError::Loopback)?;
    let (listener, transparent, resolver) = match proxy {
        Proxy::Egress => {
            let listener = listen(Ipv4Addr::LOCALHOST, PROXY_PORT)?;
            let (transparent, resolver) = match transparent_parts(ports) {
                Ok((transparent, resolver)) => (transparent, Some(resolver)),
                Err(e) => {
                    static SAID: std::sync::Once = std::sync::Once::new();
                    SAID.call_once(|| tracing::warn!(error = %e, "{NO_TRANSPARENT}"));
                    (Vec::new(), None)
                }
            };
            (Some(listener), transparent, resolver)
        }
        Proxy::None => (None, Vec::new(), None),
    };
    // SAFETY: a static NUL-terminated path; the new fd is owned below.
    let fd = unsafe {
        libc::open(
            c"/proc/thread-self/ns/net".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(NetnsError::Open(io::Error::last_os_error()));
    }
    // SAFETY: just opened, owned by nothing else.
    let namespace = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(CallNetwork {
        namespace,
        listener,
        transparent,
        resolver,
    })
}

/// What the executor says once when a call's namespace cannot take the connections of
/// programs that ignore the proxy: those get no network, as before, and the others keep
/// the proxy.
pub const NO_TRANSPARENT: &str = "programs that ignore the proxy variables get no network: a call's namespace cannot take their connections (its name server and listeners need ports below 1024: give the executor CAP_NET_BIND_SERVICE, or run it as root); programs that use HTTP_PROXY reach their hosts as before";

/// The name server, the listeners of `ports` (and [`TRANSPARENT_PORTS`]) and, last, the
/// route that makes every address local: all of them, or none (an error), so a namespace
/// that cannot have them is the proxy-only one, where a direct connection is
/// `ENETUNREACH`.
fn transparent_parts(ports: &[u16]) -> Result<(Vec<TcpListener>, UdpSocket), NetnsError> {
    let resolver = resolver()?;
    let mut wanted: Vec<u16> = TRANSPARENT_PORTS.iter().chain(ports).copied().collect();
    wanted.sort_unstable();
    wanted.dedup();
    let transparent = (wanted.into_iter())
        .filter(|p| *p != PROXY_PORT)
        .map(|p| listen(Ipv4Addr::UNSPECIFIED, p))
        .collect::<Result<Vec<_>, _>>()?;
    route::all_addresses_local().map_err(NetnsError::Route)?;
    Ok((transparent, resolver))
}

/// A non-blocking TCP listener on `ip:port` in the calling thread's namespace.
fn listen(ip: Ipv4Addr, port: u16) -> Result<TcpListener, NetnsError> {
    TcpListener::bind(SocketAddrV4::new(ip, port))
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| NetnsError::Listen(port, e))
}

/// The name server's socket: UDP on `0.0.0.0:`[`RESOLVER_PORT`], non-blocking, with
/// `IP_PKTINFO`.
fn resolver() -> Result<UdpSocket, NetnsError> {
    let socket = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, RESOLVER_PORT))
        .and_then(|s| s.set_nonblocking(true).map(|()| s))
        .map_err(|e| NetnsError::Listen(RESOLVER_PORT, e))?;
    nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::Ipv4PacketInfo, &true)
        .map_err(|e| NetnsError::Listen(RESOLVER_PORT, e.into()))?;
    Ok(socket)
}

/// Sets `IFF_UP` on `lo` of the calling thread's network namespace.
fn loopback_up() -> io::Result<()> {
    // SAFETY: socket takes integers; the new fd is owned below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nothing else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero ifreq is valid (a C struct of integers and arrays).
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(c"lo".to_bytes_with_nul()) {
        *dst = libc::c_char::from_ne_bytes([*src]);
    }
    // SAFETY: SIOCGIFFLAGS reads the name from and writes the flags into a live ifreq.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled the flags member of the union just above.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    // IFF_UP is 1: it fits the c_short the kernel keeps the low flags in.
    let up = libc::c_short::try_from(libc::IFF_UP).unwrap_or(1);
    req.ifr_ifru.ifru_flags = flags | up;
    // SAFETY: SIOCSIFFLAGS reads the name and flags from a live ifreq.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::time::Instant;

    use super::*;

    /// Whether this test process may make namespaces (root with CAP_SYS_ADMIN).
    fn can_make() -> bool {
        match probe() {
            Ok(_) => true,
            Err(e) => {
                eprintln!("SKIPPED: network namespaces unavailable here: {e}");
                false
            }
        }
    }

    #[test]
    fn a_call_namespace_serves_its_proxy_port_and_reaches_nothing_else() {
        if !can_make() {
            return;
        }
        let net = create(Proxy::Egress, &[8443]).unwrap();
        // A thread that joins the namespace sees the proxy on its loopback; a connection to
        // any other address lands on the namespace's own listener of that port (the
        // address kept as the connection's local one), or is refused where none listens.
        let ns = net.namespace.try_clone().unwrap();
        let inside = std::thread::spawn(move || {
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let mut c = std::net::TcpStream::connect(("127.0.0.1", PROXY_PORT)).unwrap();
            c.write_all(b"ping").unwrap();
            let mut t = std::net::TcpStream::connect(("192.0.2.1", 8443)).unwrap();
            t.write_all(b"tls?").unwrap();
            let refused = std::net::TcpStream::connect(("192.0.2.1", 9)).unwrap_err();
            let udp = std::net::UdpSocket::bind(("0.0.0.0", 0)).unwrap();
            udp.send_to(b"question", ("10.9.8.7", RESOLVER_PORT))
                .unwrap();
            refused.raw_os_error()
        });
        let errno = inside.join().unwrap();
        assert_eq!(errno, Some(libc::ECONNREFUSED));
        let listener = net.listener.unwrap();
        listener.set_nonblocking(false).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = [0u8; 4];
        conn.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        let ports: Vec<u16> = net
            .transparent
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect();
        assert_eq!(ports, [80, 443, 8443]);
        let on_8443 = &net.transparent[2];
        on_8443.set_nonblocking(false).unwrap();
        let (mut conn, _) = on_8443.accept().unwrap();
        assert_eq!(conn.local_addr().unwrap().to_string(), "192.0.2.1:8443");
        conn.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"tls?");
        let resolver = net.resolver.unwrap();
        resolver.set_nonblocking(false).unwrap();
        let mut question = [0u8; 16];
        let (n, _) = resolver.recv_from(&mut question).unwrap();
        assert_eq!(&question[..n], b"question");
    }

    #[test]
    fn a_loopback_only_namespace_reaches_nothing_outside() {
        if !can_make() {
            return;
        }
        let net = create(Proxy::None, &[]).unwrap();
        assert!(net.listener.is_none() && net.transparent.is_empty() && net.resolver.is_none());
        let ns = net.namespace.try_clone().unwrap();
        let errno = std::thread::spawn(move || {
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let out = std::net::TcpStream::connect(("192.0.2.1", 80)).unwrap_err();
            out.raw_os_error()
        })
        .join()
        .unwrap();
        assert_eq!(errno, Some(libc::ENETUNREACH));
    }

    /// Reports (never asserts) what a namespace costs to make and drop.
    #[test]
    fn namespace_cost_is_reported() {
        if !can_make() {
            return;
        }
        let n = 50;
        let start = Instant::now();
        for _ in 0..n {
            drop(create(Proxy::Egress, &[]).unwrap());
        }
        let each = start.elapsed() / n;
        eprintln!("network namespace per call: {each:?} to make (thread, unshare, lo up, route, binds, open) and drop");
    }
}
