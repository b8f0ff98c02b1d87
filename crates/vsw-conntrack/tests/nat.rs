//! NAT: every connection gets a translated tuple no other connection's reply
//! holds; its packets are rewritten there and its replies back; a full range
//! refuses the rest (counted), which stay new and uncommitted.

use std::collections::HashSet;

use proptest::prelude::*;
use vsw_conntrack::tuple::{IPPROTO_ICMP, IPPROTO_UDP};
use vsw_conntrack::{
    Commit, Conntrack, Ct, CtPacket, CtState, NatKind, NatRange, NatRewrite, Tuple,
};

fn pkt(t: Tuple) -> CtPacket {
    CtPacket {
        tuple: t,
        ..CtPacket::default()
    }
}

/// A commit that NATs `kind`'s end into addresses `min..=max` and `ports`.
fn nat(kind: NatKind, (min, max): (u128, u128), ports: Option<(u16, u16)>) -> Commit {
    Commit {
        nat: Some(NatRange {
            kind,
            addr_min: min,
            addr_max: max,
            ports,
        }),
        ..Commit::default()
    }
}

/// A UDP tuple.
fn udp(src: u128, dst: u128, src_port: u16, dst_port: u16) -> Tuple {
    Tuple {
        src,
        dst,
        src_port,
        dst_port,
        proto: IPPROTO_UDP,
        ..Tuple::default()
    }
}

/// The packet `t` as rewritten by `r`.
fn rewritten(mut t: Tuple, r: &NatRewrite) -> Tuple {
    if let Some((a, p)) = r.src {
        t.src = a;
        t.src_port = p;
        if t.proto == IPPROTO_ICMP {
            t.dst_port = p;
        }
    }
    if let Some((a, p)) = r.dst {
        t.dst = a;
        t.dst_port = p;
        if t.proto == IPPROTO_ICMP {
            t.src_port = p;
        }
    }
    t
}

#[test]
fn snat_rewrites_out_and_back_and_sets_its_bits() {
    let ct = Conntrack::default();
    let snat = nat(NatKind::Src, (500, 500), None);
    let out = udp(10, 20, 4000, 53);
    let commit = Ct {
        zone: 3,
        commit: Some(&snat),
        nat: true,
        natted: false,
        payload: &[],
    };
    let first = ct.track(&pkt(out), &commit, 0);
    assert_eq!(first.state.to_string(), "new|trk|snat");
    let r = first.rewrite.unwrap();
    assert_eq!(
        r,
        NatRewrite {
            src: Some((500, 4000)),
            dst: None
        },
        "the port kept"
    );
    // The reply, to the translated address: back to the client.
    let translated = rewritten(out, &r);
    let reply = translated.reverse().unwrap();
    let lookup = Ct {
        zone: 3,
        commit: None,
        nat: true,
        natted: false,
        payload: &[],
    };
    let back = ct.track(&pkt(reply), &lookup, 1);
    // Its destination rewritten: `+dnat`, as Open vSwitch marks an SNAT reply.
    assert_eq!(back.state.to_string(), "est|rpl|trk|dnat");
    assert_eq!(
        rewritten(reply, &back.rewrite.unwrap()),
        out.reverse().unwrap()
    );
    // Without `nat` in the ct(), the packet is tracked but not rewritten.
    let plain = ct.track(
        &pkt(reply),
        &Ct {
            nat: false,
            ..lookup
        },
        2,
    );
    assert_eq!(
        (plain.state.to_string().as_str(), plain.rewrite),
        ("est|rpl|trk", None)
    );
    // A second ct in the zone after the rewrite (`natted`): the same connection,
    // not rewritten again.
    let again = ct.track(
        &pkt(translated),
        &Ct {
            natted: true,
            ..lookup
        },
        2,
    );
    assert_eq!(
        (again.state.to_string().as_str(), again.rewrite),
        ("est|trk|snat", None)
    );
    // A second client on the same port takes another (ephemeral) port.
    let other = Tuple { src: 11, ..out };
    let second = ct.track(&pkt(other), &commit, 3).rewrite.unwrap();
    let (addr, port) = second.src.unwrap();
    assert_eq!(addr, 500);
    assert!(port >= 1024 && port != 4000, "{port}");
}

/// An ICMP error (port unreachable) from `from` to `to`, quoting `quoted`.
fn error(from: u128, to: u128, quoted: Tuple) -> CtPacket {
    CtPacket {
        tuple: Tuple {
            src: from,
            dst: to,
            proto: IPPROTO_ICMP,
            icmp_type: 3,
            icmp_code: 3,
            ..Tuple::default()
        },
        tcp: None,
        quoted: Some(quoted),
    }
}

#[test]
fn icmp_errors_of_a_natted_connection_are_natted_with_their_quote() {
    let ct = Conntrack::default();
    let snat = nat(NatKind::Src, (500, 500), Some((7000, 7000)));
    let out = udp(10, 20, 4000, 53);
    let lookup = Ct {
        zone: 3,
        commit: None,
        nat: true,
        natted: false,
        payload: &[],
    };
    let r = ct
        .track(
            &pkt(out),
            &Ct {
                commit: Some(&snat),
                ..lookup
            },
            0,
        )
        .rewrite
        .unwrap();
    let translated = rewritten(out, &r);
    assert_eq!((translated.src, translated.src_port), (500, 7000));

    // The server answers the translated packet with an error: to the client, and
    // its quote is the client's packet as the client sent it.
    let from_server = ct.track(&error(20, 500, translated), &lookup, 1);
    assert_eq!(from_server.state.to_string(), "rel|rpl|trk|dnat");
    let back = from_server.rewrite.unwrap();
    assert_eq!(back.dst, Some((10, 4000)), "the error goes to the client");
    assert_eq!(rewritten(translated, &back.of_quote()), out);
    // A second ct in the zone after that rewrite finds the same connection.
    let again = ct.track(
        &error(20, 10, out),
        &Ct {
            natted: true,
            ..lookup
        },
        1,
    );
    assert_eq!(
        (again.state.to_string().as_str(), again.rewrite),
        ("rel|rpl|trk|dnat", None)
    );

    // The client answers a reply with an error: to the server from the NAT
    // address, quoting the reply as the server sent it.
    let reply_as_received = out.reverse().unwrap();
    let from_client = ct.track(&error(10, 20, reply_as_received), &lookup, 2);
    assert_eq!(from_client.state.to_string(), "rel|trk|snat");
    let fwd = from_client.rewrite.unwrap();
    assert_eq!(fwd.src, Some((500, 7000)));
    assert_eq!(
        rewritten(reply_as_received, &fwd.of_quote()),
        translated.reverse().unwrap()
    );
    // Without `nat`, related but not rewritten; an error quoting no connection
    // is invalid.
    let plain = ct.track(
        &error(20, 500, translated),
        &Ct {
            nat: false,
            ..lookup
        },
        3,
    );
    assert_eq!(
        (plain.state.to_string().as_str(), plain.rewrite),
        ("rel|rpl|trk", None)
    );
    let stranger = Tuple {
        src_port: 1,
        ..translated
    };
    assert_eq!(
        ct.track(&error(20, 500, stranger), &lookup, 3)
            .state
            .to_string(),
        "inv|trk"
    );
}

#[test]
fn dnat_balances_to_a_backend_and_answers_as_the_service() {
    let ct = Conntrack::default();
    let dnat = nat(NatKind::Dst, (30, 32), Some((8080, 8080)));
    let vip = udp(10, 99, 4000, 80);
    let c = Ct {
        zone: 0,
        commit: Some(&dnat),
        nat: true,
        natted: false,
        payload: &[],
    };
    let o = ct.track(&pkt(vip), &c, 0);
    assert_eq!(o.state.to_string(), "new|trk|dnat");
    let to = rewritten(vip, &o.rewrite.unwrap());
    assert!((30..=32).contains(&to.dst) && to.dst_port == 8080, "{to:?}");
    let answer = ct.track(&pkt(to.reverse().unwrap()), &Ct { commit: None, ..c }, 1);
    assert_eq!(answer.state.to_string(), "est|rpl|trk|snat");
    assert_eq!(
        rewritten(to.reverse().unwrap(), &answer.rewrite.unwrap()),
        vip.reverse().unwrap(),
        "the client hears the service's address"
    );
    assert_eq!(answer.orig, Some(vip));
}

proptest! {
    /// Clients (ICMP echo and UDP) SNATed into a pool of `addrs` × `ports` (ICMP
    /// keeps its identifier): every
    /// committed connection's translated tuple is its own, each reply finds its
    /// connection and is rewritten to the client; past the pool's size commits
    /// are refused and counted.
    #[test]
    fn no_two_connections_share_a_translated_tuple(
        clients in proptest::collection::vec((0u128..6, 1u16..6, any::<bool>()), 1..40),
        addrs in 1u128..3,
        ports in 1u16..4,
    ) {
        let ct = Conntrack::default();
        let snat = nat(NatKind::Src, (1000, 1000 + addrs - 1), Some((2000, 2000 + ports - 1)));
        let c = Ct { zone: 0, commit: Some(&snat), nat: true, natted: false, payload: &[] };
        let mut translated: HashSet<Tuple> = HashSet::new();
        let (mut committed, mut refused) = (0usize, 0u64);
        let mut seen: HashSet<Tuple> = HashSet::new();
        for (host, port, icmp) in clients {
            let t = if icmp {
                Tuple { src: host, dst: 50, src_port: port, dst_port: port,
                        proto: IPPROTO_ICMP, icmp_type: 8, ..Tuple::default() }
            } else {
                Tuple { src: host, dst: 50, src_port: port, dst_port: 53,
                        proto: IPPROTO_UDP, ..Tuple::default() }
            };
            let first = seen.insert(t);
            let before = ct.len();
            let o = ct.track(&pkt(t), &c, 0);
            prop_assert!(o.state.has(CtState::TRACKED));
            if !first {
                continue;
            }
            match o.rewrite {
                Some(r) => {
                    prop_assert_eq!(ct.len(), before + 1);
                    committed += 1;
                    let to = rewritten(t, &r);
                    prop_assert!(translated.insert(to), "{:?} twice", to);
                    let back = ct.track(&pkt(to.reverse().unwrap()), &Ct { commit: None, ..c }, 1);
                    prop_assert!(back.state.has(CtState::REPLY));
                    prop_assert_eq!(rewritten(to.reverse().unwrap(), &back.rewrite.unwrap()),
                                    t.reverse().unwrap());
                }
                None => {
                    refused += 1;
                    prop_assert_eq!(ct.len(), before);
                    prop_assert_eq!(o.state.to_string(), "new|trk");
                }
            }
        }
        // UDP has the pool's addresses × ports; ICMP keeps its identifier, so its
        // share is the addresses × the identifiers used (at most 5 here).
        let udp = translated.iter().filter(|t| t.proto == IPPROTO_UDP).count();
        prop_assert!(udp as u128 <= addrs * u128::from(ports));
        prop_assert!(committed - udp <= (addrs as usize) * 5);
        prop_assert_eq!(refused as usize + committed, seen.len());
        // (Each refused packet is counted, the same client's again too.)
        prop_assert!(ct.nat_exhausted() >= refused);
    }
}
