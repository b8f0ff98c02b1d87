//! The tracker against a reference model: a plain map of connections and the
//! rules of Open vSwitch's tracker written out the simplest way (TCP in the
//! liberal mode, where flags alone decide). Random packets of a few hosts, ports,
//! protocols, both directions, two zones, ICMP errors quoting them, commits with
//! marks and labels, time passing (timeouts), limits and zone flushes: every
//! packet's `ct_state`, mark, label and original tuple, and the counts, agree.

use std::collections::BTreeMap;

use proptest::prelude::*;
use vsw_conntrack::tcp::{ACK, FIN, PSH, RST, SYN};
use vsw_conntrack::tuple::{IPPROTO_ICMP, IPPROTO_TCP, IPPROTO_UDP};
use vsw_conntrack::{Commit, Conntrack, CtPacket, CtState, TcpSegment, TcpState, Timeouts, Tuple};

#[derive(Clone, Debug)]
enum Op {
    Packet {
        zone: u16,
        tuple: Tuple,
        flags: u16,
        /// An ICMP error quoting `tuple` (sent against it).
        error: bool,
        commit: Option<(u32, u128)>,
    },
    Wait(u64),
    FlushZone(u16),
}

fn tuple() -> impl Strategy<Value = Tuple> {
    (
        0u128..2,
        0u128..2,
        1u16..3,
        1u16..3,
        prop_oneof![
            Just((IPPROTO_UDP, 0u8)),
            Just((IPPROTO_TCP, 0)),
            Just((IPPROTO_ICMP, 8)),
            Just((IPPROTO_ICMP, 0)),
            Just((IPPROTO_ICMP, 11)),
        ],
    )
        .prop_map(|(a, b, sp, dp, (proto, icmp_type))| {
            let icmp = proto == IPPROTO_ICMP;
            Tuple {
                src: 10 + a,
                dst: 10 + b,
                // ICMP queries: the identifier as both ports.
                src_port: sp,
                dst_port: if icmp { sp } else { dp },
                proto,
                v6: false,
                icmp_type,
                icmp_code: 0,
            }
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (
            0u16..2,
            tuple(),
            prop_oneof![
                Just(SYN), Just(SYN | ACK), Just(ACK), Just(FIN | ACK), Just(RST),
                Just(RST | ACK), Just(PSH | ACK), Just(FIN), Just(SYN | FIN),
            ],
            proptest::bool::weighted(0.1),
            proptest::option::of((0u32..4, 0u128..4)),
        )
            .prop_map(|(zone, tuple, flags, error, commit)| Op::Packet {
                zone,
                tuple,
                flags,
                error,
                commit
            }),
        // Short waits, and ones across the timeouts (30 s, 45 s, 60 s).
        1 => prop_oneof![0u64..5_000, 25_000u64..70_000].prop_map(Op::Wait),
        1 => (0u16..2).prop_map(Op::FlushZone),
    ]
}

#[derive(Clone, Debug)]
enum Kind {
    Other { bidir: bool },
    Icmp { replied: bool },
    Tcp { ends: [TcpState; 2] },
}

#[derive(Clone, Debug)]
struct Conn {
    reply: Tuple,
    kind: Kind,
    mark: u32,
    label: u128,
    expires: u64,
}

/// The model: connections by (zone, original tuple).
#[derive(Default)]
struct Model {
    conns: BTreeMap<(u16, Tuple), Conn>,
    limit: usize,
    zone_limit: usize,
}

const T: Timeouts = Timeouts {
    tcp_syn_sent: 30,
    tcp_syn_recv: 30,
    tcp_established: 24 * 60 * 60,
    tcp_fin_wait: 15 * 60,
    tcp_time_wait: 45,
    tcp_close: 30,
    udp_first: 60,
    udp_single: 60,
    udp_multiple: 30,
    icmp_first: 60,
    icmp_reply: 30,
};

fn tcp_flags_invalid(f: u16) -> bool {
    (f & SYN != 0 && f & (RST | FIN) != 0)
        || (f & SYN == 0 && f & (ACK | RST) == 0)
        || (f & ACK == 0 && f & (FIN | PSH) != 0)
}

/// (state bits, mark, label, orig) as the model says.
type Said = (u8, u32, u128, Option<Tuple>);

impl Model {
    /// The connection `t` is of in `zone` (alive at `now`): its original tuple
    /// and whether `t` is its reply direction. Expired ones go.
    fn find(&mut self, zone: u16, t: &Tuple, now: u64) -> Option<(Tuple, bool)> {
        self.conns.retain(|_, c| c.expires > now);
        if self.conns.contains_key(&(zone, *t)) {
            return Some((*t, false));
        }
        self.conns
            .iter()
            .find(|((z, _), c)| *z == zone && c.reply == *t)
            .map(|((_, o), _)| (*o, true))
    }

    fn packet(
        &mut self,
        zone: u16,
        t: &Tuple,
        flags: u16,
        error: bool,
        commit: Option<(u32, u128)>,
        now: u64,
    ) -> Said {
        const TRK: u8 = CtState::TRACKED;
        let inv = (CtState::INVALID | TRK, 0, 0, None);
        if error {
            let Some(back) = t.reverse() else { return inv };
            return match self.find(zone, &back, now) {
                Some((o, reply)) => {
                    let c = &self.conns[&(zone, o)];
                    let r = if reply { CtState::REPLY } else { 0 };
                    (CtState::RELATED | r | TRK, c.mark, c.label, Some(o))
                }
                None => inv,
            };
        }
        if t.proto == IPPROTO_ICMP && t.reverse().is_none() {
            return inv;
        }
        if let Some((o, reply)) = self.find(zone, t, now) {
            let c = self.conns.get_mut(&(zone, o)).unwrap();
            let secs = |s: u32| now + u64::from(s) * 1000;
            let est = CtState::ESTABLISHED | if reply { CtState::REPLY } else { 0 };
            let bits = match &mut c.kind {
                Kind::Other { bidir } => {
                    *bidir |= reply;
                    c.expires = secs(if *bidir { T.udp_multiple } else { T.udp_single });
                    if *bidir {
                        est
                    } else {
                        CtState::NEW
                    }
                }
                Kind::Icmp { replied } => {
                    *replied |= reply;
                    c.expires = secs(if *replied { T.icmp_reply } else { T.icmp_first });
                    if *replied {
                        est
                    } else {
                        CtState::NEW
                    }
                }
                Kind::Tcp { ends } => {
                    if tcp_flags_invalid(flags) {
                        return inv;
                    }
                    let (s, d) = if reply { (1, 0) } else { (0, 1) };
                    let mut reopen = false;
                    let mut bits = None;
                    if flags & (SYN | ACK) == SYN {
                        if ends[0] >= TcpState::FinWait2 && ends[1] >= TcpState::FinWait2 {
                            reopen = true;
                        } else if ends[s] <= TcpState::SynSent {
                            ends[s] = TcpState::SynSent;
                            c.expires = secs(T.tcp_syn_sent);
                            bits = Some(CtState::NEW);
                        }
                    }
                    if reopen {
                        self.conns.remove(&(zone, o));
                        return self.fresh(zone, t, flags, commit, now);
                    }
                    if let Some(b) = bits {
                        b
                    } else {
                        if ends[s] < TcpState::SynSent {
                            ends[s] = TcpState::SynSent;
                        }
                        if flags & FIN != 0 && ends[s] < TcpState::Closing {
                            ends[s] = TcpState::Closing;
                        }
                        if flags & ACK != 0 {
                            if ends[d] == TcpState::SynSent {
                                ends[d] = TcpState::Established;
                            } else if ends[d] == TcpState::Closing {
                                ends[d] = TcpState::FinWait2;
                            }
                        }
                        if flags & RST != 0 {
                            *ends = [TcpState::TimeWait; 2];
                        }
                        let (a, b) = (ends[s], ends[d]);
                        c.expires = secs(if a >= TcpState::FinWait2 && b >= TcpState::FinWait2 {
                            T.tcp_close
                        } else if a >= TcpState::Closing && b >= TcpState::Closing {
                            T.tcp_time_wait
                        } else if a < TcpState::Established || b < TcpState::Established {
                            T.tcp_syn_recv
                        } else if a >= TcpState::Closing || b >= TcpState::Closing {
                            T.tcp_fin_wait
                        } else {
                            T.tcp_established
                        });
                        est
                    }
                }
            };
            if let Some((m, l)) = commit {
                c.mark = m;
                c.label = l;
            }
            return (bits | TRK, c.mark, c.label, Some(o));
        }
        self.fresh(zone, t, flags, commit, now)
    }

    fn fresh(
        &mut self,
        zone: u16,
        t: &Tuple,
        flags: u16,
        commit: Option<(u32, u128)>,
        now: u64,
    ) -> Said {
        let may = match t.proto {
            IPPROTO_TCP => !tcp_flags_invalid(flags) && flags & (SYN | ACK) != (SYN | ACK),
            IPPROTO_ICMP => t.icmp_type == 8,
            _ => true,
        };
        if !may {
            return (CtState::INVALID | CtState::TRACKED, 0, 0, None);
        }
        let new = (CtState::NEW | CtState::TRACKED, 0, 0, Some(*t));
        let Some((mark, label)) = commit else {
            return new;
        };
        let in_zone = self.conns.keys().filter(|(z, _)| *z == zone).count();
        if self.conns.len() >= self.limit || in_zone >= self.zone_limit {
            return new;
        }
        let kind = match t.proto {
            IPPROTO_TCP => Kind::Tcp {
                ends: [TcpState::SynSent, TcpState::Closed],
            },
            IPPROTO_ICMP => Kind::Icmp { replied: false },
            _ => Kind::Other { bidir: false },
        };
        let secs = match t.proto {
            IPPROTO_TCP => T.tcp_syn_sent,
            IPPROTO_ICMP => T.icmp_first,
            _ => T.udp_first,
        };
        self.conns.insert(
            (zone, *t),
            Conn {
                reply: t.reverse().unwrap(),
                kind,
                mark,
                label,
                expires: now + u64::from(secs) * 1000,
            },
        );
        (CtState::NEW | CtState::TRACKED, mark, label, Some(*t))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn the_tracker_agrees_with_the_model(
        ops in proptest::collection::vec(op(), 1..60),
        limit in 1usize..8,
        zone_limit in 1u32..6,
    ) {
        let ct = Conntrack::new(T);
        ct.set_tcp_seq_check(false);
        ct.set_limit(limit);
        ct.set_zone_limit(1, Some(zone_limit));
        let mut m = Model { limit, zone_limit: usize::MAX, ..Model::default() };
        let mut now = 1_000u64;
        for op in ops {
            match op {
                Op::Packet { zone, tuple, flags, error, commit } => {
                    m.zone_limit = if zone == 1 { zone_limit as usize } else { usize::MAX };
                    let seg = TcpSegment { flags, seq: 1, ack: 1, window: 1000, wscale: None, payload_len: 0 };
                    let (pkt, said) = if error {
                        // An ICMP error about `tuple`, from its destination.
                        let quoted = tuple;
                        let e = Tuple { src: tuple.dst, dst: tuple.src, src_port: 0, dst_port: 0,
                            proto: IPPROTO_ICMP, v6: false, icmp_type: 3, icmp_code: 1 };
                        (CtPacket { tuple: e, tcp: None, quoted: Some(quoted) },
                         m.packet(zone, &tuple, flags, true, commit, now))
                    } else {
                        let tcp = (tuple.proto == IPPROTO_TCP).then_some(seg);
                        (CtPacket { tuple, tcp, quoted: None },
                         m.packet(zone, &tuple, flags, false, commit, now))
                    };
                    let c = commit.map(|(mark, label)| Commit {
                        mark: Some((mark, u32::MAX)),
                        label: Some((label, u128::MAX)),
                        nat: None,
                        force: false,
                        helper: None,
                    });
                    let got = ct.execute(&pkt, zone, c.as_ref(), now);
                    prop_assert_eq!(
                        (got.state.0, got.mark, got.label, got.orig),
                        said,
                        "{:?} flags {:#x} in zone {}", pkt, flags, zone
                    );
                    prop_assert_eq!(got.zone, zone);
                }
                Op::Wait(ms) => {
                    now += ms;
                    m.conns.retain(|_, c| c.expires > now);
                    ct.sweep(now);
                }
                Op::FlushZone(z) => {
                    let n = m.conns.keys().filter(|(zone, _)| *zone == z).count();
                    m.conns.retain(|(zone, _), _| *zone != z);
                    prop_assert_eq!(ct.flush_zone(z), n);
                }
            }
            // Expired connections may linger in the tracker until looked up or
            // swept: compare after a sweep.
            ct.sweep(now);
            m.conns.retain(|_, c| c.expires > now);
            prop_assert_eq!(ct.len(), m.conns.len());
            for z in 0..2u16 {
                let n = m.conns.keys().filter(|(zone, _)| *zone == z).count();
                prop_assert_eq!(ct.zone_len(z), n);
            }
        }
    }

    /// With sequence checking on, any segments of any connection: never a panic,
    /// and the counts stay those of the connections listed.
    #[test]
    fn any_segments_keep_the_table_whole(
        segs in proptest::collection::vec(
            (any::<bool>(), any::<u16>(), any::<u32>(), any::<u32>(), any::<u16>(),
             proptest::option::of(any::<u8>()), 0u32..70_000, any::<bool>()),
            1..40),
    ) {
        let ct = Conntrack::default();
        let t = Tuple { src: 1, dst: 2, src_port: 5, dst_port: 6, proto: IPPROTO_TCP, ..Tuple::default() };
        for (reply, flags, seq, ack, window, wscale, payload_len, commit) in segs {
            let tuple = if reply { t.reverse().unwrap() } else { t };
            let seg = TcpSegment { flags: flags & 0x3f, seq, ack, window, wscale, payload_len };
            let pkt = CtPacket { tuple, tcp: Some(seg), quoted: None };
            let out = ct.execute(&pkt, 0, commit.then_some(&Commit::default()), 10);
            prop_assert!(out.state.has(CtState::TRACKED));
            prop_assert_eq!(ct.connections(None, 10).len(), ct.len());
            prop_assert!(ct.len() <= 1);
        }
    }
}
