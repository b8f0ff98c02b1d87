//! NORMAL's multicast snooping (RFC 4541, as Open vSwitch's `mcast_snooping`):
//! where a multicast packet goes when the bridge snoops, and what the IGMP and MLD
//! messages among them teach the table. Translation asks [`snoop`] before it
//! floods a multicast destination.

use vsw_flow::McastTable;
use vsw_packet::mcast::{self, Group, Membership, MessageKind};
use vsw_packet::wire::ip::IPPROTO_IGMP;
use vsw_packet::{EtherType, FlowKey, MacAddr};

/// Where NORMAL sends the packet.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Way {
    /// Every port but the input port; why, for the trace.
    Flood(&'static str),
    /// These ports (the input port left out), sorted; why, for the trace.
    Ports(Vec<u32>, String),
}

/// What snooping decided for one packet.
#[derive(Debug)]
pub(crate) struct Snooped {
    pub way: Way,
    /// The table changed (a new member or router port, a member gone): flows
    /// made before may send elsewhere now.
    pub changed: bool,
    /// A membership message: its answer holds for this packet only, so that every
    /// one passes through here and none is missed (Open vSwitch slow-paths them).
    pub per_packet: bool,
}

/// Decides NORMAL's way for `key`, a packet with a multicast destination MAC, on
/// `vlan`, from `table`; widens `mask` by what it looked at. `frame`: the packet
/// passing, when one is (its reports and queries are read into the table).
/// `None` when snooping does not decide: it is off, or the packet is not IP
/// multicast.
pub(crate) fn snoop(
    table: &mut McastTable,
    key: &FlowKey,
    mask: &mut FlowKey,
    frame: Option<&[u8]>,
    (vlan, now_ms): (u16, u64),
) -> Option<Snooped> {
    if !table.enabled() {
        return None;
    }
    // A broadcast is flooded, whatever it carries (Open vSwitch snoops no
    // broadcast either).
    mask.dl_dst = MacAddr::BROADCAST;
    if key.dl_dst == MacAddr::BROADCAST {
        return None;
    }
    // Whether an IP packet is to a group (and which) is its destination's to
    // say, snooped or not: a flow that floods one must not flood a group too.
    mask.dl_type = u16::MAX;
    if matches!(key.dl_type, EtherType::IPV4 | EtherType::IPV6) {
        mask.nw_dst = u128::MAX;
    }
    let group = Group::of_key(key.dl_type, key.nw_dst)?;
    mask.nw_proto = u8::MAX;
    let in_port = key.in_port;
    let kind = mcast::message_kind(key.dl_type, key.nw_proto, key.tp_src);
    if kind.is_some() {
        mask.tp_src = u16::MAX;
    }
    let mut changed = false;
    // The frame is read only where it is still the packet the key describes (a
    // bridge before may have rewritten it, a tunnel wrapped it).
    let read = frame
        .filter(|f| describes(key, f))
        .and_then(mcast::membership);
    let without_input = |mut ports: Vec<u32>| {
        ports.retain(|p| *p != in_port);
        ports.sort_unstable();
        ports.dedup();
        ports
    };
    let way = match kind {
        Some(MessageKind::Report) => {
            if let Some(Membership::Report(groups)) = read {
                for (g, join) in groups {
                    changed |= if join {
                        table.join(g, vlan, in_port, now_ms)
                    } else {
                        table.leave(g, vlan, in_port)
                    };
                }
            }
            // RFC 4541 2.1.1: reports go to the routers only, not to other hosts
            // (which would suppress their own reports).
            let routers = without_input(table.mrouters(vlan, now_ms).collect());
            Way::Ports(routers, "membership report: to the router ports".into())
        }
        Some(MessageKind::Query) => {
            if read == Some(Membership::Query) {
                changed |= table.add_mrouter(vlan, in_port, now_ms);
            }
            Way::Flood("membership query: flood")
        }
        Some(MessageKind::NotMembership) if key.nw_proto == IPPROTO_IGMP => {
            Way::Flood("other IGMP: flood")
        }
        _ if is_link_scope_control(group) => Way::Flood("link-local multicast: flood"),
        _ => match table.members(group, vlan, now_ms) {
            Some(members) => {
                let ports = members
                    .into_iter()
                    .chain(table.mrouters(vlan, now_ms))
                    .collect();
                Way::Ports(
                    without_input(ports),
                    format!("group {group}: its members and the router ports"),
                )
            }
            None if table.config().flood_unregistered => Way::Flood("unregistered group: flood"),
            None => Way::Ports(
                without_input(table.mrouters(vlan, now_ms).collect()),
                format!("unregistered group {group}: to the router ports"),
            ),
        },
    };
    Some(Snooped {
        way,
        changed,
        per_packet: matches!(kind, Some(MessageKind::Report | MessageKind::Query)),
    })
}

/// 224.0.0.0/24 and ff02::1: what every host on the link must get (RFC 4541
/// 2.1.2, and all-nodes for IPv6).
fn is_link_scope_control(g: Group) -> bool {
    match g {
        Group::V4(a) => mcast::is_ipv4_link_local_multicast(a),
        Group::V6(a) => a == mcast::IPV6_ALL_NODES,
    }
}

/// Whether `frame` is still the packet of `key`, as far as snooping reads it:
/// the same protocol, addresses and message type.
fn describes(key: &FlowKey, frame: &[u8]) -> bool {
    let mut k = FlowKey::default();
    if vsw_packet::extract(frame, key.in_port, None, &mut k).is_err() {
        return false;
    }
    (k.dl_type, k.nw_src, k.nw_dst, k.nw_proto, k.tp_src)
        == (
            key.dl_type,
            key.nw_src,
            key.nw_dst,
            key.nw_proto,
            key.tp_src,
        )
}

#[cfg(test)]
mod tests {
    use vsw_flow::McastConfig;
    use vsw_packet::builder::{igmp, igmp_frame, igmp_v3_report};
    use vsw_packet::mcast::igmp as igmp_type;
    use vsw_packet::{extract, MacAddr};

    use super::*;

    const G: [u8; 4] = [239, 1, 1, 1];

    fn table(flood_unregistered: bool) -> McastTable {
        let mut t = McastTable::default();
        t.set_config(McastConfig {
            enabled: true,
            flood_unregistered,
            ..McastConfig::default()
        });
        t
    }

    fn key_of(frame: &[u8], port: u32) -> FlowKey {
        let mut k = FlowKey::default();
        extract(frame, port, None, &mut k).unwrap();
        k
    }

    fn host(n: u8) -> (MacAddr, [u8; 4]) {
        (MacAddr([2, 0, 0, 0, 0, n]), [198, 18, 0, n])
    }

    fn data(to: [u8; 4]) -> Vec<u8> {
        let mut f = vsw_packet::builder::udp4_frame([198, 18, 0, 9], to, 5000, 5001, 20);
        f[..6].copy_from_slice(&vsw_packet::builder::multicast_mac(to.into()).0);
        f
    }

    fn run(t: &mut McastTable, frame: &[u8], port: u32, passing: bool) -> (Snooped, FlowKey) {
        let key = key_of(frame, port);
        let mut mask = FlowKey::default();
        let s = snoop(t, &key, &mut mask, passing.then_some(frame), (0, 1_000)).unwrap();
        (s, mask)
    }

    #[test]
    fn reports_teach_the_table_and_go_to_routers_only() {
        let mut t = table(true);
        let query = igmp_frame(host(4), [224, 0, 0, 1], &igmp(igmp_type::QUERY, [0; 4]));
        let (s, _) = run(&mut t, &query, 4, true);
        assert_eq!(s.way, Way::Flood("membership query: flood"));
        assert!(s.changed && s.per_packet, "a router port is learned");
        let report = igmp_frame(host(2), G, &igmp_v3_report(&[(4, G, &[])]));
        // A revalidation (no packet) learns nothing.
        let (s, mask) = run(&mut t, &report, 2, false);
        assert!(!s.changed);
        assert_eq!((mask.nw_proto, mask.tp_src), (0xff, 0xffff));
        let (s, _) = run(&mut t, &report, 2, true);
        assert!(s.changed && s.per_packet);
        assert!(
            matches!(s.way, Way::Ports(ref p, _) if *p == vec![4]),
            "{:?}",
            s.way
        );
        // Group traffic: the member and the router, never the sender.
        let (s, mask) = run(&mut t, &data(G), 3, true);
        assert!(
            matches!(s.way, Way::Ports(ref p, _) if *p == vec![2, 4]),
            "{:?}",
            s.way
        );
        assert!(!s.per_packet, "data flows are cached");
        assert_eq!({ mask.nw_dst }, u128::MAX);
        let (s, _) = run(&mut t, &data(G), 2, true);
        assert!(matches!(s.way, Way::Ports(ref p, _) if *p == vec![4]));
        // A leave, then the group is unregistered: flooded.
        let leave = igmp_frame(host(2), [224, 0, 0, 2], &igmp(igmp_type::V2_LEAVE, G));
        assert!(run(&mut t, &leave, 2, true).0.changed);
        assert_eq!(
            run(&mut t, &data(G), 3, true).0.way,
            Way::Flood("unregistered group: flood")
        );
    }

    #[test]
    fn unregistered_traffic_goes_to_routers_when_flooding_it_is_off() {
        let mut t = table(false);
        assert!(matches!(
            run(&mut t, &data(G), 3, true).0.way,
            Way::Ports(ref p, _) if p.is_empty()
        ));
        // Link-local control traffic is flooded whatever the table says.
        assert_eq!(
            run(&mut t, &data([224, 0, 0, 251]), 3, true).0.way,
            Way::Flood("link-local multicast: flood")
        );
    }

    #[test]
    fn off_or_not_ip_multicast_is_not_decided_here() {
        let mut off = McastTable::default();
        let f = data(G);
        let key = key_of(&f, 1);
        assert!(snoop(&mut off, &key, &mut FlowKey::default(), Some(&f), (0, 0)).is_none());
        let mut t = table(true);
        let mut arp = key;
        arp.dl_type = vsw_packet::EtherType::ARP;
        assert!(snoop(&mut t, &arp, &mut FlowKey::default(), None, (0, 0)).is_none());
        // An IP packet to no group: not decided, but its destination is in the
        // flow, so that it cannot flood a group's packets too.
        let mut mask = FlowKey::default();
        let unicast = key_of(&data([198, 18, 0, 2]), 1);
        assert!(snoop(&mut t, &unicast, &mut mask, None, (0, 0)).is_none());
        assert_eq!({ mask.nw_dst }, u128::MAX);
        // A broadcast is flooded, whatever it carries: its address says so.
        let mut mask = FlowKey::default();
        let mut broadcast = key;
        broadcast.dl_dst = MacAddr::BROADCAST;
        assert!(snoop(&mut t, &broadcast, &mut mask, None, (0, 0)).is_none());
        assert_eq!(mask.dl_dst, MacAddr::BROADCAST);
    }

    #[test]
    fn a_frame_the_key_no_longer_describes_is_not_read() {
        let mut t = table(true);
        let report = igmp_frame(host(3), G, &igmp(igmp_type::V2_REPORT, G));
        // A rewrite before made it another message (another group): the key
        // says what the packet is now, the frame what it was.
        let mut key = key_of(&report, 3);
        key.nw_dst = u128::from(u32::from_be_bytes([239, 9, 9, 9]));
        snoop(&mut t, &key, &mut FlowKey::default(), Some(&report), (0, 1)).unwrap();
        assert!(
            t.entries(1).iter().all(|e| e.group.is_none()),
            "nothing joined"
        );
        let key = key_of(&report, 3);
        snoop(&mut t, &key, &mut FlowKey::default(), Some(&report), (0, 1)).unwrap();
        assert_eq!(t.entries(1).iter().filter(|e| e.group.is_some()).count(), 1);
    }
}
