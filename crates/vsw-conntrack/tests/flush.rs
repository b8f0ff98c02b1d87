//! Flushing by filter: exactly the connections a filter names go, in the zones
//! it names, as Open vSwitch's NXT_CT_FLUSH takes them.

use vsw_conntrack::tuple::{IPPROTO_ICMP, IPPROTO_UDP};
use vsw_conntrack::{Commit, Conntrack, CtPacket, FlushFilter, Tuple, TupleFilter};

fn udp(src: u128, dst: u128, sp: u16, dp: u16) -> Tuple {
    Tuple {
        src,
        dst,
        src_port: sp,
        dst_port: dp,
        proto: IPPROTO_UDP,
        ..Tuple::default()
    }
}

fn echo(src: u128, dst: u128, id: u16) -> Tuple {
    Tuple {
        src,
        dst,
        src_port: id,
        dst_port: id,
        proto: IPPROTO_ICMP,
        icmp_type: 8,
        ..Tuple::default()
    }
}

/// A tracker holding `conns` (zone, tuple, mark), each committed.
fn tracker(conns: &[(u16, Tuple, u32)]) -> Conntrack {
    let ct = Conntrack::default();
    for (zone, t, mark) in conns {
        let pkt = CtPacket {
            tuple: *t,
            ..CtPacket::default()
        };
        let commit = Commit {
            mark: Some((*mark, u32::MAX)),
            ..Commit::default()
        };
        ct.execute(&pkt, *zone, Some(&commit), 0);
    }
    assert_eq!(ct.len(), conns.len());
    conns_left(&ct);
    ct
}

fn conns_left(ct: &Conntrack) -> Vec<(u16, Tuple)> {
    ct.connections(None, 0)
        .into_iter()
        .map(|c| (c.zone, c.orig))
        .collect()
}

const DNS: u16 = 53;

fn all() -> Vec<(u16, Tuple, u32)> {
    vec![
        (0, udp(1, 9, 1000, DNS), 0),
        (1, udp(1, 9, 1000, DNS), 0),
        (1, udp(2, 9, 1000, 80), 7),
        (2, udp(3, 9, 1001, DNS), 0),
        (2, echo(1, 9, 33), 0),
    ]
}

#[test]
fn a_filter_takes_what_it_names_in_the_zones_it_names() {
    let port53 = FlushFilter {
        proto: IPPROTO_UDP,
        orig: TupleFilter {
            dst_port: DNS,
            ..TupleFilter::default()
        },
        ..FlushFilter::default()
    };
    // In zone 1 only.
    let ct = tracker(&all());
    assert_eq!(ct.flush_matching(Some(1), &port53), 1);
    assert!(!conns_left(&ct).contains(&(1, udp(1, 9, 1000, DNS))));
    assert_eq!(ct.len(), 4);
    // No zone, a partial tuple: every zone's.
    assert_eq!(ct.flush_matching(None, &port53), 2);
    assert_eq!(
        conns_left(&ct),
        vec![(1, udp(2, 9, 1000, 80)), (2, echo(1, 9, 33))]
    );

    // No zone, one whole original tuple: zone 0's alone (Open vSwitch's rule).
    let ct = tracker(&all());
    let whole = FlushFilter {
        proto: IPPROTO_UDP,
        orig: TupleFilter {
            src: Some(1),
            dst: Some(9),
            src_port: 1000,
            dst_port: DNS,
            ..TupleFilter::default()
        },
        ..FlushFilter::default()
    };
    assert_eq!(ct.flush_matching(None, &whole), 1);
    assert!(conns_left(&ct).contains(&(1, udp(1, 9, 1000, DNS))));
    // The same connection named by its reply direction's tuple.
    let answer = FlushFilter {
        orig: TupleFilter {
            src: Some(9),
            dst: Some(1),
            src_port: DNS,
            dst_port: 1000,
            ..TupleFilter::default()
        },
        ..whole
    };
    assert_eq!(ct.flush_matching(Some(1), &answer), 1);
    assert!(!conns_left(&ct).contains(&(1, udp(1, 9, 1000, DNS))));

    // By the reply direction: its source is the original's destination.
    let ct = tracker(&all());
    let from_3 = FlushFilter {
        reply: TupleFilter {
            dst: Some(3),
            ..TupleFilter::default()
        },
        ..FlushFilter::default()
    };
    assert_eq!(ct.flush_matching(None, &from_3), 1);
    // By mark under a mask.
    let marked = FlushFilter {
        mark: 0x3,
        mark_mask: 0x3,
        ..FlushFilter::default()
    };
    assert_eq!(ct.flush_matching(None, &marked), 1);
    assert!(!conns_left(&ct).contains(&(1, udp(2, 9, 1000, 80))));
    // ICMP: id, type and code are compared; a wrong id takes nothing.
    let icmp = |id| FlushFilter {
        proto: IPPROTO_ICMP,
        orig: TupleFilter {
            src: Some(1),
            dst: Some(9),
            icmp_id: id,
            icmp_type: 8,
            ..TupleFilter::default()
        },
        ..FlushFilter::default()
    };
    assert_eq!(ct.flush_matching(Some(2), &icmp(34)), 0);
    assert_eq!(ct.flush_matching(Some(2), &icmp(33)), 1);
    // IPv6 only: none of these.
    let v6 = FlushFilter {
        v6: Some(true),
        ..FlushFilter::default()
    };
    assert_eq!(ct.flush_matching(None, &v6), 0);
    // An empty filter: the zone, or everything.
    assert_eq!(ct.flush_matching(Some(0), &FlushFilter::default()), 1);
    assert_eq!(ct.flush_matching(None, &FlushFilter::default()), 1);
    assert!(ct.is_empty());
}

/// A zone flushed again and again while two threads make connections in it and
/// in another: every count the tracker keeps still says what its tables hold.
#[test]
fn counts_stay_true_when_a_zone_is_flushed_while_its_connections_are_made() {
    let ct = Conntrack::default();
    std::thread::scope(|s| {
        for thread in 0..2u128 {
            let ct = &ct;
            s.spawn(move || {
                for i in 0..5_000u16 {
                    let pkt = CtPacket {
                        tuple: udp(thread + 1, 9, i, 53),
                        ..CtPacket::default()
                    };
                    let zone = 1 + i % 2;
                    ct.execute(&pkt, zone, Some(&Commit::default()), 0);
                }
            });
        }
        s.spawn(|| {
            for _ in 0..300 {
                ct.flush_zone(1);
                std::thread::yield_now();
            }
        });
    });
    assert_eq!(ct.zone_len(2), 5_000, "the other zone untouched");
    assert_eq!(ct.zone_len(1), ct.connections(Some(1), 0).len());
    assert_eq!(ct.len(), ct.connections(None, 0).len());
    ct.flush_zone(1);
    assert_eq!(ct.len(), 5_000);
}
