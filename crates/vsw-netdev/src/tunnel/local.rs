//! A bridge's LOCAL port (its `internal` port) as the underlay end of tunnels: its
//! bridge registered in the tunnels' state (its MAC, the source of the outer
//! headers; its addresses, from the routes), so that translation pushes tunnel
//! headers out through it and pops the tunnel packets sent to it
//! (`TunnelWorld`'s `TunnelEgress`). Its queues stay the host's, untouched.

use std::sync::Arc;

use vsw_packet::MacAddr;

use super::world::{BridgeEnd, Registration, TunnelWorld};

/// Makes internal port `name`'s bridge an underlay of `world`'s tunnels (its
/// queues stay the host's); the registration is what closes it again.
pub fn open_local(world: &Arc<TunnelWorld>, name: &str) -> Registration {
    let mac = crate::interface::mac(name).unwrap_or(MacAddr::ZERO);
    world.register_bridge(
        name,
        BridgeEnd {
            mac,
            addresses: Vec::new(),
        },
    )
}

/// Internal port `name`, opened as `registration`, is closed: tunnels no longer reach
/// the underlay through it (unless it was opened again since).
pub fn close_local(world: &TunnelWorld, name: &str, registration: Registration) {
    world.unregister_bridge(name, registration);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::net::{IpAddr, Ipv4Addr};
    use vsw_packet::key::{extract, FlowKey};
    use vsw_packet::tunnel::TunnelKind;
    use vsw_packet::EtherType;
    use vsw_tunnel::config::TunnelConfig;
    use vsw_tunnel::metadata::MetadataOption;

    /// VXLAN's receive point of Ethernet frames.
    const ETHERNET_VXLAN: vsw_datapath::tunnel_pop::ReceivePoint =
        vsw_datapath::tunnel_pop::ReceivePoint {
            geneve: false,
            l3: false,
        };

    /// An underlay bridge `bridge` of `world` whose route table is
    /// `subnet dev bridge src=src`.
    fn underlay(world: &Arc<TunnelWorld>, bridge: &str, subnet: &str, src: &str) -> Registration {
        let local_reg = open_local(world, bridge);
        let mut routes = vsw_tunnel::route::RouteTable::default();
        routes
            .add_from_args(&[subnet.to_string(), bridge.to_string(), format!("src={src}")])
            .unwrap();
        world.set_routes(std::sync::Arc::new(routes));
        local_reg
    }

    /// Natively (translation asking the tunnels' state): a next hop without a MAC
    /// drops the packet in its own pass — counted when a packet is passing, not
    /// when a flow is revalidated — and is asked for, through its bridge; its
    /// answer gives the way out and ends the asking.
    #[test]
    fn a_next_hop_without_a_mac_is_a_native_drop_and_an_ask_through_its_bridge() {
        use vsw_datapath::{NoWay, TunnelEgress};
        let world = TunnelWorld::new();
        let local_reg = underlay(&world, "vsw-ut-askbr", "198.18.82.0/24", "198.18.82.2");
        let options = BTreeMap::from([("remote_ip".to_string(), "198.18.82.9".to_string())]);
        let config = TunnelConfig::parse(TunnelKind::Vxlan, &options).unwrap();
        let (tunnel, tunnel_reg) =
            crate::tunnel::open_tunnel(&world, "vsw-ut-askvx", "vsw-ut-ovl", &config).unwrap();
        let unknown = || {
            world
                .drops()
                .into_iter()
                .find(|(r, _)| *r == "neighbour_unknown")
                .unwrap()
                .1
        };
        let before = unknown();
        let (key, mut mask) = (FlowKey::default(), FlowKey::default());
        let asked = world.way_out("vsw-ut-askvx", &key, None, &mut mask, true);
        assert_eq!(asked, Err(NoWay::Dropped));
        assert_eq!(unknown(), before + 1);
        let again = world.way_out("vsw-ut-askvx", &key, None, &mut mask, false);
        assert_eq!(again, Err(NoWay::Dropped));
        assert_eq!(unknown(), before + 1, "a revalidation drops no packet");
        // One ask, though two translations met the next hop.
        let asks = world.next_asks(std::time::Duration::ZERO);
        assert_eq!(asks.len(), 1, "{asks:?}");
        assert_eq!(asks[0].bridge, "vsw-ut-askbr");
        let mut k = FlowKey::default();
        extract(&asks[0].frame, 0, None, &mut k).unwrap();
        assert_eq!(k.dl_type, EtherType::ARP);
        assert_eq!(
            ({ k.nw_src }, { k.nw_dst }),
            (0xc612_5202, 0xc612_5209),
            "from the bridge's address, for the remote"
        );
        // The answer: the way out is known, and nothing more is asked.
        let mac = MacAddr([2, 0, 0, 0, 0x82, 9]);
        world.neighbour_set(
            IpAddr::V4(Ipv4Addr::new(198, 18, 82, 9)),
            mac,
            "vsw-ut-askbr",
        );
        let way = world
            .way_out("vsw-ut-askvx", &key, None, &mut mask, true)
            .expect("a way out");
        assert_eq!(
            (way.spec.eth_dst, way.underlay.as_str()),
            (mac, "vsw-ut-askbr")
        );
        assert!(world.next_asks(std::time::Duration::ZERO).is_empty());
        // Popped natively: the port its remote and VNI choose; a VNI no port has is
        // counted when a packet is passing.
        let unknown_vni = || {
            world
                .drops()
                .into_iter()
                .find(|(r, _)| *r == "unknown_vni")
                .unwrap()
                .1
        };
        let before = unknown_vni();
        let popped = FlowKey {
            tun_src: u32::from(Ipv4Addr::new(198, 18, 82, 9)),
            ..FlowKey::default()
        };
        let port = world.receiving_port(ETHERNET_VXLAN, &popped, &mut mask, true);
        assert_eq!(port.map(|(p, _)| p).as_deref(), Some("vsw-ut-askvx"));
        let other = FlowKey {
            tun_id: 77,
            ..popped
        };
        assert_eq!(
            world.receiving_port(ETHERNET_VXLAN, &other, &mut mask, true),
            None
        );
        assert_eq!(
            world.receiving_port(ETHERNET_VXLAN, &other, &mut mask, false),
            None
        );
        assert_eq!(unknown_vni(), before + 1, "counted once: one packet passed");
        // `tos=inherit`, `ttl=inherit`: the inner packet's, which the flow matches.
        drop(tunnel);
        crate::tunnel::close_tunnel(&world, "vsw-ut-askvx", tunnel_reg);
        let options = BTreeMap::from([
            ("remote_ip".to_string(), "198.18.82.9".to_string()),
            ("tos".to_string(), "inherit".to_string()),
            ("ttl".to_string(), "inherit".to_string()),
        ]);
        let config = TunnelConfig::parse(TunnelKind::Vxlan, &options).unwrap();
        let (tunnel, tunnel_reg) =
            crate::tunnel::open_tunnel(&world, "vsw-ut-askvx", "vsw-ut-ovl", &config).unwrap();
        let ip = FlowKey {
            dl_type: EtherType::IPV4,
            nw_tos: 0xb8,
            nw_ttl: 9,
            ..FlowKey::default()
        };
        let mut mask = FlowKey::default();
        let way = world
            .way_out("vsw-ut-askvx", &ip, None, &mut mask, true)
            .unwrap();
        assert_eq!((way.spec.tos, way.spec.ttl), (0xb8, 9));
        assert_eq!(
            (mask.nw_tos, mask.nw_ttl, mask.dl_type),
            (0xff, 0xff, 0xffff)
        );
        let arp = FlowKey {
            dl_type: EtherType::ARP,
            ..FlowKey::default()
        };
        let way = world
            .way_out("vsw-ut-askvx", &arp, None, &mut mask, true)
            .unwrap();
        assert_eq!(
            (way.spec.tos, way.spec.ttl),
            (0, 64),
            "not IP: OVS's defaults"
        );
        drop(tunnel);
        crate::tunnel::close_tunnel(&world, "vsw-ut-askvx", tunnel_reg);
        close_local(&world, "vsw-ut-askbr", local_reg);
    }

    /// Natively popped Geneve: the option read as `tun_metadata0` is the one the
    /// TLV map of the bridges of the ports with that remote end names; where those
    /// maps differ, both (the packet carries the one its port's bridge reads).
    #[test]
    fn a_geneve_pop_reads_the_option_the_remote_ends_ports_bridges_name() {
        use vsw_datapath::TunnelEgress;
        let world = TunnelWorld::new();
        let local_reg = underlay(&world, "vsw-ut-popbr", "198.18.83.0/24", "198.18.83.2");
        let geneve_to = |remote: &str| {
            let options = BTreeMap::from([("remote_ip".to_string(), remote.to_string())]);
            TunnelConfig::parse(TunnelKind::Geneve, &options).unwrap()
        };
        let (a, b) = (
            MetadataOption {
                class: 0x0102,
                kind: 0x80,
            },
            MetadataOption {
                class: 0x0103,
                kind: 0x81,
            },
        );
        world.set_metadata0("vsw-ut-popa", Some(a));
        world.set_metadata0("vsw-ut-popb", Some(b));
        let mut open = Vec::new();
        for (name, bridge, remote) in [
            ("vsw-ut-gva", "vsw-ut-popa", "198.18.83.10"),
            ("vsw-ut-gvb", "vsw-ut-popb", "198.18.83.11"),
            ("vsw-ut-gvc", "vsw-ut-popb", "198.18.83.10"),
        ] {
            let (queues, reg) =
                crate::tunnel::open_tunnel(&world, name, bridge, &geneve_to(remote)).unwrap();
            open.push((name, queues, reg));
        }
        let from = |last: u8| FlowKey {
            dl_type: EtherType::IPV4,
            nw_proto: vsw_packet::wire::ip::IPPROTO_UDP,
            tp_dst: 6081,
            nw_src: u128::from(u32::from(Ipv4Addr::new(198, 18, 83, last))),
            ..FlowKey::default()
        };
        let mut mask = FlowKey::default();
        let pop = world.terminates("vsw-ut-popbr", &from(11), &mut mask);
        assert_eq!(pop.map(|p| p.option), Some(Some((0x0103, 0x81))), "b's map");
        assert_eq!({ mask.nw_src }, u128::MAX, "the remote end decided it");
        // .10 is the remote end of ports on both bridges, whose maps differ.
        let both = world
            .terminates("vsw-ut-popbr", &from(10), &mut mask)
            .unwrap();
        assert_eq!(
            (both.option, both.other_option),
            (Some((0x0102, 0x80)), Some((0x0103, 0x81)))
        );
        // No port's remote end: the host's.
        assert_eq!(world.terminates("vsw-ut-popbr", &from(12), &mut mask), None);
        for (name, queues, reg) in open {
            drop(queues);
            crate::tunnel::close_tunnel(&world, name, reg);
        }
        close_local(&world, "vsw-ut-popbr", local_reg);
    }

    /// Over an IPv6 underlay, natively too: the key's tunnel addresses are IPv4, so
    /// a remote end's packets come in on a receive point of its own, which chooses
    /// the port.
    #[test]
    fn an_ipv6_remote_ends_packets_pop_natively_onto_a_receive_point_of_its_own() {
        use vsw_datapath::tunnel_pop::{receive_point, remote6_of};
        use vsw_datapath::TunnelEgress;
        let world = TunnelWorld::new();
        let local_reg = underlay(&world, "vsw-ut-v6br", "fd00:84::/64", "fd00:84::2");
        let mut open = Vec::new();
        for (name, remote) in [("vsw-ut-v6a", "fd00:84::10"), ("vsw-ut-v6b", "fd00:84::11")] {
            let options = BTreeMap::from([("remote_ip".to_string(), remote.to_string())]);
            let config = TunnelConfig::parse(TunnelKind::Vxlan, &options).unwrap();
            let (queues, reg) =
                crate::tunnel::open_tunnel(&world, name, "vsw-ut-ovl", &config).unwrap();
            open.push((name, queues, reg));
        }
        let from = |remote: &str| FlowKey {
            dl_type: EtherType::IPV6,
            nw_proto: vsw_packet::wire::ip::IPPROTO_UDP,
            tp_dst: 4789,
            nw_src: u128::from(remote.parse::<std::net::Ipv6Addr>().unwrap()),
            ..FlowKey::default()
        };
        let mut mask = FlowKey::default();
        let pops: Vec<_> = ["fd00:84::10", "fd00:84::11", "fd00:84::10"]
            .iter()
            .map(|r| {
                world
                    .terminates("vsw-ut-v6br", &from(r), &mut mask)
                    .unwrap()
            })
            .collect();
        assert_eq!(pops[0], pops[2], "one receive point per remote end");
        assert_ne!(pops[0].receive, pops[1].receive);
        for (pop, port) in pops.iter().zip(["vsw-ut-v6a", "vsw-ut-v6b"]) {
            assert_eq!(receive_point(pop.receive), Some(ETHERNET_VXLAN));
            assert!(remote6_of(pop.receive).is_some());
            let popped = FlowKey {
                in_port: pop.receive,
                ..FlowKey::default()
            };
            let mut m = FlowKey::default();
            let chose = world.receiving_port(ETHERNET_VXLAN, &popped, &mut m, true);
            assert_eq!(chose.map(|(p, _)| p).as_deref(), Some(port));
            assert_eq!(m.tun_src, 0, "the receive point said the remote end");
        }
        // No port's remote end: the host's.
        assert_eq!(
            world.terminates("vsw-ut-v6br", &from("fd00:84::12"), &mut mask),
            None
        );
        for (name, queues, reg) in open {
            drop(queues);
            crate::tunnel::close_tunnel(&world, name, reg);
        }
        close_local(&world, "vsw-ut-v6br", local_reg);
    }

    /// Natively: ARP an underlay bridge sends to its LOCAL port, addressed to the
    /// bridge's own address, teaches the neighbour table when it passes (not when
    /// its flow is revalidated), and its flow matches what decided it.
    #[test]
    fn arp_to_an_underlay_bridges_own_address_is_snooped_in_translation() {
        use vsw_datapath::TunnelEgress;
        let world = TunnelWorld::new();
        let local_reg = underlay(&world, "vsw-ut-snbr", "198.18.85.0/24", "198.18.85.2");
        let reply = |spa: [u8; 4], tpa: [u8; 4]| FlowKey {
            dl_type: EtherType::ARP,
            nw_proto: 2,
            nw_src: u128::from(u32::from_be_bytes(spa)),
            nw_dst: u128::from(u32::from_be_bytes(tpa)),
            arp_sha: MacAddr([2, 0, 0, 0, 0x85, spa[3]]),
            ..FlowKey::default()
        };
        let mut mask = FlowKey::default();
        world.snoop(
            "vsw-ut-snbr",
            &reply([198, 18, 85, 7], [198, 18, 85, 2]),
            &mut mask,
            false,
        );
        assert_eq!(
            (
                { mask.nw_src },
                { mask.nw_dst },
                mask.arp_sha,
                mask.nw_proto
            ),
            (u128::MAX, u128::MAX, MacAddr([0xff; 6]), 0xff)
        );
        world.absorb_neighbours(vsw_datapath::clock::now_ms());
        assert!(
            !world.neighbours_show().contains("198.18.85.7"),
            "a revalidation"
        );
        world.snoop(
            "vsw-ut-snbr",
            &reply([198, 18, 85, 7], [198, 18, 85, 2]),
            &mut mask,
            true,
        );
        // To another host's address: nothing; and no bridge of the tunnels': nothing.
        world.snoop(
            "vsw-ut-snbr",
            &reply([198, 18, 85, 8], [198, 18, 85, 9]),
            &mut mask,
            true,
        );
        world.snoop(
            "vsw-ut-other",
            &reply([198, 18, 85, 6], [198, 18, 85, 2]),
            &mut mask,
            true,
        );
        world.absorb_neighbours(vsw_datapath::clock::now_ms());
        let shown = world.neighbours_show();
        assert!(shown.contains("198.18.85.7"), "{shown}");
        assert!(
            !shown.contains("198.18.85.8") && !shown.contains("198.18.85.6"),
            "{shown}"
        );
        close_local(&world, "vsw-ut-snbr", local_reg);
    }

    /// Natively, what the rules set decides the way out: `key=flow` sends with the
    /// packet's `tun_id`, `remote_ip=flow` to its `tun_dst` (through that remote's
    /// own next hop; none: dropped, counted), a Geneve port with the bridge's TLV
    /// map carries `tun_metadata0` as its option when a rule gave one; and the
    /// flow matches each field read.
    #[test]
    fn what_the_rules_set_decides_a_native_way_out() {
        use vsw_datapath::{NoWay, TunnelEgress};
        let world = TunnelWorld::new();
        let local_reg = underlay(&world, "vsw-ut-wbr", "198.18.86.0/24", "198.18.86.2");
        for last in [10u8, 11] {
            world.neighbour_set(
                IpAddr::V4(Ipv4Addr::new(198, 18, 86, last)),
                MacAddr([2, 0, 0, 0, 0x86, last]),
                "vsw-ut-wbr",
            );
        }
        let option = MetadataOption {
            class: 0x0102,
            kind: 0x80,
        };
        world.set_metadata0("vsw-ut-wovl", Some(option));
        let open = |name: &str, kind: TunnelKind, options: &[(&str, &str)]| {
            let options: BTreeMap<String, String> = options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let config = TunnelConfig::parse(kind, &options).unwrap();
            crate::tunnel::open_tunnel(&world, name, "vsw-ut-wovl", &config).unwrap()
        };
        let keyed = open(
            "vsw-ut-wkey",
            TunnelKind::Vxlan,
            &[("remote_ip", "198.18.86.10"), ("key", "flow")],
        );
        let mut mask = FlowKey::default();
        let k = FlowKey {
            tun_id: 0x1234,
            ..FlowKey::default()
        };
        let way = world
            .way_out("vsw-ut-wkey", &k, None, &mut mask, true)
            .unwrap();
        assert_eq!((way.spec.vni, { mask.tun_id }), (0x1234, u64::MAX));
        let to_flow = open(
            "vsw-ut-wdst",
            TunnelKind::Vxlan,
            &[("remote_ip", "flow"), ("key", "5")],
        );
        for last in [10u8, 11, 10] {
            let mut mask = FlowKey::default();
            let k = FlowKey {
                tun_dst: u32::from(Ipv4Addr::new(198, 18, 86, last)),
                ..FlowKey::default()
            };
            let way = world
                .way_out("vsw-ut-wdst", &k, None, &mut mask, true)
                .unwrap();
            assert_eq!(way.spec.dst, IpAddr::V4(Ipv4Addr::new(198, 18, 86, last)));
            assert_eq!(way.spec.eth_dst, MacAddr([2, 0, 0, 0, 0x86, last]));
            assert_eq!((way.spec.vni, { mask.tun_dst }), (5, u32::MAX));
        }
        let nowhere = world.way_out("vsw-ut-wdst", &FlowKey::default(), None, &mut mask, true);
        assert_eq!(nowhere, Err(NoWay::Dropped), "no tun_dst");
        let geneve = open(
            "vsw-ut-wgv",
            TunnelKind::Geneve,
            &[("remote_ip", "198.18.86.11")],
        );
        let mut mask = FlowKey::default();
        let plain = world
            .way_out("vsw-ut-wgv", &FlowKey::default(), None, &mut mask, true)
            .unwrap();
        assert!(plain.spec.geneve_options.is_empty(), "no value: no option");
        assert_eq!(mask.tun_metadata0, u32::MAX);
        let k = FlowKey {
            tun_metadata0: 0xabcd,
            ..FlowKey::default()
        };
        let with = world
            .way_out("vsw-ut-wgv", &k, None, &mut mask, true)
            .unwrap();
        let tlv = &with.spec.geneve_options;
        assert_eq!(&tlv[..3], &[0x01, 0x02, 0x80], "the map's class and type");
        assert_eq!(&tlv[tlv.len() - 4..], &0xabcd_u32.to_be_bytes());
        // VXLAN-GPE: a packet-type-aware port says what it carries; an L3 port
        // carries IP and NSH only, its Ethernet frames' type read (the flow
        // matches it); an Ethernet-only port carries no packet without Ethernet.
        let ptap = open(
            "vsw-ut-wgpe",
            TunnelKind::Vxlan,
            &[
                ("remote_ip", "198.18.86.11"),
                ("key", "42"),
                ("exts", "gpe"),
                ("packet_type", "ptap"),
            ],
        );
        let l3 = open(
            "vsw-ut-wl3",
            TunnelKind::Vxlan,
            &[
                ("remote_ip", "198.18.86.11"),
                ("key", "42"),
                ("exts", "gpe"),
                ("packet_type", "legacy_l3"),
            ],
        );
        use vsw_packet::wire::vxlan::{NP_ETHERNET, NP_IPV4, NP_NSH};
        let gpe = |port: &str, k: &FlowKey, l3: Option<u16>, mask: &mut FlowKey| {
            world.way_out(port, k, l3, mask, true).map(|w| w.spec.gpe)
        };
        let ip = FlowKey {
            dl_type: EtherType::IPV4,
            ..FlowKey::default()
        };
        let arp = FlowKey {
            dl_type: EtherType::ARP,
            ..FlowKey::default()
        };
        let mut mask = FlowKey::default();
        assert_eq!(
            gpe("vsw-ut-wgpe", &ip, None, &mut mask),
            Ok(Some(NP_ETHERNET))
        );
        assert_eq!(mask.dl_type, 0, "an Ethernet frame goes whatever its type");
        assert_eq!(
            gpe("vsw-ut-wgpe", &ip, Some(0x894f), &mut mask),
            Ok(Some(NP_NSH))
        );
        assert_eq!(
            gpe("vsw-ut-wgpe", &arp, Some(0x0806), &mut mask),
            Err(NoWay::NotCarried)
        );
        assert_eq!(gpe("vsw-ut-wl3", &ip, None, &mut mask), Ok(Some(NP_IPV4)));
        assert_eq!(mask.dl_type, u16::MAX);
        assert_eq!(
            gpe("vsw-ut-wl3", &arp, None, &mut mask),
            Err(NoWay::NotCarried)
        );
        assert_eq!(
            gpe("vsw-ut-wgv", &ip, Some(0x0800), &mut mask),
            Err(NoWay::NotCarried)
        );
        assert_eq!(gpe("vsw-ut-wgv", &ip, None, &mut mask), Ok(None));
        // In: a packet without Ethernet to the L3 port before the aware one; an
        // Ethernet frame to the aware one (no legacy L2 port has that remote).
        use vsw_datapath::tunnel_pop::ReceivePoint;
        let popped = FlowKey {
            tun_id: 42,
            tun_src: u32::from(Ipv4Addr::new(198, 18, 86, 11)),
            ..FlowKey::default()
        };
        let chose = |l3: bool| {
            let point = ReceivePoint { geneve: false, l3 };
            world.receiving_port(point, &popped, &mut FlowKey::default(), false)
        };
        use vsw_packet::tunnel::PacketTypeMode;
        assert_eq!(
            chose(true),
            Some(("vsw-ut-wl3".into(), PacketTypeMode::LegacyL3))
        );
        assert_eq!(
            chose(false),
            Some(("vsw-ut-wgpe".into(), PacketTypeMode::Ptap))
        );
        assert_eq!(
            world.packet_type_mode("vsw-ut-wl3"),
            PacketTypeMode::LegacyL3
        );
        // A ptap port of plain VXLAN carries nothing without Ethernet, either way:
        // a GPE packet of IP for its VNI is not its (counted as such).
        let plain = open(
            "vsw-ut-wpl",
            TunnelKind::Vxlan,
            &[
                ("remote_ip", "198.18.86.10"),
                ("key", "43"),
                ("packet_type", "ptap"),
            ],
        );
        assert_eq!(
            gpe("vsw-ut-wpl", &ip, Some(0x0800), &mut mask),
            Err(NoWay::NotCarried)
        );
        assert_eq!(gpe("vsw-ut-wpl", &ip, None, &mut mask), Ok(None));
        let not_taken = || {
            world
                .drops()
                .into_iter()
                .find(|(r, _)| *r == "packet_type_not_taken")
                .unwrap()
                .1
        };
        let before = not_taken();
        let ip_for_plain = FlowKey {
            tun_id: 43,
            tun_src: u32::from(Ipv4Addr::new(198, 18, 86, 10)),
            ..FlowKey::default()
        };
        let point = ReceivePoint {
            geneve: false,
            l3: true,
        };
        assert_eq!(
            world.receiving_port(point, &ip_for_plain, &mut FlowKey::default(), true),
            None
        );
        assert_eq!(not_taken(), before + 1);
        for (name, (queues, reg)) in [
            ("vsw-ut-wkey", keyed),
            ("vsw-ut-wdst", to_flow),
            ("vsw-ut-wgv", geneve),
            ("vsw-ut-wgpe", ptap),
            ("vsw-ut-wl3", l3),
            ("vsw-ut-wpl", plain),
        ] {
            drop(queues);
            crate::tunnel::close_tunnel(&world, name, reg);
        }
        world.set_metadata0("vsw-ut-wovl", None);
        close_local(&world, "vsw-ut-wbr", local_reg);
    }

    #[test]
    fn a_port_opened_again_keeps_its_place_when_the_old_one_closes() {
        let world = TunnelWorld::new();
        let options = BTreeMap::from([
            ("remote_ip".to_string(), "198.18.79.1".to_string()),
            ("key".to_string(), "7".to_string()),
        ]);
        let config = TunnelConfig::parse(TunnelKind::Vxlan, &options).unwrap();
        let listed = || world.ports_show().contains("vsw-ut-reopen");
        // As a switch reopens a device: the new one first, then the old one closed.
        let (_old, old_reg) =
            crate::tunnel::open_tunnel(&world, "vsw-ut-reopen", "vsw-ut-ovl", &config).unwrap();
        let (_new, new_reg) =
            crate::tunnel::open_tunnel(&world, "vsw-ut-reopen", "vsw-ut-ovl", &config).unwrap();
        crate::tunnel::close_tunnel(&world, "vsw-ut-reopen", old_reg);
        assert!(
            listed(),
            "the new opening was taken away by the old one's close"
        );
        crate::tunnel::close_tunnel(&world, "vsw-ut-reopen", new_reg);
        assert!(!listed());
        // The same for an underlay bridge.
        let r1 = open_local(&world, "vsw-ut-reopenbr");
        let r2 = open_local(&world, "vsw-ut-reopenbr");
        close_local(&world, "vsw-ut-reopenbr", r1);
        assert!(world.snapshot().bridges.contains_key("vsw-ut-reopenbr"));
        close_local(&world, "vsw-ut-reopenbr", r2);
        assert!(!world.snapshot().bridges.contains_key("vsw-ut-reopenbr"));
    }
}
