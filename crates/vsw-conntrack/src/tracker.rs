//! The connection tables: one per zone, every connection under both directions'
//! tuples (so a zone's flush takes its table out at once: the packets after it
//! see an empty zone, whatever its size), with the global and per-zone limits and
//! expiry.
//!
//! Concurrency: the table is a lock-free map (papaya), so a lookup takes no lock
//! and many PMDs read it at once; a connection's expiry, mark and label are atomics;
//! UDP's and ICMP's state is one atomic byte. Only a TCP connection's two ends,
//! which a segment updates together, sit behind a lock of that connection's own
//! (Open vSwitch's `conn->lock`), held for the update alone. Nothing is held
//! across connections: no table-wide lock on the packet path.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::nat::{self, NatKind, NatRange, NatRewrite};
use crate::state::{CtState, TcpState};
use crate::tcp::{self, TcpPeer, TcpSegment, Update};
use crate::timeouts::{TimeoutKind, Timeouts};
use crate::tuple::{Key, Tuple, IPPROTO_TCP};

/// Seeded per process: the keys are what any sender picks, so no sender may pick
/// colliding ones ahead.
type Hasher = foldhash::fast::RandomState;

/// Open vSwitch's default limit of connections, all zones together.
pub const DEFAULT_LIMIT: usize = 3_000_000;

/// What a packet tells the tracker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtPacket {
    /// Its direction's tuple.
    pub tuple: Tuple,
    /// TCP's segment (a TCP packet without one is invalid).
    pub tcp: Option<TcpSegment>,
    /// An ICMP error: the tuple of the packet it quotes, as that packet's headers
    /// say (its sender's direction).
    pub quoted: Option<Tuple>,
}

/// What `ct(commit, exec(set_field:…->ct_mark, …->ct_label), nat(…))` writes into
/// its connection: mark and label as (value, mask) each; a new connection's NAT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Commit {
    pub mark: Option<(u32, u32)>,
    pub label: Option<(u128, u128)>,
    pub nat: Option<NatRange>,
    /// `force`: a packet of a connection's reply direction ends that connection
    /// and commits a new one with the packet's direction as the original.
    pub force: bool,
    /// `alg=`: the helper that makes the tracker expect the connection this one's
    /// protocol opens next.
    pub helper: Option<crate::helper::Helper>,
}

/// One `ct(…)`: its zone, its commit, and whether it applies the connection's NAT
/// (`nat`, with or without a range: a committed range sets it up). `natted`: the
/// packet was rewritten by NAT in this zone already (a `ct(nat)` before this one):
/// its tuple is its connection's as translated, and it is not rewritten again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ct<'a> {
    pub zone: u16,
    pub commit: Option<&'a Commit>,
    pub nat: bool,
    pub natted: bool,
    /// TCP's payload, for a connection's helper to read (FTP's commands).
    pub payload: &'a [u8],
}

/// What the tracker says of a packet: its `ct_state`, `ct_zone`, `ct_mark`,
/// `ct_label`, and the connection's original direction (`ct_nw_src`, …): the
/// packet's own when it is new and not committed; none when invalid. `rewrite`:
/// what the connection's NAT makes of the packet's headers, when the `ct` applies
/// NAT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtOutcome {
    pub state: CtState,
    pub zone: u16,
    pub mark: u32,
    pub label: u128,
    pub orig: Option<Tuple>,
    pub rewrite: Option<NatRewrite>,
}

/// UDP's and other protocols' state (Open vSwitch's `other_state`), and ICMP's.
const OTHER_FIRST: u8 = 0;
const OTHER_MULTIPLE: u8 = 1;
const OTHER_BIDIR: u8 = 2;
const ICMP_FIRST: u8 = 0;
const ICMP_REPLY: u8 = 1;

enum ProtoState {
    Tcp(Mutex<[TcpPeer; 2]>),
    Other(AtomicU8),
    Icmp(AtomicU8),
}

struct Conn {
    orig: Key,
    reply: Key,
    expires_ms: AtomicU64,
    mark: AtomicU32,
    label_hi: AtomicU64,
    label_lo: AtomicU64,
    proto: ProtoState,
    /// Its NAT: which end, and the original direction's tuple as translated.
    nat: Option<(NatKind, Tuple)>,
    /// Taken out (and counted out) once, by whoever sets this first.
    dead: AtomicBool,
    /// Opened as a helper expected (`+rel`, every packet of it).
    related: bool,
    /// Committed with a helper.
    helper: Option<crate::helper::Helper>,
}

impl Conn {
    fn label(&self) -> u128 {
        (u128::from(self.label_hi.load(Ordering::Relaxed)) << 64)
            | u128::from(self.label_lo.load(Ordering::Relaxed))
    }

    fn commit(&self, c: &Commit) {
        if let Some((v, m)) = c.mark {
            // Two PMDs may commit one connection at once: neither write is lost.
            let _ = self
                .mark
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                    Some((old & !m) | (v & m))
                });
        }
        if let Some((v, m)) = c.label {
            let l = (self.label() & !m) | (v & m);
            self.label_hi.store((l >> 64) as u64, Ordering::Relaxed);
            self.label_lo.store(l as u64, Ordering::Relaxed);
        }
    }

    fn expired(&self, now_ms: u64) -> bool {
        self.expires_ms.load(Ordering::Relaxed) <= now_ms
    }
}

/// A zone: its connections under both directions' tuples, and how many.
#[derive(Default)]
struct Zone {
    table: papaya::HashMap<Tuple, Arc<Conn>, Hasher>,
    count: AtomicU32,
    /// Flushed: out of the tracker. A connection made in it meanwhile is taken
    /// back out by its maker.
    flushed: AtomicBool,
}

impl Zone {
    /// Its entries (both directions of each connection), taken out of the table
    /// for a walk that outlives a guard.
    fn entries(&self) -> Vec<(Tuple, Arc<Conn>)> {
        self.table
            .pin()
            .iter()
            .map(|(t, c)| (*t, c.clone()))
            .collect()
    }
}

/// A connection a helper expects: until when, and the connection that expects it
/// (by its original tuple in the zone), which must still be there when it comes.
#[derive(Clone, Copy, Debug)]
struct Expectation {
    until_ms: u64,
    parent: Tuple,
}

/// How long a helper's expectation waits at most (the data connection of an FTP
/// command, a TFTP server's answer, follow within seconds).
const EXPECTATION_MS: u64 = 30_000;
/// How many expectations are kept at most, all zones: past it, a command is not
/// followed (nothing a client sends grows the tracker without bound).
const MAX_EXPECTATIONS: usize = 4096;

/// A pinned zone table.
type Table<'g, G> = papaya::HashMapRef<'g, Tuple, Arc<Conn>, Hasher, G>;
/// The pinned map of zones.
type Zones<'g, G> = papaya::HashMapRef<'g, u16, Arc<Zone>, Hasher, G>;

/// One connection as `dpctl/dump-conntrack` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnView {
    pub zone: u16,
    pub orig: Tuple,
    pub reply: Tuple,
    pub mark: u32,
    pub label: u128,
    /// Milliseconds left.
    pub expires_in_ms: u64,
    /// TCP: the original and reply ends.
    pub tcp: Option<[crate::tcp::PeerView; 2]>,
    /// The helper it was committed with.
    pub helper: Option<crate::helper::Helper>,
}

/// The connection tracker: no I/O; the datapath calls it per packet.
pub struct Conntrack {
    zones: papaya::HashMap<u16, Arc<Zone>, Hasher>,
    zone_limits: papaya::HashMap<u16, u32, Hasher>,
    /// The limit of a zone with none of its own (0: none).
    default_zone_limit: AtomicU32,
    count: AtomicUsize,
    limit: AtomicUsize,
    seq_check: AtomicBool,
    timeouts: Timeouts,
    /// Zones' own timeout policies (Open vSwitch's CT_Zone:timeout_policy);
    /// looked at only while there is one.
    zone_timeouts: papaya::HashMap<u16, Timeouts, Hasher>,
    any_zone_timeouts: AtomicBool,
    /// New connections NAT found no free tuple for.
    nat_exhausted: AtomicU64,
    /// Connections made (committed), ever.
    committed: AtomicU64,
    /// Commits the global or a zone's limit refused.
    over_limit: AtomicU64,
    /// Packets found invalid (of no connection that may start one, or breaking
    /// their connection's state).
    invalid: AtomicU64,
    /// Fragments kept until their datagrams are whole.
    ipf: crate::ipf::Ipf,
    /// Connections helpers expect, by zone, until when (ms).
    expected: papaya::HashMap<(u16, crate::helper::Expected), Expectation, Hasher>,
    /// Whether any helper ever expected one (until then, no lookup of them).
    any_expected: AtomicBool,
    /// Zones flushed, and whether their tables were emptied yet (`sweep` empties
    /// them, and lets a zone go once nothing else holds it).
    flushed_zones: Mutex<Vec<(Arc<Zone>, bool)>>,
}

/// How many connections of one zone, protocol and state (`Conntrack::census`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Census {
    pub zone: u16,
    pub proto: u8,
    /// TCP's state as `dpctl/dump-conntrack` prints it (`ESTABLISHED`, …); for
    /// the others, what was seen: `FIRST` (one way, one packet), `MULTIPLE` (one
    /// way), `BIDIR` (both ways; ICMP: `REPLY`).
    pub state: &'static str,
}

impl Default for Conntrack {
    fn default() -> Conntrack {
        Conntrack::new(Timeouts::default())
    }
}

impl Conntrack {
    pub fn new(timeouts: Timeouts) -> Conntrack {
        Conntrack {
            zones: papaya::HashMap::default(),
            zone_limits: papaya::HashMap::default(),
            default_zone_limit: AtomicU32::new(0),
            count: AtomicUsize::new(0),
            limit: AtomicUsize::new(DEFAULT_LIMIT),
            seq_check: AtomicBool::new(true),
            timeouts,
            zone_timeouts: papaya::HashMap::default(),
            any_zone_timeouts: AtomicBool::new(false),
            nat_exhausted: AtomicU64::new(0),
            committed: AtomicU64::new(0),
            over_limit: AtomicU64::new(0),
            invalid: AtomicU64::new(0),
            ipf: crate::ipf::Ipf::default(),
            expected: papaya::HashMap::default(),
            any_expected: AtomicBool::new(false),
            flushed_zones: Mutex::new(Vec::new()),
        }
    }

    /// Tracks `pkt` in `zone` at `now_ms`: what it is to the connection it belongs
    /// to, or would start. `commit` makes a new connection of it (unless a limit is
    /// reached: then the packet stays new and nothing is kept) and writes its mark
    /// and label.
    pub fn execute(
        &self,
        pkt: &CtPacket,
        zone: u16,
        commit: Option<&Commit>,
        now_ms: u64,
    ) -> CtOutcome {
        let ct = Ct {
            zone,
            commit,
            nat: false,
            natted: false,
            payload: &[],
        };
        self.track(pkt, &ct, now_ms)
    }

    /// [`Conntrack::execute`] of a whole `ct(…)`: with NAT applied when it asks
    /// (`ct.nat`): the outcome's `rewrite` and `+snat`/`+dnat`.
    pub fn track(&self, pkt: &CtPacket, ct: &Ct<'_>, now_ms: u64) -> CtOutcome {
        let mut out = self.track_state(pkt, ct, now_ms);
        if out.state.has(CtState::INVALID) {
            self.invalid.fetch_add(1, Ordering::Relaxed);
        }
        if ct.nat || ct.natted {
            // The header the rewrite changes, as Open vSwitch marks it: an SNAT
            // connection's reply has its destination rewritten (`+dnat`).
            if let Some(r) = out.rewrite {
                if r.src.is_some() {
                    out.state.0 |= CtState::SNAT;
                }
                if r.dst.is_some() {
                    out.state.0 |= CtState::DNAT;
                }
            }
        }
        if !ct.nat || ct.natted {
            out.rewrite = None;
        }
        out
    }

    fn track_state(&self, pkt: &CtPacket, ct: &Ct<'_>, now_ms: u64) -> CtOutcome {
        let (zone, commit, natted) = (ct.zone, ct.commit, ct.natted);
        let invalid = CtOutcome {
            state: CtState(CtState::INVALID | CtState::TRACKED),
            zone,
            ..CtOutcome::default()
        };
        let zones = self.zones.pin();
        let Some(z) = zones.get(&zone) else {
            // No connection in this zone yet.
            if pkt.quoted.is_some() || (pkt.tuple.is_icmp() && pkt.tuple.reverse().is_none()) {
                return invalid;
            }
            return self.fresh(&zones, pkt, zone, commit, now_ms);
        };
        let conns = z.table.pin();
        if let Some(quoted) = pkt.quoted {
            // An ICMP error travels against the packet it quotes, so the quote's
            // reverse is the error's direction's key; once NAT rewrote the quote
            // back (a `ct(nat)` before this one), the quote is its own direction's.
            let Some(back) = quoted.reverse() else {
                return invalid;
            };
            let tuple = if natted { quoted } else { back };
            let key = Key { zone, tuple };
            return match self.live(z, &conns, &key, now_ms) {
                Some(c) => {
                    let reply = (key != c.orig) != natted;
                    let r = if reply { CtState::REPLY } else { 0 };
                    // Its headers and its quote's are NATed as its direction's.
                    with_rewrite(c, seen(c, CtState::RELATED | r, zone), reply)
                }
                None => invalid,
            };
        }
        if pkt.tuple.is_icmp() && pkt.tuple.reverse().is_none() {
            // ICMP that is neither a query, an answer nor an error.
            return invalid;
        }
        // A packet NAT rewrote is its connection's translated tuple: looked up by
        // its reverse, which is the other direction's key.
        let tuple = match (natted, pkt.tuple.reverse()) {
            (true, Some(back)) => back,
            _ => pkt.tuple,
        };
        let key = Key { zone, tuple };
        if let Some(c) = self.live(z, &conns, &key, now_ms) {
            let reply = (key != c.orig) != (natted && tuple != pkt.tuple);
            if reply && commit.is_some_and(|cm| cm.force) {
                let c = c.clone();
                self.remove(z, &conns, &c);
                return self.fresh(&zones, pkt, zone, commit, now_ms);
            }
            match self.update(c, pkt, reply, now_ms) {
                Update::Valid => {
                    if let Some(cm) = commit {
                        c.commit(cm);
                    }
                    if c.helper.is_some() && !ct.payload.is_empty() {
                        self.read_by_helper(z, c, ct.payload, reply, now_ms);
                    }
                    let r = if reply { CtState::REPLY } else { 0 };
                    return with_rewrite(c, seen(c, CtState::ESTABLISHED | r, zone), reply);
                }
                Update::ValidNew => {
                    if let Some(cm) = commit {
                        c.commit(cm);
                    }
                    return with_rewrite(c, seen(c, CtState::NEW, zone), reply);
                }
                Update::Invalid => return invalid,
                // A new connection on the closed one's tuple.
                Update::New => {
                    self.remove(z, &conns, c);
                }
            }
        }
        self.fresh(&zones, pkt, zone, commit, now_ms)
    }

    /// A packet of no connection (in `zone`): new if it may start one (committed
    /// when `commit` asks and the limits allow), invalid if not.
    fn fresh(
        &self,
        zones: &Zones<'_, impl papaya::Guard>,
        pkt: &CtPacket,
        zone: u16,
        commit: Option<&Commit>,
        now_ms: u64,
    ) -> CtOutcome {
        let may_start = match pkt.tuple.proto {
            IPPROTO_TCP => pkt.tcp.as_ref().is_some_and(tcp::valid_new),
            _ if pkt.tuple.is_icmp() => pkt.tuple.is_icmp_query(),
            _ => true,
        };
        if !may_start {
            return CtOutcome {
                state: CtState(CtState::INVALID | CtState::TRACKED),
                zone,
                ..CtOutcome::default()
            };
        }
        // A connection a helper expects: related to the one that made it expected,
        // while that one lives.
        let expected = (zone, crate::helper::Expected::of(&pkt.tuple));
        let related = self.any_expected.load(Ordering::Relaxed) && {
            let exps = self.expected.pin();
            let live = exps.get(&expected).is_some_and(|x| {
                x.until_ms > now_ms
                    && zones.get(&zone).is_some_and(|z| {
                        z.table
                            .pin()
                            .get(&x.parent)
                            .is_some_and(|p| !p.dead.load(Ordering::Relaxed) && !p.expired(now_ms))
                    })
            });
            if !live {
                exps.remove(&expected);
            }
            live
        };
        let fresh = CtOutcome {
            state: CtState(
                CtState::NEW | CtState::TRACKED | if related { CtState::RELATED } else { 0 },
            ),
            zone,
            orig: Some(pkt.tuple),
            ..CtOutcome::default()
        };
        match commit.and_then(|cm| self.create(zones, pkt, zone, cm, related, now_ms)) {
            Some(c) => {
                if related {
                    // Met: expected no longer.
                    self.expected.pin().remove(&expected);
                }
                let reply = pkt.tuple != c.orig.tuple;
                with_rewrite(&c, seen(&c, CtState::NEW, zone), reply)
            }
            None => fresh,
        }
    }

    /// The connection `key` names, unless it expired (then it goes).
    /// (Borrowed while the caller's guard holds the map: no reference count
    /// moves per packet.)
    fn live<'g>(
        &self,
        z: &Zone,
        conns: &'g Table<'_, impl papaya::Guard>,
        key: &Key,
        now_ms: u64,
    ) -> Option<&'g Arc<Conn>> {
        let c = conns.get(&key.tuple)?;
        if c.expired(now_ms) {
            let c = c.clone();
            self.remove(z, conns, &c);
            return None;
        }
        Some(c)
    }

    fn update(&self, c: &Conn, pkt: &CtPacket, reply: bool, now_ms: u64) -> Update {
        let (update, kind) = match &c.proto {
            ProtoState::Tcp(peers) => {
                let Some(seg) = pkt.tcp else {
                    return Update::Invalid;
                };
                let seq_check = self.seq_check.load(Ordering::Relaxed);
                tcp::update(&mut peers.lock(), &seg, reply, seq_check)
            }
            ProtoState::Other(s) => {
                let now = if reply {
                    OTHER_BIDIR
                } else {
                    s.load(Ordering::Relaxed).max(OTHER_MULTIPLE)
                };
                let now = s.fetch_max(now, Ordering::Relaxed).max(now);
                let (u, k) = match now {
                    OTHER_BIDIR => (Update::Valid, TimeoutKind::OtherBidir),
                    _ => (Update::ValidNew, TimeoutKind::OtherMultiple),
                };
                (u, Some(k))
            }
            ProtoState::Icmp(s) => {
                if reply {
                    s.store(ICMP_REPLY, Ordering::Relaxed);
                }
                match s.load(Ordering::Relaxed) {
                    ICMP_REPLY => (Update::Valid, Some(TimeoutKind::IcmpReply)),
                    _ => (Update::ValidNew, Some(TimeoutKind::IcmpFirst)),
                }
            }
        };
        if let Some(kind) = kind {
            c.expires_ms.store(
                now_ms + self.timeout_ms(c.orig.zone, kind),
                Ordering::Relaxed,
            );
        }
        update
    }

    /// Makes a connection of `pkt` in `zone`; `None` when a limit is reached (or
    /// another packet made the other direction's at the same time).
    fn create(
        &self,
        zones: &Zones<'_, impl papaya::Guard>,
        pkt: &CtPacket,
        zone: u16,
        commit: &Commit,
        related: bool,
        now_ms: u64,
    ) -> Option<Arc<Conn>> {
        let reply = pkt.tuple.reverse()?;
        if self.count.load(Ordering::Relaxed) >= self.limit.load(Ordering::Relaxed) {
            self.over_limit.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let z = zones.get_or_insert_with(zone, || Arc::new(Zone::default()));
        let conns = z.table.pin();
        let limit = self
            .zone_limits
            .pin()
            .get(&zone)
            .copied()
            .unwrap_or_else(|| self.default_zone_limit.load(Ordering::Relaxed));
        // (A default of 0 is none; a zone's own 0 takes nothing.)
        let own = self.zone_limits.pin().contains_key(&zone);
        if (own || limit != 0) && z.count.load(Ordering::Relaxed) >= limit {
            self.over_limit.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let (proto, kind) = match pkt.tuple.proto {
            IPPROTO_TCP => {
                let (peers, kind) = tcp::new_conn(pkt.tcp.as_ref()?);
                (ProtoState::Tcp(Mutex::new(peers)), kind)
            }
            _ if pkt.tuple.is_icmp() => (
                ProtoState::Icmp(AtomicU8::new(ICMP_FIRST)),
                TimeoutKind::IcmpFirst,
            ),
            _ => (
                ProtoState::Other(AtomicU8::new(OTHER_FIRST)),
                TimeoutKind::OtherFirst,
            ),
        };
        // NAT: the translated tuple whose reverse no connection holds.
        let (reply, nat) = match commit.nat {
            None => (reply, None),
            Some(range) => {
                let seed = conn_seed(&pkt.tuple);
                let found = nat::candidates(&pkt.tuple, &range, seed).find_map(|t| {
                    let back = t.reverse()?;
                    (!conns.contains_key(&back)).then_some((back, t))
                });
                match found {
                    Some((back, t)) => (back, Some((range.kind, t))),
                    None => {
                        self.nat_exhausted.fetch_add(1, Ordering::Relaxed);
                        return None;
                    }
                }
            }
        };
        let conn = Arc::new(Conn {
            orig: Key {
                zone,
                tuple: pkt.tuple,
            },
            reply: Key { zone, tuple: reply },
            expires_ms: AtomicU64::new(now_ms + self.timeout_ms(zone, kind)),
            mark: AtomicU32::new(0),
            label_hi: AtomicU64::new(0),
            label_lo: AtomicU64::new(0),
            proto,
            nat,
            dead: AtomicBool::new(false),
            related,
            helper: commit.helper,
        });
        conn.commit(commit);
        // Counted before it can be seen, so that whoever takes it out (a flush
        // of its zone, a sweep) counts it out after.
        self.count.fetch_add(1, Ordering::SeqCst);
        z.count.fetch_add(1, Ordering::SeqCst);
        let uncount = || {
            self.count.fetch_sub(1, Ordering::SeqCst);
            z.count.fetch_sub(1, Ordering::SeqCst);
        };
        if let Err(e) = conns.try_insert(conn.orig.tuple, conn.clone()) {
            // Another packet of this direction made it first: that one counts.
            uncount();
            return Some(e.current.clone());
        }
        // (A packet to its own address and port is its own reply: one key.)
        if conn.reply != conn.orig && conns.try_insert(conn.reply.tuple, conn.clone()).is_err() {
            // Its original key was seen meanwhile: counted out by whoever takes it.
            self.remove(z, &conns, &conn);
            return None;
        }
        // Its zone flushed meanwhile: not made after all (once, as the flush
        // decides who counts it out). The fence pairs with the flush's: either
        // this sees the flag, or the flush's walk sees the connection.
        std::sync::atomic::fence(Ordering::SeqCst);
        if z.flushed.load(Ordering::SeqCst) {
            self.remove(z, &conns, &conn);
            return None;
        }
        self.committed.fetch_add(1, Ordering::Relaxed);
        if let Some(e) = commit.helper.and_then(|h| h.expects(&conn.reply.tuple)) {
            self.expect(z, e, &conn, now_ms);
        }
        Some(conn)
    }

    /// Makes `e` expected for a while, on behalf of `parent` (of zone `z`).
    fn expect(&self, z: &Zone, e: crate::helper::Expected, parent: &Conn, now_ms: u64) {
        let exps = self.expected.pin();
        if parent.dead.load(Ordering::SeqCst)
            || z.flushed.load(Ordering::SeqCst)
            || exps.len() >= MAX_EXPECTATIONS
        {
            return;
        }
        let until_ms = parent
            .expires_ms
            .load(Ordering::Relaxed)
            .min(now_ms + EXPECTATION_MS);
        exps.insert(
            (parent.orig.zone, e),
            Expectation {
                until_ms,
                parent: parent.orig.tuple,
            },
        );
        self.any_expected.store(true, Ordering::Relaxed);
    }

    /// Takes connection `c` out (once, whoever else tries too): whether this call
    /// did.
    fn remove(&self, z: &Zone, conns: &Table<'_, impl papaya::Guard>, c: &Arc<Conn>) -> bool {
        if c.dead.swap(true, Ordering::SeqCst) {
            return false;
        }
        let _ = conns.remove_if(&c.orig.tuple, |_, v| Arc::ptr_eq(v, c));
        let _ = conns.remove_if(&c.reply.tuple, |_, v| Arc::ptr_eq(v, c));
        self.count.fetch_sub(1, Ordering::SeqCst);
        z.count.fetch_sub(1, Ordering::SeqCst);
        true
    }

    /// What connection `c`'s helper expects from a payload of it (FTP's `PORT`,
    /// `EPRT`, `227` and `229`).
    fn read_by_helper(&self, z: &Zone, c: &Conn, payload: &[u8], reply: bool, now_ms: u64) {
        if let Some(e) = c.helper.and_then(|h| h.read(payload, &c.orig.tuple, reply)) {
            self.expect(z, e, c, now_ms);
        }
    }

    /// Every zone, pinned.
    fn each_zone(&self) -> Vec<Arc<Zone>> {
        self.zones.pin().values().cloned().collect()
    }

    /// Removes what expired by `now_ms`; how many. (A lookup of an expired
    /// connection removes it too: this bounds what nothing looks up.)
    pub fn sweep(&self, now_ms: u64) -> usize {
        self.ipf.expire(now_ms);
        // Flushed zones' tables emptied here, not in the flush (nor a PMD).
        {
            let mut flushed = self.flushed_zones.lock();
            for (z, emptied) in flushed.iter_mut() {
                if !*emptied {
                    z.table.pin().clear();
                    *emptied = true;
                }
            }
            flushed.retain(|(z, _)| Arc::strong_count(z) > 1);
        }
        self.expected.pin().retain(|_, x| x.until_ms > now_ms);
        let mut gone = 0;
        for z in self.each_zone() {
            let conns = z.table.pin();
            let doomed: Vec<Arc<Conn>> = conns
                .iter()
                .filter(|(t, c)| **t == c.orig.tuple && c.expired(now_ms))
                .map(|(_, c)| c.clone())
                .collect();
            gone += doomed.iter().filter(|c| self.remove(&z, &conns, c)).count();
        }
        gone
    }

    /// The fragments kept until their datagrams are whole.
    pub fn ipf(&self) -> &crate::ipf::Ipf {
        &self.ipf
    }

    /// Removes every connection of `zone`; how many. The zone's table goes at
    /// once (a packet after this sees an empty zone); its connections are then
    /// counted out here, in the caller's thread, never a PMD's: the work of that
    /// zone's connections alone, no lookup of any. The next `sweep` empties the
    /// table (frees the connections).
    pub fn flush_zone(&self, zone: u16) -> usize {
        let Some(z) = self.zones.pin().remove(&zone).cloned() else {
            return 0;
        };
        z.flushed.store(true, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        self.expected.pin().retain(|(z, _), _| *z != zone);
        let conns = z.table.pin();
        let gone = conns
            .iter()
            .filter(|(t, c)| **t == c.orig.tuple && !c.dead.swap(true, Ordering::SeqCst))
            .count();
        self.count.fetch_sub(gone, Ordering::SeqCst);
        z.count.fetch_sub(gone as u32, Ordering::SeqCst);
        drop(conns);
        // Its table is emptied at the next sweep, in the sweeper's thread:
        // freeing its connections takes longer than the flush itself.
        self.flushed_zones.lock().push((z, false));
        gone
    }

    /// Removes the connections `filter` names, of `zone` (`None`: of every zone,
    /// but zone 0 for a filter of one original tuple, as Open vSwitch); how
    /// many. An empty filter flushes the zone, or everything.
    pub fn flush_matching(&self, zone: Option<u16>, filter: &crate::FlushFilter) -> usize {
        if filter.is_empty() {
            return match zone {
                Some(z) => self.flush_zone(z),
                None => self.flush(),
            };
        }
        let zones: Vec<Arc<Zone>> = match zone.or_else(|| filter.is_one_tuple().then_some(0)) {
            Some(z) => self.zones.pin().get(&z).cloned().into_iter().collect(),
            None => self.each_zone(),
        };
        let mut gone = 0;
        for z in zones {
            let conns = z.table.pin();
            let doomed: Vec<Arc<Conn>> = conns
                .iter()
                .filter(|(t, c)| {
                    let mark = c.mark.load(Ordering::Relaxed);
                    **t == c.orig.tuple
                        && filter.matches(&c.orig.tuple, &c.reply.tuple, mark, c.label())
                })
                .map(|(_, c)| c.clone())
                .collect();
            gone += doomed.iter().filter(|c| self.remove(&z, &conns, c)).count();
        }
        gone
    }

    /// Removes every connection; how many.
    pub fn flush(&self) -> usize {
        let zones: Vec<u16> = self.zones.pin().keys().copied().collect();
        zones.into_iter().map(|z| self.flush_zone(z)).sum()
    }

    /// New connections NAT found no free tuple for (left uncommitted).
    pub fn nat_exhausted(&self) -> u64 {
        self.nat_exhausted.load(Ordering::Relaxed)
    }

    /// How long a connection of `zone` lives after a packet made it `kind`: the
    /// zone's policy's, else the tracker's.
    #[inline]
    fn timeout_ms(&self, zone: u16, kind: TimeoutKind) -> u64 {
        if self.any_zone_timeouts.load(Ordering::Relaxed) {
            if let Some(t) = self.zone_timeouts.pin().get(&zone) {
                return t.ms(kind);
            }
        }
        self.timeouts.ms(kind)
    }

    /// Gives `zone` a timeout policy of its own (`None`: the tracker's again).
    /// Its connections take it at their next packet, as in Open vSwitch.
    pub fn set_zone_timeouts(&self, zone: u16, timeouts: Option<Timeouts>) {
        let map = self.zone_timeouts.pin();
        match timeouts {
            Some(t) => {
                map.insert(zone, t);
            }
            None => {
                map.remove(&zone);
            }
        }
        self.any_zone_timeouts
            .store(!map.is_empty(), Ordering::Relaxed);
    }

    /// `zone`'s timeout policy (the tracker's when it has none of its own).
    pub fn zone_timeouts(&self, zone: u16) -> Timeouts {
        self.zone_timeouts
            .pin()
            .get(&zone)
            .copied()
            .unwrap_or(self.timeouts)
    }

    /// Connections made (committed) since the tracker started.
    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Relaxed)
    }

    /// Commits a limit (global or a zone's) refused.
    pub fn over_limit(&self) -> u64 {
        self.over_limit.load(Ordering::Relaxed)
    }

    /// Counts a packet its caller could not read as the tracker needs (not IP,
    /// a fragment, headers cut short): invalid, as the ones it reads itself.
    pub fn count_unreadable(&self) {
        self.invalid.fetch_add(1, Ordering::Relaxed);
    }

    /// Packets found invalid.
    pub fn invalid(&self) -> u64 {
        self.invalid.load(Ordering::Relaxed)
    }

    /// Live connections counted by zone, protocol and state (for metrics: one
    /// walk of the table, nothing kept per connection).
    pub fn census(&self, now_ms: u64) -> std::collections::BTreeMap<Census, u64> {
        let mut out = std::collections::BTreeMap::new();
        let zones = self.each_zone();
        for (k, c) in zones.iter().flat_map(|z| z.entries()) {
            if k != c.orig.tuple || c.expired(now_ms) {
                continue;
            }
            let k = c.orig;
            let state = match &c.proto {
                ProtoState::Tcp(p) => {
                    let p = p.lock();
                    TcpState::coalesced((p[0].state, p[1].state)).name()
                }
                ProtoState::Other(s) => match s.load(Ordering::Relaxed) {
                    OTHER_FIRST => "FIRST",
                    OTHER_MULTIPLE => "MULTIPLE",
                    _ => "BIDIR",
                },
                ProtoState::Icmp(s) => match s.load(Ordering::Relaxed) {
                    ICMP_FIRST => "FIRST",
                    _ => "REPLY",
                },
            };
            let key = Census {
                zone: k.zone,
                proto: k.tuple.proto,
                state,
            };
            *out.entry(key).or_insert(0) += 1;
        }
        out
    }

    /// Connections, all zones.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Connections in `zone`.
    pub fn zone_len(&self, zone: u16) -> usize {
        self.zones
            .pin()
            .get(&zone)
            .map_or(0, |z| z.count.load(Ordering::Relaxed) as usize)
    }

    /// The limit of connections, all zones (`ct-set-maxconns`).
    pub fn set_limit(&self, n: usize) {
        self.limit.store(n, Ordering::Relaxed);
    }

    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// A zone's limit (`ct-set-limits zone=N,limit=M`); `None` removes it.
    pub fn set_zone_limit(&self, zone: u16, limit: Option<u32>) {
        let limits = self.zone_limits.pin();
        match limit {
            Some(l) => {
                limits.insert(zone, l);
            }
            None => {
                limits.remove(&zone);
            }
        }
    }

    pub fn zone_limit(&self, zone: u16) -> Option<u32> {
        self.zone_limits.pin().get(&zone).copied()
    }

    /// The limit of zones without one of their own (`ct-set-limits default=N`; 0:
    /// none).
    pub fn set_default_zone_limit(&self, limit: u32) {
        self.default_zone_limit.store(limit, Ordering::Relaxed);
    }

    pub fn default_zone_limit(&self) -> u32 {
        self.default_zone_limit.load(Ordering::Relaxed)
    }

    /// The zones with a limit of their own, ascending.
    pub fn limited_zones(&self) -> Vec<u16> {
        let mut z: Vec<u16> = self.zone_limits.pin().keys().copied().collect();
        z.sort_unstable();
        z
    }

    /// Sequence checking of TCP (`ct-enable-tcp-seq-chk`; on by default).
    pub fn set_tcp_seq_check(&self, on: bool) {
        self.seq_check.store(on, Ordering::Relaxed);
    }

    pub fn tcp_seq_check(&self) -> bool {
        self.seq_check.load(Ordering::Relaxed)
    }

    /// Every live connection (of `zone`, when given), ordered by zone and tuple.
    pub fn connections(&self, zone: Option<u16>, now_ms: u64) -> Vec<ConnView> {
        let zones: Vec<Arc<Zone>> = match zone {
            Some(z) => self.zones.pin().get(&z).cloned().into_iter().collect(),
            None => self.each_zone(),
        };
        let mut v: Vec<ConnView> = zones
            .iter()
            .flat_map(|z| z.entries())
            .filter(|(t, c)| *t == c.orig.tuple && !c.expired(now_ms))
            .map(|(_, c)| ConnView {
                zone: c.orig.zone,
                orig: c.orig.tuple,
                reply: c.reply.tuple,
                mark: c.mark.load(Ordering::Relaxed),
                label: c.label(),
                expires_in_ms: c.expires_ms.load(Ordering::Relaxed).saturating_sub(now_ms),
                tcp: match &c.proto {
                    ProtoState::Tcp(p) => {
                        let p = p.lock();
                        Some([p[0].view(), p[1].view()])
                    }
                    _ => None,
                },
                helper: c.helper,
            })
            .collect();
        v.sort_by_key(|c| (c.zone, c.orig));
        v
    }
}

/// The outcome for a packet of connection `c`: `bits`, tracked, its mark, label
/// and original direction.
fn seen(c: &Conn, bits: u8, zone: u16) -> CtOutcome {
    let related = if c.related { CtState::RELATED } else { 0 };
    CtOutcome {
        state: CtState(bits | related | CtState::TRACKED),
        zone,
        mark: c.mark.load(Ordering::Relaxed),
        label: c.label(),
        orig: Some(c.orig.tuple),
        rewrite: None,
    }
}

/// `out` with the rewrite connection `c`'s NAT makes of a packet of it (of the
/// reply direction when `reply`).
fn with_rewrite(c: &Conn, mut out: CtOutcome, reply: bool) -> CtOutcome {
    out.rewrite = c
        .nat
        .map(|(kind, translated)| nat::rewrite(kind, &c.orig.tuple, &translated, reply));
    out
}

/// A connection's own number, to start its NAT search from.
fn conn_seed(t: &Tuple) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher as _};
    // Fixed, so that a client's connections tend to the same address.
    let mut h = foldhash::fast::FixedState::default().build_hasher();
    t.src.hash(&mut h);
    let a = h.finish();
    t.hash(&mut h);
    (a & 0xffff_0000_0000_0000) | (h.finish() & 0x0000_ffff_ffff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuple::{IPPROTO_ICMP, IPPROTO_UDP};

    fn udp(src: u128, dst: u128, sp: u16, dp: u16) -> CtPacket {
        CtPacket {
            tuple: Tuple {
                src,
                dst,
                src_port: sp,
                dst_port: dp,
                proto: IPPROTO_UDP,
                ..Tuple::default()
            },
            ..CtPacket::default()
        }
    }

    const COMMIT: Commit = Commit {
        mark: None,
        label: None,
        nat: None,
        force: false,
        helper: None,
    };

    fn bits(o: &CtOutcome) -> String {
        o.state.to_string()
    }

    /// `alg=tftp`: the server's answer from a port of its own is related, and so
    /// is every packet of the connection it opens; nobody else's is.
    #[test]
    fn a_tftp_request_makes_the_servers_answer_related() {
        let ct = Conntrack::default();
        let tftp = Commit {
            helper: Some(crate::helper::Helper::Tftp),
            ..COMMIT
        };
        assert_eq!(
            bits(&ct.execute(&udp(1, 2, 40000, 69), 0, Some(&tftp), 0)),
            "new|trk"
        );
        let answer = udp(2, 1, 50123, 40000);
        assert_eq!(bits(&ct.execute(&answer, 0, None, 1)), "new|rel|trk");
        assert_eq!(
            bits(&ct.execute(&udp(3, 1, 50123, 40000), 0, None, 1)),
            "new|trk"
        );
        assert_eq!(
            bits(&ct.execute(&answer, 0, Some(&COMMIT), 2)),
            "new|rel|trk"
        );
        let ack = udp(1, 2, 40000, 50123);
        assert_eq!(bits(&ct.execute(&ack, 0, None, 3)), "est|rel|rpl|trk");
        let dump = ct.connections(Some(0), 3);
        assert_eq!(dump.len(), 2);
        assert_eq!(
            dump.iter().filter(|c| c.helper.is_some()).count(),
            1,
            "the request's connection has the helper"
        );
        // Without the helper, nothing is expected.
        let plain = Conntrack::default();
        plain.execute(&udp(1, 2, 40000, 69), 0, Some(&COMMIT), 0);
        assert_eq!(bits(&plain.execute(&answer, 0, None, 1)), "new|trk");
    }

    /// UDP: new until a reply, then established both ways; an uncommitted packet
    /// keeps nothing; the timeouts are Open vSwitch's (60 s, then 30 s).
    #[test]
    fn udp_is_new_until_answered() {
        let ct = Conntrack::default();
        let a = udp(1, 2, 1000, 53);
        let b = udp(2, 1, 53, 1000);
        assert_eq!(bits(&ct.execute(&a, 0, None, 0)), "new|trk");
        assert!(ct.is_empty(), "not committed: nothing kept");
        let first = ct.execute(&a, 0, Some(&COMMIT), 0);
        assert_eq!(
            (bits(&first), first.orig),
            ("new|trk".into(), Some(a.tuple))
        );
        assert_eq!(bits(&ct.execute(&a, 0, None, 10)), "new|trk");
        assert_eq!(bits(&ct.execute(&b, 0, None, 20)), "est|rpl|trk");
        let again = ct.execute(&a, 0, None, 30);
        assert_eq!(
            (bits(&again), again.orig),
            ("est|trk".into(), Some(a.tuple))
        );
        assert_eq!(ct.connections(None, 30)[0].expires_in_ms, 30_000);
        // Another zone knows nothing of it.
        assert_eq!(bits(&ct.execute(&b, 1, None, 40)), "new|trk");
        // Expired after 30 s of silence.
        assert_eq!(bits(&ct.execute(&b, 0, None, 30 + 30_000)), "new|trk");
        assert!(ct.is_empty());
    }

    /// An ICMP error quoting a connection's packet is related to it, as the reply
    /// when it comes back against the packet; quoting nothing known, invalid.
    #[test]
    fn icmp_errors_are_related_to_what_they_quote() {
        let ct = Conntrack::default();
        let a = udp(1, 2, 1000, 53);
        ct.execute(&a, 7, Some(&COMMIT), 0);
        let err = |quoted: Tuple| CtPacket {
            tuple: Tuple {
                src: 2,
                dst: 1,
                proto: IPPROTO_ICMP,
                icmp_type: 3,
                icmp_code: 3,
                ..Tuple::default()
            },
            tcp: None,
            quoted: Some(quoted),
        };
        assert_eq!(bits(&ct.execute(&err(a.tuple), 7, None, 1)), "rel|rpl|trk");
        let other = udp(1, 2, 1001, 53);
        assert_eq!(bits(&ct.execute(&err(other.tuple), 7, None, 1)), "inv|trk");
        // An echo and its answer; an ICMP type that is neither is invalid.
        let echo = |src, dst, t| CtPacket {
            tuple: Tuple {
                src,
                dst,
                src_port: 9,
                dst_port: 9,
                proto: IPPROTO_ICMP,
                icmp_type: t,
                ..Tuple::default()
            },
            ..CtPacket::default()
        };
        assert_eq!(
            bits(&ct.execute(&echo(1, 2, 8), 0, Some(&COMMIT), 1)),
            "new|trk"
        );
        assert_eq!(bits(&ct.execute(&echo(2, 1, 0), 0, None, 2)), "est|rpl|trk");
        assert_eq!(bits(&ct.execute(&echo(2, 1, 0), 0, None, 2)), "est|rpl|trk");
        assert_eq!(
            bits(&ct.execute(&echo(3, 1, 0), 0, None, 2)),
            "inv|trk",
            "an answer to nothing"
        );
        assert_eq!(bits(&ct.execute(&echo(1, 2, 9), 0, None, 2)), "inv|trk");
    }

    /// A commit writes the mark and label under their masks; every packet of the
    /// connection reads them.
    #[test]
    fn marks_and_labels_are_written_under_their_masks() {
        let ct = Conntrack::default();
        let a = udp(1, 2, 1000, 53);
        let c = Commit {
            mark: Some((0x1234, 0xffff)),
            label: Some((1 << 100 | 5, u128::MAX)),
            nat: None,
            force: false,
            helper: None,
        };
        ct.execute(&a, 0, Some(&c), 0);
        let c2 = Commit {
            mark: Some((0xab00_0000, 0xff00_0000)),
            label: Some((0, 0xf)),
            nat: None,
            force: false,
            helper: None,
        };
        let o = ct.execute(&a, 0, Some(&c2), 1);
        assert_eq!((o.mark, o.label), (0xab00_1234, 1 << 100));
        let r = ct.execute(&udp(2, 1, 53, 1000), 0, None, 2);
        assert_eq!((r.mark, r.label), (0xab00_1234, 1 << 100));
    }

    /// The global limit and a zone's: past them a commit keeps nothing (the packet
    /// is new all the same); a zone's flush takes its connections alone.
    #[test]
    fn limits_hold_and_a_zone_flush_takes_its_own() {
        let ct = Conntrack::default();
        ct.set_limit(3);
        ct.set_zone_limit(5, Some(1));
        assert_eq!((ct.limit(), ct.zone_limit(5)), (3, Some(1)));
        for p in 1..=2 {
            ct.execute(&udp(1, 2, p, 53), 5, Some(&COMMIT), 0);
        }
        assert_eq!(ct.zone_len(5), 1, "the zone's limit");
        for p in 1..=4 {
            let o = ct.execute(&udp(1, 2, p, 53), 6, Some(&COMMIT), 0);
            assert_eq!(bits(&o), "new|trk");
        }
        assert_eq!((ct.len(), ct.zone_len(6)), (3, 2));
        ct.set_zone_limit(5, None);
        assert_eq!(ct.zone_limit(5), None);
        assert_eq!(ct.limited_zones(), Vec::<u16>::new());
        assert_eq!(ct.flush_zone(6), 2);
        assert_eq!((ct.len(), ct.zone_len(5), ct.zone_len(6)), (1, 1, 0));
        assert_eq!(ct.flush_zone(9), 0);
        assert_eq!(ct.flush(), 1);
        assert!(ct.is_empty());
        // A default for zones without a limit of their own; a zone's own beats it.
        ct.set_limit(100);
        ct.set_default_zone_limit(3);
        ct.set_zone_limit(10, Some(1));
        for p in 1..=5 {
            ct.execute(&udp(1, 2, p, 53), 9, Some(&COMMIT), 0);
            ct.execute(&udp(1, 2, p, 53), 10, Some(&COMMIT), 0);
        }
        assert_eq!((ct.zone_len(9), ct.zone_len(10)), (3, 1));
        assert_eq!(ct.limited_zones(), vec![10]);
        // Counted for metrics: made, and refused by the limits (zone 5's, the
        // global one's, then zones 9's and 10's); none invalid.
        assert_eq!(ct.committed(), 1 + 2 + 3 + 1);
        assert_eq!(ct.over_limit(), 1 + 2 + 2 + 4);
        assert_eq!(ct.invalid(), 0);
    }

    /// A zone's own timeout policy holds for its connections alone, from their
    /// next packet; without it, the tracker's again.
    #[test]
    fn a_zones_timeout_policy_holds_for_its_connections() {
        let ct = Conntrack::default();
        let mut quick = Timeouts::default();
        quick.set("udp_first", 2);
        ct.set_zone_timeouts(3, Some(quick));
        assert_eq!(ct.zone_timeouts(3).udp_first, 2);
        assert_eq!(ct.zone_timeouts(4), Timeouts::default());
        ct.execute(&udp(1, 2, 1000, 53), 3, Some(&COMMIT), 0);
        ct.execute(&udp(1, 2, 1000, 53), 4, Some(&COMMIT), 0);
        let live = |at| ct.connections(None, at).len();
        assert_eq!((live(1_999), live(2_000)), (2, 1), "zone 3's went at 2 s");
        assert_eq!(live(60_000), 0, "zone 4's at Open vSwitch's 60 s");
        ct.set_zone_timeouts(3, None);
        assert_eq!(ct.zone_timeouts(3), Timeouts::default());
    }

    /// The census counts live connections by zone, protocol and state; invalid
    /// packets are counted.
    #[test]
    fn the_census_counts_connections_by_zone_protocol_and_state() {
        let ct = Conntrack::default();
        ct.execute(&udp(1, 2, 1000, 53), 3, Some(&COMMIT), 0);
        ct.execute(&udp(1, 2, 1001, 53), 3, Some(&COMMIT), 0);
        ct.execute(&udp(2, 1, 53, 1001), 3, None, 1);
        ct.execute(&udp(1, 2, 1002, 53), 4, Some(&COMMIT), 0);
        let census: Vec<(u16, u8, &str, u64)> = ct
            .census(2)
            .into_iter()
            .map(|(c, n)| (c.zone, c.proto, c.state, n))
            .collect();
        assert_eq!(
            census,
            vec![
                (3, IPPROTO_UDP, "BIDIR", 1),
                (3, IPPROTO_UDP, "FIRST", 1),
                (4, IPPROTO_UDP, "FIRST", 1),
            ]
        );
        // Expired connections are not counted.
        assert!(ct.census(10 * 60 * 1000).is_empty());
        // An ICMP message that is no query, answer or error: invalid.
        let odd = CtPacket {
            tuple: Tuple {
                src: 1,
                dst: 2,
                proto: IPPROTO_ICMP,
                icmp_type: 99,
                ..Tuple::default()
            },
            ..CtPacket::default()
        };
        ct.execute(&odd, 3, None, 3);
        assert_eq!(ct.invalid(), 1);
    }

    /// `force`: a reply-direction packet committed with it ends the connection and
    /// starts one in its own direction.
    #[test]
    fn force_turns_a_connection_around() {
        let ct = Conntrack::default();
        let (a, b) = (udp(1, 2, 1000, 53), udp(2, 1, 53, 1000));
        ct.execute(&a, 0, Some(&COMMIT), 0);
        let force = Commit {
            force: true,
            ..COMMIT
        };
        let o = ct.execute(&b, 0, Some(&force), 1);
        assert_eq!((bits(&o), o.orig), ("new|trk".into(), Some(b.tuple)));
        assert_eq!(ct.len(), 1);
        assert_eq!(ct.connections(None, 1)[0].orig, b.tuple);
        // In its original direction, force changes nothing.
        assert_eq!(bits(&ct.execute(&b, 0, Some(&force), 2)), "new|trk");
        assert_eq!(bits(&ct.execute(&a, 0, None, 3)), "est|rpl|trk");
    }

    /// A TCP handshake and data as the dump shows it.
    #[test]
    fn a_tcp_connection_is_listed_with_its_ends() {
        use crate::tcp::{ACK, SYN};
        let ct = Conntrack::default();
        let t = Tuple {
            src: 1,
            dst: 2,
            src_port: 40000,
            dst_port: 80,
            proto: IPPROTO_TCP,
            ..Tuple::default()
        };
        let seg = |flags, seq, ack| TcpSegment {
            flags,
            seq,
            ack,
            window: 64000,
            wscale: None,
            payload_len: 0,
        };
        let go = |t: Tuple, s: TcpSegment, commit: bool| {
            let pkt = CtPacket {
                tuple: t,
                tcp: Some(s),
                quoted: None,
            };
            bits(&ct.execute(&pkt, 0, commit.then_some(&COMMIT), 0))
        };
        let r = t.reverse().unwrap();
        assert_eq!(
            go(t, seg(ACK | SYN, 1, 1), true),
            "inv|trk",
            "SYN|ACK opens nothing"
        );
        assert_eq!(go(t, seg(SYN, 100, 0), true), "new|trk");
        assert_eq!(go(r, seg(SYN | ACK, 500, 101), false), "est|rpl|trk");
        assert_eq!(go(t, seg(ACK, 101, 501), false), "est|trk");
        let v = ct.connections(Some(0), 0);
        assert_eq!(v.len(), 1);
        assert_eq!(
            v[0].tcp.map(|[o, r]| (o.state, r.state)),
            Some((TcpState::Established, TcpState::Established))
        );
        assert_eq!((v[0].orig, v[0].reply), (t, r));
        assert_eq!(v[0].expires_in_ms, 24 * 3600 * 1000);
        // Data far out of the window: invalid, the connection kept as it was.
        let wild = TcpSegment {
            payload_len: 100,
            ..seg(ACK, 101 + 0x1000_0000, 501)
        };
        assert_eq!(go(t, wild, false), "inv|trk");
        assert_eq!(ct.len(), 1);
    }
}
