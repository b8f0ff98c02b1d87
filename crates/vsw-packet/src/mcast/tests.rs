use proptest::prelude::*;

use super::*;
use crate::builder::{igmp, igmp_frame, igmp_v3_report, mld_frame, mld_v2_records};
use crate::MacAddr;

const HOST: (MacAddr, [u8; 4]) = (MacAddr([2, 0, 0, 0, 0, 1]), [198, 18, 0, 1]);
const HOST6: (MacAddr, u128) = (
    MacAddr([2, 0, 0, 0, 0, 1]),
    0xfe80_0000_0000_0000_0000_0000_0000_0001,
);
const G1: [u8; 4] = [239, 1, 1, 1];
const G2: [u8; 4] = [239, 1, 1, 2];
const MLD_ROUTERS: u128 = 0xff02_0000_0000_0000_0000_0000_0000_0016;
const G6: u128 = 0xff15_0000_0000_0000_0000_0000_0000_0001;

fn v4(a: [u8; 4]) -> Group {
    Group::V4(u32::from_be_bytes(a))
}

#[test]
fn igmp_v1_v2_reports_leaves_and_queries() {
    let report = igmp_frame(HOST, G1, &igmp(igmp::V2_REPORT, G1));
    assert_eq!(
        membership(&report),
        Some(Membership::Report(vec![(v4(G1), true)]))
    );
    let v1 = igmp_frame(HOST, G1, &igmp(igmp::V1_REPORT, G1));
    assert_eq!(
        membership(&v1),
        Some(Membership::Report(vec![(v4(G1), true)]))
    );
    let leave = igmp_frame(HOST, [224, 0, 0, 2], &igmp(igmp::V2_LEAVE, G1));
    assert_eq!(
        membership(&leave),
        Some(Membership::Report(vec![(v4(G1), false)]))
    );
    let query = igmp_frame(HOST, [224, 0, 0, 1], &igmp(igmp::QUERY, [0; 4]));
    assert_eq!(membership(&query), Some(Membership::Query));
    // A report of a unicast address names no group.
    let odd = igmp_frame(HOST, G1, &igmp(igmp::V2_REPORT, [198, 18, 0, 9]));
    assert_eq!(membership(&odd), Some(Membership::Report(vec![])));
}

#[test]
fn igmp_v3_records_join_unless_they_include_nothing() {
    let msg = igmp_v3_report(&[
        // CHANGE_TO_EXCLUDE, no sources: a join (any source).
        (4, G1, &[]),
        // CHANGE_TO_INCLUDE, no sources: a leave.
        (3, G2, &[]),
        // MODE_IS_INCLUDE with a source: still wanted.
        (1, [239, 1, 1, 3], &[[198, 18, 0, 7]]),
        // ALLOW_NEW_SOURCES: wanted.
        (5, [239, 1, 1, 4], &[[198, 18, 0, 7], [198, 18, 0, 8]]),
    ]);
    let f = igmp_frame(HOST, [224, 0, 0, 22], &msg);
    assert_eq!(
        membership(&f),
        Some(Membership::Report(vec![
            (v4(G1), true),
            (v4(G2), false),
            (v4([239, 1, 1, 3]), true),
            (v4([239, 1, 1, 4]), true),
        ]))
    );
}

#[test]
fn a_wrong_checksum_or_a_cut_record_says_nothing() {
    let mut msg = igmp(igmp::V2_REPORT, G1);
    msg[3] ^= 1;
    assert_eq!(membership(&igmp_frame(HOST, G1, &msg)), None);
    // A v3 report claiming two records and holding one.
    let mut msg = igmp_v3_report(&[(4, G1, &[])]);
    msg[7] = 2;
    let c = crate::checksum::checksum(&[&msg[..2], &[0, 0], &msg[4..]].concat());
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    assert_eq!(membership(&igmp_frame(HOST, [224, 0, 0, 22], &msg)), None);
    // Not IGMP at all.
    let udp = crate::builder::udp4_frame([198, 18, 0, 1], G1, 1, 2, 10);
    assert_eq!(membership(&udp), None);
}

#[test]
fn mld_v1_v2_and_queries() {
    let g = G6.to_be_bytes();
    let report = mld_frame(HOST6, G6, mld::V1_REPORT, 0, &g);
    assert_eq!(
        membership(&report),
        Some(Membership::Report(vec![(Group::V6(G6), true)]))
    );
    let done = mld_frame(HOST6, MLD_ROUTERS, mld::V1_DONE, 0, &g);
    assert_eq!(
        membership(&done),
        Some(Membership::Report(vec![(Group::V6(G6), false)]))
    );
    let query = mld_frame(HOST6, IPV6_ALL_NODES, mld::QUERY, 0, &[0; 16]);
    assert_eq!(membership(&query), Some(Membership::Query));
    let records = mld_v2_records(&[(4, G6, &[]), (3, G6 + 1, &[]), (1, IPV6_ALL_NODES, &[])]);
    let v2 = mld_frame(HOST6, MLD_ROUTERS, mld::V2_REPORT, 3, &records);
    assert_eq!(
        membership(&v2),
        Some(Membership::Report(vec![
            (Group::V6(G6), true),
            (Group::V6(G6 + 1), false),
        ])),
        "all-nodes is never a group to snoop"
    );
    let mut bad = v2.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0x40;
    assert_eq!(membership(&bad), None, "checksum over the pseudo-header");
}

#[test]
fn the_key_names_the_kind_of_message() {
    use crate::wire::ip::{IPPROTO_ICMPV6, IPPROTO_IGMP, IPPROTO_UDP};
    let k = |t, p, ty| message_kind(t, p, ty);
    // UDP from any source port is no message, however high the port.
    assert_eq!(k(EtherType::IPV4, IPPROTO_UDP, 5000), None);
    assert_eq!(k(EtherType::IPV4, IPPROTO_UDP, 17), None);
    assert_eq!(
        k(EtherType::IPV4, IPPROTO_IGMP, 0x1ff),
        Some(MessageKind::NotMembership)
    );
    assert_eq!(
        k(EtherType::IPV4, IPPROTO_IGMP, 0x11),
        Some(MessageKind::Query)
    );
    assert_eq!(
        k(EtherType::IPV4, IPPROTO_IGMP, 0x22),
        Some(MessageKind::Report)
    );
    assert_eq!(
        k(EtherType::IPV4, IPPROTO_IGMP, 0x30),
        Some(MessageKind::NotMembership)
    );
    assert_eq!(
        k(EtherType::IPV6, IPPROTO_ICMPV6, 143),
        Some(MessageKind::Report)
    );
    assert_eq!(
        k(EtherType::IPV6, IPPROTO_ICMPV6, 135),
        Some(MessageKind::NotMembership)
    );
    assert_eq!(k(EtherType::IPV4, IPPROTO_UDP, 0x11), None);
    let mut key = crate::FlowKey::default();
    let f = igmp_frame(HOST, G1, &igmp(igmp::V2_REPORT, G1));
    crate::extract(&f, 1, None, &mut key).unwrap();
    assert_eq!((key.nw_proto, key.tp_src), (IPPROTO_IGMP, 0x16));
    assert_eq!(Group::of_key(key.dl_type, key.nw_dst), Some(v4(G1)));
}

proptest! {
    /// Hostile bytes after valid headers never panic, and what is read is a group.
    #[test]
    fn hostile_messages_never_panic(body in proptest::collection::vec(any::<u8>(), 0..200), t in any::<u8>()) {
        let mut msg = vec![t, 0, 0, 0];
        msg.extend_from_slice(&body);
        let c = crate::checksum::checksum(&msg);
        msg[2..4].copy_from_slice(&c.to_be_bytes());
        if let Some(Membership::Report(groups)) = membership(&igmp_frame(HOST, G1, &msg)) {
            for (g, _) in groups {
                prop_assert!(matches!(g, Group::V4(a) if is_ipv4_multicast(a)));
            }
        }
        let f = mld_frame(HOST6, MLD_ROUTERS, t, (body.len() / 8) as u16, &body);
        let _ = membership(&f);
        for cut in 0..f.len() {
            let _ = membership(&f[..cut]);
        }
    }
}
