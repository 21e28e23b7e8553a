//! Which connections the gateway takes, decided at accept in one place: the per-peer cap
//! (past it, a new connection evicts the peer's oldest connection with no request in
//! progress), the connection cap, the health reserve past it (full, a new connection
//! evicts the reserve's oldest connection with no request in progress), and the
//! high-water mark past which a new connection gets the short head timeout. Connections
//! are kept in the order they were accepted, so finding whom to evict skips only the
//! connections with a request in progress.

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::activity::Activity;
use super::ServerLimits;

/// Which slot a connection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    /// One of `max_connections`: every route, kept alive.
    Full,
    /// One of the reserve past the cap: one request, only `GET /healthz` answered.
    HealthOnly,
}

/// The address a per-peer cap counts by: every loopback address is one peer (a local
/// process picks its source among all of 127.0.0.0/8), an IPv6 peer is its /64 (what one
/// host is given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Peer {
    /// 127.0.0.0/8 and ::1.
    Loopback,
    /// An IPv4 address (an IPv4-mapped IPv6 one included).
    V4(Ipv4Addr),
    /// The first 64 bits of an IPv6 address.
    V6Net([u16; 4]),
}

impl Peer {
    /// The peer `ip` counts as.
    pub(super) fn of(ip: IpAddr) -> Self {
        let ip = ip.to_canonical();
        if ip.is_loopback() {
            return Self::Loopback;
        }
        match ip {
            IpAddr::V4(v4) => Self::V4(v4),
            IpAddr::V6(v6) => {
                let s = v6.segments();
                Self::V6Net([s[0], s[1], s[2], s[3]])
            }
        }
    }
}

/// Why a connection is not taken; it gets the fixed 503 with [`Refusal::message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The peer holds `max_connections_per_peer`, each with a request in progress.
    PeerBusy,
    /// The cap and the reserve are held, each reserve connection with a request in
    /// progress.
    Full,
    /// The connection was evicted for a newer one as its head completed (its request is
    /// answered this, then it is closed).
    Evicted,
}

impl Refusal {
    /// What was refused and what to do about it.
    pub(super) fn message(self, limits: &ServerLimits) -> String {
        match self {
            Self::PeerBusy => format!(
                "the gateway is serving {} connections of this address, each with a request \
                 in progress (gateway.max_connections_per_peer); retry shortly, reuse a \
                 kept-alive connection, or raise gateway.max_connections_per_peer",
                limits.max_connections_per_peer
            ),
            Self::Full => over_cap_message(limits),
            Self::Evicted => "this connection was closed for a newer one of its address \
                 (gateway.max_connections_per_peer) or of the health reserve before its \
                 request head was in; send a request's head at once, or retry"
                .to_string(),
        }
    }
}

/// The refusal's text past the connection cap.
pub(super) fn over_cap_message(limits: &ServerLimits) -> String {
    format!(
        "the gateway is serving its {} connections (gateway.max_connections); retry shortly, \
         reuse a kept-alive connection, or raise gateway.max_connections",
        limits.max_connections
    )
}

/// The open connections of one listener.
#[derive(Debug)]
pub(super) struct Admission {
    limits: ServerLimits,
    registry: Mutex<Registry>,
}

/// A connection taken: its slot, its head timeout and its activity; dropping it gives its
/// place back (nothing when it was evicted, which gave it back already).
#[derive(Debug)]
pub(super) struct Ticket {
    /// The slot it holds.
    pub(super) slot: Slot,
    /// Its head timeout: short past the high-water mark and in the reserve.
    pub(super) header_timeout: Duration,
    /// Its requests in progress and its eviction.
    pub(super) activity: Arc<Activity>,
    id: u64,
    admission: Arc<Admission>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.registry().remove(self.id);
    }
}

#[derive(Debug)]
struct Member {
    peer: Peer,
    slot: Slot,
    activity: Arc<Activity>,
}

/// The open connections; an id is the order of its accept.
#[derive(Debug, Default)]
struct Registry {
    next_id: u64,
    members: HashMap<u64, Member>,
    by_peer: HashMap<Peer, BTreeSet<u64>>,
    reserve: BTreeSet<u64>,
    full: usize,
}

impl Registry {
    fn insert(&mut self, peer: Peer, slot: Slot, activity: Arc<Activity>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.by_peer.entry(peer).or_default().insert(id);
        match slot {
            Slot::Full => self.full += 1,
            Slot::HealthOnly => {
                self.reserve.insert(id);
            }
        }
        self.members.insert(
            id,
            Member {
                peer,
                slot,
                activity,
            },
        );
        id
    }

    /// Gives a connection's place back; nothing when it is gone already.
    fn remove(&mut self, id: u64) {
        let Some(member) = self.members.remove(&id) else {
            return;
        };
        if let Some(ids) = self.by_peer.get_mut(&member.peer) {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_peer.remove(&member.peer);
            }
        }
        match member.slot {
            Slot::Full => self.full = self.full.saturating_sub(1),
            Slot::HealthOnly => {
                self.reserve.remove(&id);
            }
        }
    }

    /// The peer's connections, oldest first.
    fn of_peer(&self, peer: Peer) -> impl Iterator<Item = u64> + '_ {
        self.by_peer.get(&peer).into_iter().flatten().copied()
    }

    /// Evicts the first of `ids` (oldest first) with no request in progress; its id, for
    /// [`Registry::remove`] to give its place back.
    fn evict_first(&self, mut ids: impl Iterator<Item = u64>) -> Option<u64> {
        ids.find(|id| self.members.get(id).is_some_and(|m| m.activity.evict()))
    }
}

impl Admission {
    /// No connection open yet, under `limits`.
    pub(super) fn new(limits: ServerLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            registry: Mutex::new(Registry::default()),
        })
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a connection from `ip`, evicting one of the peer's (or of the reserve) when
    /// that is what makes room, or says why not.
    pub(super) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Ticket, Refusal> {
        let l = &self.limits;
        let peer = Peer::of(ip);
        let mut r = self.registry();
        if r.by_peer.get(&peer).map_or(0, BTreeSet::len) >= l.max_connections_per_peer {
            let Some(evicted) = r.evict_first(r.of_peer(peer)) else {
                return Err(Refusal::PeerBusy);
            };
            r.remove(evicted);
            tracing::debug!(?peer, "gateway connection evicted for a newer one of its peer (gateway.max_connections_per_peer)");
        }
        let slot = if r.full < l.max_connections {
            Slot::Full
        } else if r.reserve.len() < l.healthz_reserve {
            Slot::HealthOnly
        } else {
            let Some(evicted) = r.evict_first(r.reserve.iter().copied()) else {
                return Err(Refusal::Full);
            };
            r.remove(evicted);
            Slot::HealthOnly
        };
        let loaded = r.members.len() >= l.high_water;
        let header_timeout = if loaded || slot == Slot::HealthOnly {
            l.header_timeout_under_load.min(l.header_timeout)
        } else {
            l.header_timeout
        };
        let activity = Activity::new();
        let id = r.insert(peer, slot, Arc::clone(&activity));
        Ok(Ticket {
            slot,
            header_timeout,
            activity,
            id,
            admission: Arc::clone(self),
        })
    }

    /// Connections open now.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.registry().members.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_peer: usize, max: usize, reserve: usize, high_water: usize) -> ServerLimits {
        ServerLimits {
            header_timeout: Duration::from_secs(60),
            header_timeout_under_load: Duration::from_secs(1),
            max_connections: max,
            max_connections_per_peer: per_peer,
            high_water,
            healthz_reserve: reserve,
            ..ServerLimits::default()
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn loopback_addresses_are_one_peer_and_ipv6_counts_by_its_64() {
        assert_eq!(Peer::of(ip("127.0.0.1")), Peer::of(ip("127.4.5.6")));
        assert_eq!(Peer::of(ip("::1")), Peer::Loopback);
        assert_eq!(Peer::of(ip("::ffff:10.0.0.1")), Peer::of(ip("10.0.0.1")));
        assert_eq!(
            Peer::of(ip("2001:db8::1")),
            Peer::of(ip("2001:db8::ffff:2"))
        );
        assert_ne!(Peer::of(ip("2001:db8:0:1::1")), Peer::of(ip("2001:db8::1")));
        assert_ne!(Peer::of(ip("10.0.0.1")), Peer::of(ip("10.0.0.2")));
    }

    #[test]
    fn peer_past_its_cap_evicts_its_oldest_connection_with_no_request_in_progress() {
        let a = Admission::new(limits(3, 100, 2, 100));
        let mut held: Vec<Ticket> = (0..3).map(|_| a.admit(ip("127.0.0.1")).unwrap()).collect();
        // The oldest has a request in progress: the second oldest goes.
        let _busy = held[0].activity.begin().unwrap();
        let other = a.admit(ip("10.0.0.9")).unwrap();
        let newcomer = a.admit(ip("127.0.0.2")).unwrap();
        assert_eq!(newcomer.slot, Slot::Full);
        assert!(held[0].activity.idle_for().is_none(), "busy, kept");
        assert!(
            held[1].activity.begin().is_none(),
            "the oldest idle one is evicted"
        );
        assert!(held[2].activity.begin().is_some(), "the newer one is kept");
        assert_eq!(a.open(), 4);
        // The evicted connection's ticket, dropped when its task ends, gives nothing back.
        drop(held.remove(1));
        assert_eq!(a.open(), 4);
        drop(other);
        assert_eq!(a.open(), 3);
    }

    #[test]
    fn peer_whose_connections_all_have_a_request_in_progress_is_refused() {
        let a = Admission::new(limits(2, 100, 2, 100));
        let held: Vec<Ticket> = (0..2).map(|_| a.admit(ip("10.0.0.1")).unwrap()).collect();
        let _busy: Vec<_> = held.iter().map(|t| t.activity.begin().unwrap()).collect();
        let refused = a.admit(ip("10.0.0.1")).unwrap_err();
        assert_eq!(refused, Refusal::PeerBusy);
        assert!(refused
            .message(&a.limits)
            .contains("2 connections of this address, each with a request in progress (gateway.max_connections_per_peer)"));
        // Another peer is taken.
        assert!(a.admit(ip("10.0.0.2")).is_ok());
    }

    #[test]
    fn connection_past_the_high_water_mark_gets_the_short_head_timeout() {
        let a = Admission::new(limits(100, 100, 2, 2));
        let first = a.admit(ip("10.0.0.1")).unwrap();
        let second = a.admit(ip("10.0.0.2")).unwrap();
        let third = a.admit(ip("10.0.0.3")).unwrap();
        assert_eq!(first.header_timeout, Duration::from_secs(60));
        assert_eq!(second.header_timeout, Duration::from_secs(60));
        assert_eq!(third.header_timeout, Duration::from_secs(1));
        drop((first, third));
        let again = a.admit(ip("10.0.0.1")).unwrap();
        assert_eq!(
            again.header_timeout,
            Duration::from_secs(60),
            "back under it"
        );
    }

    #[test]
    fn full_health_reserve_evicts_its_idle_connection_and_gets_the_short_timeout() {
        let a = Admission::new(limits(100, 1, 1, 100));
        let _full = a.admit(ip("10.0.0.1")).unwrap();
        let trickler = a.admit(ip("10.0.0.2")).unwrap();
        assert_eq!(trickler.slot, Slot::HealthOnly);
        assert_eq!(trickler.header_timeout, Duration::from_secs(1));
        let probe = a.admit(ip("10.0.0.3")).unwrap();
        assert_eq!(probe.slot, Slot::HealthOnly);
        assert!(trickler.activity.begin().is_none(), "evicted for the probe");
        // A reserve whose every connection has a request in progress refuses.
        let _busy = probe.activity.begin().unwrap();
        assert_eq!(a.admit(ip("10.0.0.4")).unwrap_err(), Refusal::Full);
    }
}
