//! A bridge's LOCAL port (its `internal` port) as the underlay end of tunnels: a
//! second receive queue through which tunnel ports hand it their encapsulated
//! frames, and a check in front of its transmit queue that takes tunnel packets out
//! (decapsulated, to their port) and learns neighbours from ARP and neighbour
//! discovery, before the rest goes to the host.

use std::sync::Arc;

use vsw_datapath::{PacketMeta, PortQueues, StageError, TunnelKey, TxFactory, TxOffloads, TxQueue};
use vsw_packet::key::{extract, FlowKey};
use vsw_packet::tunnel::{decap, DecapError};
use vsw_packet::vnet::{VNET_F_DATA_VALID, VNET_F_NEEDS_CSUM};
use vsw_packet::wire::ip::{IPPROTO_ICMPV6, IPPROTO_UDP};
use vsw_packet::{EtherType, MacAddr};
use vsw_tunnel::metadata::MetadataOption;
use vsw_tunnel::neigh::neighbour_for;

use super::world::{BridgeEnd, PortFor, Registration, TunnelDrop, TunnelWorld};
use crate::channel::Channel;

/// Makes internal port `name`'s queues the underlay end of `world`'s tunnels; the
/// registration is what closes it again.
pub fn open_local(
    world: &Arc<TunnelWorld>,
    name: &str,
    mut queues: PortQueues,
) -> (PortQueues, Registration) {
    let mac = crate::interface::mac(name).unwrap_or(MacAddr::ZERO);
    // Tunnel ports send super-frames through it whole; this bridge cuts them.
    let inject = Channel::with_frames_of(crate::channel::SUPER_FRAME);
    let rx = inject.reader().expect("a new channel has no reader");
    let registration = world.register_bridge(
        name,
        BridgeEnd {
            mac,
            inject,
            addresses: Vec::new(),
        },
    );
    queues.rx.push(Box::new(rx));
    let bridge: Arc<str> = Arc::from(name);
    let factory = queues.tx_factory.take();
    queues.tx = Box::new(LocalTx {
        world: world.clone(),
        inner: queues.tx,
        bridge: bridge.clone(),
    });
    let w = world.clone();
    queues.tx_factory = factory.map(|f| -> TxFactory {
        Box::new(move || {
            f().map(|q| -> Box<dyn TxQueue> {
                Box::new(LocalTx {
                    world: w.clone(),
                    inner: q,
                    bridge: bridge.clone(),
                })
            })
        })
    });
    (queues, registration)
}

/// Internal port `name`, opened as `registration`, is closed: tunnels no longer reach
/// the underlay through it (unless it was opened again since).
pub fn close_local(world: &TunnelWorld, name: &str, registration: Registration) {
    world.unregister_bridge(name, registration);
}

struct LocalTx {
    world: Arc<TunnelWorld>,
    inner: Box<dyn TxQueue>,
    bridge: Arc<str>,
}

/// The ethertype and (for IP) the protocol of an untagged frame, cheaply: a look at
/// two bytes, by the wire views' field tables, before anything is parsed.
fn kind_of(data: &[u8]) -> (u16, u8) {
    use vsw_packet::ethernet::{field, ETH_HDR_LEN};
    use vsw_packet::wire::{ipv4, ipv6};
    let Some(t) = data.get(field::ETHERTYPE) else {
        return (0, 0);
    };
    let ethertype = u16::from_be_bytes([t[0], t[1]]);
    let proto_at = match ethertype {
        EtherType::IPV4 => ETH_HDR_LEN + ipv4::field::PROTOCOL,
        EtherType::IPV6 => ETH_HDR_LEN + ipv6::field::NXT_HDR,
        _ => return (ethertype, 0),
    };
    (ethertype, data.get(proto_at).copied().unwrap_or(0))
}

impl LocalTx {
    /// Takes a tunnel packet for an open tunnel port out of the host's way: `true`
    /// when it was taken (forwarded to its port, or dropped as malformed).
    fn took_tunnel_packet(&mut self, data: &[u8], meta: &PacketMeta) -> bool {
        let w = &*self.world;
        let snap = w.snapshot();
        if snap.ports.is_empty() {
            return false;
        }
        // The sender's device vouches for the checksum (a local sender's, left to
        // finish; or one the kernel checked).
        let vouched = meta.vnet.flags & (VNET_F_NEEDS_CSUM | VNET_F_DATA_VALID) != 0;
        // Critical options are checked once the port is known: by its bridge's TLV
        // map (a packet for the host's own tunnel device is the host's to judge).
        match decap(data, &snap.listen, vouched, |_, _| true) {
            Ok(d) => match snap.port_for(d.meta.kind, d.meta.src, d.meta.id) {
                PortFor::Port(i)
                    if MetadataOption::unknown_critical(d.options, snap.ports[i].metadata0) =>
                {
                    w.count_drop(TunnelDrop::UnknownCriticalOption);
                    true
                }
                PortFor::Port(i) => {
                    let port = &snap.ports[i];
                    let inner = d.inner;
                    let metadata0 = port
                        .metadata0
                        .and_then(|m| m.value_in(d.options))
                        .unwrap_or(0);
                    // A super-frame (the sender's GSO through its tunnel) crosses
                    // whole: the tunnel port's bridge hands it on or cuts it.
                    // The VNI and the outer addresses go with it, for rules to
                    // match as `tun_id`, `tun_src` and `tun_dst`.
                    let m = PacketMeta {
                        tunnel: TunnelKey::of_decapsulated(&d.meta, metadata0),
                        vnet: meta.vnet.of_inner(
                            (inner.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize),
                        ),
                        vlan: None,
                    };
                    let sent = port.rx.send_with(m, |buf| {
                        buf.get_mut(..inner.len())?.copy_from_slice(inner);
                        Some(inner.len())
                    });
                    match sent {
                        Ok(()) => {}
                        Err(StageError::TooBig) => w.count_drop(TunnelDrop::InnerTooBig),
                        Err(StageError::QueueFull) => w.count_drop(TunnelDrop::TunnelPortFull),
                    }
                    true
                }
                // A remote end of ours with another VNI: never forwarded.
                PortFor::UnknownVni => {
                    w.count_drop(TunnelDrop::UnknownVni);
                    true
                }
                // For the host's own socket on that port, not a tunnel port's.
                PortFor::Host => false,
            },
            Err(DecapError::NotTunnel) => false,
            Err(e) => {
                if let Some(why) = TunnelDrop::of_decap(&e) {
                    w.count_drop(why);
                }
                true
            }
        }
    }
}

impl TxQueue for LocalTx {
    /// The host's device's: tunnel super-frames come cut (by the egress stage), each
    /// outer packet decapsulated here on its own. Those a tunnel port takes whole are
    /// popped in the datapath (`DpAction::TunnelPop`); only what translation cannot
    /// pop (an IPv6 underlay, a TLV map of another bridge) reaches this check.
    fn offloads(&self) -> TxOffloads {
        self.inner.offloads()
    }

    fn learn_tunnel_tso(&mut self) {
        self.inner.learn_tunnel_tso();
    }

    fn receiver_may_poll(&self) -> bool {
        self.inner.receiver_may_poll()
    }

    fn receiver_polls(&self) -> bool {
        self.inner.receiver_polls()
    }

    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), StageError> {
        match kind_of(data) {
            // Only what is addressed to this bridge's own addresses may teach its
            // neighbour table (never a gratuitous ARP a tenant floods).
            (EtherType::ARP, _) | (EtherType::IPV6, IPPROTO_ICMPV6) => {
                let mut key = FlowKey::default();
                if extract(data, 0, meta.vlan, &mut key).is_ok() {
                    let w = &*self.world;
                    let snap = w.snapshot();
                    let own = snap.bridges.get(&*self.bridge).map(|b| &b.addresses[..]);
                    if let Some((ip, mac)) = own.and_then(|own| neighbour_for(&key, own)) {
                        w.saw_neighbour(ip, mac, &self.bridge);
                    }
                }
            }
            (EtherType::IPV4 | EtherType::IPV6, IPPROTO_UDP)
                if self.took_tunnel_packet(data, meta) =>
            {
                return Ok(());
            }
            _ => {}
        }
        self.inner.stage(data, meta)
    }

    fn pending(&self) -> usize {
        self.inner.pending()
    }

    fn flush(&mut self) -> usize {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::net::{IpAddr, Ipv4Addr};
    use vsw_datapath::memory::memory_port;
    use vsw_datapath::{RxBatch, RxQueue};
    use vsw_packet::builder;
    use vsw_packet::tunnel::{EncapSpec, EncapTemplate, TunnelKind};
    use vsw_tunnel::config::TunnelConfig;
    use vsw_tunnel::metadata::MetadataOption;

    const REMOTE: Ipv4Addr = Ipv4Addr::new(198, 18, 77, 1);

    fn received(q: &mut dyn RxQueue) -> Vec<Vec<u8>> {
        let mut batch = RxBatch::new();
        q.recv(&mut batch);
        let out = batch.iter().map(|p| p.data.to_vec()).collect();
        drop(batch);
        q.release();
        out
    }

    fn vxlan(inner: &[u8], vni: u32) -> Vec<u8> {
        vxlan_from(REMOTE, inner, vni)
    }

    fn vxlan_from(src: Ipv4Addr, inner: &[u8], vni: u32) -> Vec<u8> {
        let dst = Ipv4Addr::new(198, 18, 77, 2);
        from_remote(TunnelKind::Vxlan, src, dst, vni, Vec::new(), inner)
    }

    /// `inner` as the remote end `src` sends it to `dst` through a tunnel of `kind`
    /// (its default UDP port, no outer checksum), with these Geneve options.
    fn from_remote(
        kind: TunnelKind,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        vni: u32,
        geneve_options: Vec<u8>,
        inner: &[u8],
    ) -> Vec<u8> {
        let t = EncapTemplate::new(&EncapSpec {
            kind,
            eth_src: MacAddr([2, 0, 0, 0, 0, 1]),
            eth_dst: MacAddr([2, 0, 0, 0, 0, 2]),
            src: IpAddr::V4(src),
            dst: IpAddr::V4(dst),
            tos: 0,
            ttl: 64,
            df: true,
            udp_dst: kind.default_port(),
            udp_csum: false,
            vni,
            geneve_options,
        })
        .unwrap();
        let mut out = vec![0u8; 70_000];
        let n = t.push(inner, &mut out, 40000, 0).unwrap();
        out.truncate(n);
        out
    }

    #[test]
    fn the_local_port_hands_tunnel_packets_to_their_port_and_learns_neighbours() {
        let world = TunnelWorld::new();
        let (host_queues, host) = memory_port(1024);
        let (mut local, local_reg) = open_local(&world, "vsw-ut-local", host_queues);
        let options = BTreeMap::from([
            ("remote_ip".to_string(), REMOTE.to_string()),
            ("key".to_string(), "77".to_string()),
        ]);
        let config = TunnelConfig::parse(TunnelKind::Vxlan, &options).unwrap();
        let (mut tunnel, tunnel_reg) =
            crate::tunnel::open_tunnel(&world, "vsw-ut-vx", "vsw-ut-ovl", &config).unwrap();
        let inner = builder::udp4_frame([10, 0, 0, 1], [10, 0, 0, 2], 1000, 7, 18);
        // A tunnel packet for the port: its inner frame comes out of the port, not
        // out of the host's side.
        local
            .tx
            .stage(&vxlan(&inner, 77), &PacketMeta::default())
            .unwrap();
        local.tx.flush();
        assert_eq!(received(tunnel.rx[0].as_mut()), vec![inner.clone()]);
        // Another VNI from the port's remote end is no tunnel of this switch's: never
        // forwarded (dropped and counted: a_vni_no_port_has_… below).
        local
            .tx
            .stage(&vxlan(&inner, 78), &PacketMeta::default())
            .unwrap();
        local.tx.flush();
        assert!(received(tunnel.rx[0].as_mut()).is_empty());
        assert!(host.try_recv().is_none());
        // Malformed (the VNI flag cleared): dropped and counted.
        let before = world.drops();
        let mut bad = vxlan(&inner, 77);
        bad[42] = 0;
        local.tx.stage(&bad, &PacketMeta::default()).unwrap();
        local.tx.flush();
        assert!(host.try_recv().is_none());
        let after = world.drops();
        let n = |d: &[(&str, u64)]| d.iter().find(|(r, _)| *r == "vxlan_no_vni").unwrap().1;
        assert_eq!(n(&after), n(&before) + 1);
        // Tunnel super-frames reach it only as the host's device takes them: cut
        // by the egress stage (whole ones a tunnel port takes are popped in the
        // datapath).
        assert!(!local.tx.offloads().tunnel_tso);
        // ARP for the bridge's own address teaches the neighbour table, and still
        // reaches the host; a gratuitous one (a host announcing itself) teaches
        // nothing.
        let mut routes = vsw_tunnel::route::RouteTable::default();
        routes
            .add_from_args(&[
                "198.18.77.0/24".into(),
                "vsw-ut-local".into(),
                "src=198.18.77.2".into(),
            ])
            .unwrap();
        world.set_routes(std::sync::Arc::new(routes));
        let arp = |spa: [u8; 4], tpa: [u8; 4]| {
            builder::ethernet(
                MacAddr::BROADCAST,
                MacAddr([2, 0, 0, 0, 0, 5]),
                &[],
                EtherType::ARP,
                &builder::arp(1, MacAddr([2, 0, 0, 0, 0, 5]), spa, MacAddr::ZERO, tpa),
            )
        };
        for frame in [
            arp([198, 18, 77, 5], [198, 18, 77, 2]),
            arp([198, 18, 77, 6], [198, 18, 77, 6]),
        ] {
            local.tx.stage(&frame, &PacketMeta::default()).unwrap();
            local.tx.flush();
            assert!(host
                .recv_timeout(std::time::Duration::from_secs(1))
                .is_some());
        }
        world.absorb_neighbours(vsw_datapath::clock::now_ms());
        let shown = world.neighbours_show();
        assert!(shown.contains("198.18.77.5"), "{shown}");
        assert!(!shown.contains("198.18.77.6"), "{shown}");
        drop(tunnel);
        crate::tunnel::close_tunnel(&world, "vsw-ut-vx", tunnel_reg);
        close_local(&world, "vsw-ut-local", local_reg);
    }

    /// An underlay bridge `bridge` of `world` (its LOCAL port in front of a memory
    /// port) whose route table is `subnet dev bridge src=src`.
    fn underlay(
        world: &Arc<TunnelWorld>,
        bridge: &str,
        subnet: &str,
        src: &str,
    ) -> (vsw_datapath::memory::MemoryPeer, PortQueues, Registration) {
        let (host_queues, host) = memory_port(1024);
        let (local, local_reg) = open_local(world, bridge, host_queues);
        let mut routes = vsw_tunnel::route::RouteTable::default();
        routes
            .add_from_args(&[subnet.to_string(), bridge.to_string(), format!("src={src}")])
            .unwrap();
        world.set_routes(std::sync::Arc::new(routes));
        (host, local, local_reg)
    }

    /// The first packet of `q` with its metadata.
    fn first_with_meta(q: &mut dyn RxQueue) -> Option<(Vec<u8>, PacketMeta)> {
        let mut batch = RxBatch::new();
        q.recv(&mut batch);
        let out = batch.iter().next().map(|p| (p.data.to_vec(), p.meta));
        drop(batch);
        q.release();
        out
    }

    #[test]
    fn a_vni_no_port_has_from_a_remote_end_of_ours_is_dropped_and_counted() {
        let world = TunnelWorld::new();
        let (remote, stranger) = (Ipv4Addr::new(198, 18, 84, 1), Ipv4Addr::new(198, 18, 84, 9));
        let (host, mut local, local_reg) =
            underlay(&world, "vsw-ut-vnibr", "198.18.84.0/24", "198.18.84.2");
        let options = BTreeMap::from([
            ("remote_ip".to_string(), remote.to_string()),
            ("key".to_string(), "7".to_string()),
        ]);
        let config = TunnelConfig::parse(TunnelKind::Vxlan, &options).unwrap();
        let (mut tunnel, tunnel_reg) =
            crate::tunnel::open_tunnel(&world, "vsw-ut-vnivx", "vsw-ut-ovl", &config).unwrap();
        let inner = builder::udp4_frame([10, 0, 0, 1], [10, 0, 0, 2], 1000, 7, 18);
        let from = |src: Ipv4Addr, vni: u32| {
            let dst = Ipv4Addr::new(198, 18, 84, 2);
            from_remote(TunnelKind::Vxlan, src, dst, vni, Vec::new(), &inner)
        };
        let unknown = || {
            let all = world.drops();
            all.iter()
                .find(|(r, _)| *r == "unknown_vni")
                .map_or(0, |(_, n)| *n)
        };
        let before = unknown();
        // The port's VNI: to the port.
        local
            .tx
            .stage(&from(remote, 7), &PacketMeta::default())
            .unwrap();
        assert!(first_with_meta(tunnel.rx[0].as_mut()).is_some());
        // Another VNI from the port's remote: neither the port's nor the host's.
        local
            .tx
            .stage(&from(remote, 8), &PacketMeta::default())
            .unwrap();
        local.tx.flush();
        assert!(first_with_meta(tunnel.rx[0].as_mut()).is_none());
        assert!(host.try_recv().is_none(), "handed to the host");
        assert_eq!(unknown(), before + 1);
        // From an address no port has: the host's (a tunnel device of its own).
        local
            .tx
            .stage(&from(stranger, 8), &PacketMeta::default())
            .unwrap();
        local.tx.flush();
        assert!(host.try_recv().is_some(), "not handed to the host");
        assert_eq!(unknown(), before + 1);
        drop(tunnel);
        crate::tunnel::close_tunnel(&world, "vsw-ut-vnivx", tunnel_reg);
        close_local(&world, "vsw-ut-vnibr", local_reg);
    }

    #[test]
    fn a_flow_keyed_port_sends_with_the_id_a_rule_set_and_hands_on_the_id_received() {
        let world = TunnelWorld::new();
        let remote = Ipv4Addr::new(198, 18, 78, 1);
        let (_host, mut local, local_reg) =
            underlay(&world, "vsw-ut-flowbr", "198.18.78.0/24", "198.18.78.2");
        world.neighbour_set(
            IpAddr::V4(remote),
            MacAddr([2, 0, 0, 0, 0, 0x78]),
            "vsw-ut-flowbr",
        );
        let options = BTreeMap::from([
            ("remote_ip".to_string(), remote.to_string()),
            ("key".to_string(), "flow".to_string()),
            ("tos".to_string(), "inherit".to_string()),
            ("ttl".to_string(), "inherit".to_string()),
        ]);
        let config = TunnelConfig::parse(TunnelKind::Vxlan, &options).unwrap();
        let (mut tunnel, tunnel_reg) =
            crate::tunnel::open_tunnel(&world, "vsw-ut-flowvx", "vsw-ut-ovl", &config).unwrap();
        let inner = builder::udp4_frame([10, 0, 0, 1], [10, 0, 0, 2], 1000, 7, 18);
        // Out: the VNI is the one the rules set (`set_field:0x1234->tun_id`).
        let meta = PacketMeta {
            tunnel: TunnelKey {
                id: 0x1234,
                ..TunnelKey::default()
            },
            ..PacketMeta::default()
        };
        tunnel.tx.stage(&inner, &meta).unwrap();
        let (sent, _) = first_with_meta(local.rx[1].as_mut()).expect("an encapsulated frame");
        let ports = vsw_packet::tunnel::TunnelPorts {
            vxlan: Some(4789),
            geneve: None,
        };
        let d = decap(&sent, &ports, false, |_, _| false).unwrap();
        assert_eq!(d.meta.id, 0x1234);
        assert_eq!(d.inner, &inner[..]);
        // `tos=inherit`, `ttl=inherit`: the inner packet's (udp4_frame: 0 and 64).
        assert_eq!((d.meta.tos, d.meta.ttl), (0, 64));
        let marked = {
            let mut f = inner.clone();
            let mut ip = vsw_packet::wire::ipv4::Packet::new_checked(&mut f[14..]).unwrap();
            ip.set_tos(0xb8);
            ip.set_ttl(9);
            ip.fill_checksum();
            f
        };
        tunnel.tx.stage(&marked, &meta).unwrap();
        let (sent, _) = first_with_meta(local.rx[1].as_mut()).expect("the marked frame");
        let d = decap(&sent, &ports, false, |_, _| false).unwrap();
        assert_eq!((d.meta.tos, d.meta.ttl), (0xb8, 9));
        // In: any VNI from that remote is this port's, and the rules see it as tun_id.
        let local_end = Ipv4Addr::new(198, 18, 78, 2);
        let frame = from_remote(TunnelKind::Vxlan, remote, local_end, 99, Vec::new(), &inner);
        local.tx.stage(&frame, &PacketMeta::default()).unwrap();
        let (got, m) = first_with_meta(tunnel.rx[0].as_mut()).expect("the inner frame");
        assert_eq!(got, inner);
        // And its outer addresses as tun_src and tun_dst.
        let want = TunnelKey {
            id: 99,
            src: u32::from(remote),
            dst: u32::from(Ipv4Addr::new(198, 18, 78, 2)),
            metadata0: 0,
            flags: 0,
        };
        assert_eq!(m.tunnel, want);
        drop(tunnel);
        crate::tunnel::close_tunnel(&world, "vsw-ut-flowvx", tunnel_reg);
        close_local(&world, "vsw-ut-flowbr", local_reg);
    }

    /// Natively (translation asking the tunnels' state): a next hop without a MAC
    /// drops the packet in its own pass — counted when a packet is passing, not
    /// when a flow is revalidated — and is asked for, through its bridge; its
    /// answer gives the way out and ends the asking.
    #[test]
    fn a_next_hop_without_a_mac_is_a_native_drop_and_an_ask_through_its_bridge() {
        use vsw_datapath::{NoWay, TunnelEgress};
        let world = TunnelWorld::new();
        let (_host, _local, local_reg) =
            underlay(&world, "vsw-ut-askbr", "198.18.82.0/24", "198.18.82.2");
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
        let asked = world.way_out("vsw-ut-askvx", &key, &mut mask, true);
        assert_eq!(asked, Err(NoWay::Dropped));
        assert_eq!(unknown(), before + 1);
        let again = world.way_out("vsw-ut-askvx", &key, &mut mask, false);
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
            .way_out("vsw-ut-askvx", &key, &mut mask, true)
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
        let port = world.receiving_port(false, &popped, &mut mask, true);
        assert_eq!(port.as_deref(), Some("vsw-ut-askvx"));
        let other = FlowKey {
            tun_id: 77,
            ..popped
        };
        assert_eq!(world.receiving_port(false, &other, &mut mask, true), None);
        assert_eq!(world.receiving_port(false, &other, &mut mask, false), None);
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
        let way = world.way_out("vsw-ut-askvx", &ip, &mut mask, true).unwrap();
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
            .way_out("vsw-ut-askvx", &arp, &mut mask, true)
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
        let (_host, _local, local_reg) =
            underlay(&world, "vsw-ut-popbr", "198.18.83.0/24", "198.18.83.2");
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
        let (_host, _local, local_reg) =
            underlay(&world, "vsw-ut-v6br", "fd00:84::/64", "fd00:84::2");
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
            assert_eq!(receive_point(pop.receive), Some(false));
            assert!(remote6_of(pop.receive).is_some());
            let popped = FlowKey {
                in_port: pop.receive,
                ..FlowKey::default()
            };
            let mut m = FlowKey::default();
            let chose = world.receiving_port(false, &popped, &mut m, true);
            assert_eq!(chose.as_deref(), Some(port));
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
        let (_host, _local, local_reg) =
            underlay(&world, "vsw-ut-snbr", "198.18.85.0/24", "198.18.85.2");
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
        let (_host, _local, local_reg) =
            underlay(&world, "vsw-ut-wbr", "198.18.86.0/24", "198.18.86.2");
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
        let way = world.way_out("vsw-ut-wkey", &k, &mut mask, true).unwrap();
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
            let way = world.way_out("vsw-ut-wdst", &k, &mut mask, true).unwrap();
            assert_eq!(way.spec.dst, IpAddr::V4(Ipv4Addr::new(198, 18, 86, last)));
            assert_eq!(way.spec.eth_dst, MacAddr([2, 0, 0, 0, 0x86, last]));
            assert_eq!((way.spec.vni, { mask.tun_dst }), (5, u32::MAX));
        }
        let nowhere = world.way_out("vsw-ut-wdst", &FlowKey::default(), &mut mask, true);
        assert_eq!(nowhere, Err(NoWay::Dropped), "no tun_dst");
        let geneve = open(
            "vsw-ut-wgv",
            TunnelKind::Geneve,
            &[("remote_ip", "198.18.86.11")],
        );
        let mut mask = FlowKey::default();
        let plain = world
            .way_out("vsw-ut-wgv", &FlowKey::default(), &mut mask, true)
            .unwrap();
        assert!(plain.spec.geneve_options.is_empty(), "no value: no option");
        assert_eq!(mask.tun_metadata0, u32::MAX);
        let k = FlowKey {
            tun_metadata0: 0xabcd,
            ..FlowKey::default()
        };
        let with = world.way_out("vsw-ut-wgv", &k, &mut mask, true).unwrap();
        let tlv = &with.spec.geneve_options;
        assert_eq!(&tlv[..3], &[0x01, 0x02, 0x80], "the map's class and type");
        assert_eq!(&tlv[tlv.len() - 4..], &0xabcd_u32.to_be_bytes());
        for (name, (queues, reg)) in [
            ("vsw-ut-wkey", keyed),
            ("vsw-ut-wdst", to_flow),
            ("vsw-ut-wgv", geneve),
        ] {
            drop(queues);
            crate::tunnel::close_tunnel(&world, name, reg);
        }
        world.set_metadata0("vsw-ut-wovl", None);
        close_local(&world, "vsw-ut-wbr", local_reg);
    }

    #[test]
    fn a_port_whose_remote_the_rules_set_sends_each_frame_to_its_tun_dst() {
        let world = TunnelWorld::new();
        let (_host, mut local, local_reg) =
            underlay(&world, "vsw-ut-dstbr", "198.18.81.0/24", "198.18.81.2");
        let (a, b, unknown) = (
            Ipv4Addr::new(198, 18, 81, 10),
            Ipv4Addr::new(198, 18, 81, 11),
            Ipv4Addr::new(198, 18, 81, 12),
        );
        for (ip, last) in [(a, 0x0a), (b, 0x0b)] {
            world.neighbour_set(
                IpAddr::V4(ip),
                MacAddr([2, 0, 0, 0, 0x81, last]),
                "vsw-ut-dstbr",
            );
        }
        let options = BTreeMap::from([
            ("remote_ip".to_string(), "flow".to_string()),
            ("key".to_string(), "5".to_string()),
        ]);
        let config = TunnelConfig::parse(TunnelKind::Vxlan, &options).unwrap();
        let (mut tunnel, tunnel_reg) =
            crate::tunnel::open_tunnel(&world, "vsw-ut-dstvx", "vsw-ut-ovl", &config).unwrap();
        let inner = builder::udp4_frame([10, 0, 0, 1], [10, 0, 0, 2], 1000, 7, 18);
        let to = |dst: Ipv4Addr| PacketMeta {
            tunnel: TunnelKey {
                dst: u32::from(dst),
                ..TunnelKey::default()
            },
            ..PacketMeta::default()
        };
        let ports = vsw_packet::tunnel::TunnelPorts {
            vxlan: Some(4789),
            geneve: None,
        };
        // Each frame to the remote its rule set, through that remote's neighbour;
        // back and forth, as a cache of remotes must get right.
        for dst in [a, b, a] {
            tunnel.tx.stage(&inner, &to(dst)).unwrap();
            let (sent, _) = first_with_meta(local.rx[1].as_mut()).expect("an encapsulated frame");
            let d = decap(&sent, &ports, false, |_, _| false).unwrap();
            assert_eq!(d.meta.dst, IpAddr::V4(dst));
            assert_eq!(d.meta.src, IpAddr::V4(Ipv4Addr::new(198, 18, 81, 2)));
            assert_eq!(d.meta.id, 5);
            let last = if dst == a { 0x0a } else { 0x0b };
            assert_eq!(&sent[..6], &[2, 0, 0, 0, 0x81, last]);
        }
        // No rule said where: dropped and counted, nothing sent.
        let drops = |why: &str| {
            let all = world.drops();
            all.iter().find(|(r, _)| *r == why).map_or(0, |(_, n)| *n)
        };
        let (none_before, unknown_before) =
            (drops("no_tunnel_destination"), drops("neighbour_unknown"));
        tunnel.tx.stage(&inner, &PacketMeta::default()).unwrap();
        assert_eq!(drops("no_tunnel_destination"), none_before + 1);
        // A remote whose MAC is not known: dropped, and asked for.
        tunnel.tx.stage(&inner, &to(unknown)).unwrap();
        // (Other tests may count such drops at the same time: at least this one.)
        assert!(drops("neighbour_unknown") > unknown_before);
        let (asked, _) = first_with_meta(local.rx[1].as_mut()).expect("an ARP request");
        let mut key = FlowKey::default();
        extract(&asked, 1, None, &mut key).unwrap();
        assert_eq!(
            (key.dl_type, key.nw_dst),
            (EtherType::ARP, u128::from(u32::from(unknown)))
        );
        drop(tunnel);
        crate::tunnel::close_tunnel(&world, "vsw-ut-dstvx", tunnel_reg);
        close_local(&world, "vsw-ut-dstbr", local_reg);
    }

    #[test]
    fn a_geneve_option_the_tlv_map_names_is_tun_metadata0_both_ways() {
        let world = TunnelWorld::new();
        let remote = Ipv4Addr::new(198, 18, 82, 1);
        let (_host, mut local, local_reg) =
            underlay(&world, "vsw-ut-gvbr", "198.18.82.0/24", "198.18.82.2");
        world.neighbour_set(
            IpAddr::V4(remote),
            MacAddr([2, 0, 0, 0, 0x82, 1]),
            "vsw-ut-gvbr",
        );
        // A critical type (0x80 and up) of a class no other test uses: known only
        // through the map.
        let option = MetadataOption {
            class: 0x0102,
            kind: 0x81,
        };
        // The overlay bridge the Geneve port is on has the map; another bridge
        // names another option.
        world.set_metadata0("vsw-ut-gvovl", Some(option));
        world.set_metadata0(
            "vsw-ut-gvother",
            Some(MetadataOption {
                class: 0x0102,
                kind: 0x82,
            }),
        );
        let options = BTreeMap::from([
            ("remote_ip".to_string(), remote.to_string()),
            ("key".to_string(), "7".to_string()),
        ]);
        let config = TunnelConfig::parse(TunnelKind::Geneve, &options).unwrap();
        let (mut tunnel, tunnel_reg) =
            crate::tunnel::open_tunnel(&world, "vsw-ut-gv", "vsw-ut-gvovl", &config).unwrap();
        let inner = builder::udp4_frame([10, 0, 0, 1], [10, 0, 0, 2], 1000, 7, 18);
        let ports = vsw_packet::tunnel::TunnelPorts {
            vxlan: None,
            geneve: Some(6081),
        };
        // Out: a rule's tun_metadata0 goes as the option; none, no option.
        let with = PacketMeta {
            tunnel: TunnelKey {
                metadata0: 0xdead_beef,
                ..TunnelKey::default()
            },
            ..PacketMeta::default()
        };
        tunnel.tx.stage(&inner, &with).unwrap();
        let (sent, _) = first_with_meta(local.rx[1].as_mut()).expect("an encapsulated frame");
        let d = decap(&sent, &ports, false, |c, k| option.is(c, k)).unwrap();
        assert_eq!(option.value_in(d.options), Some(0xdead_beef));
        assert_eq!(d.inner, &inner[..]);
        tunnel.tx.stage(&inner, &PacketMeta::default()).unwrap();
        let (plain, _) = first_with_meta(local.rx[1].as_mut()).expect("a frame without it");
        let d = decap(&plain, &ports, false, |_, _| false).unwrap();
        assert!(d.options.is_empty());
        // In: the option's value reaches the rules as tun_metadata0, and being
        // mapped, a critical option is known rather than dropped.
        let mut tlv = option.tlv();
        tlv[4..].copy_from_slice(&0xdead_beefu32.to_be_bytes());
        let local_end = Ipv4Addr::new(198, 18, 82, 2);
        let frame = from_remote(TunnelKind::Geneve, remote, local_end, 7, tlv, &inner);
        let sent = &frame[..];
        local.tx.stage(sent, &PacketMeta::default()).unwrap();
        let (got, m) = first_with_meta(tunnel.rx[0].as_mut()).expect("the inner frame");
        assert_eq!(got, inner);
        assert_eq!(m.tunnel.metadata0, 0xdead_beef);
        assert_eq!(m.tunnel.flags, 0);
        // The same as a control packet (Geneve's O bit, byte 1 of its header after
        // the outer Ethernet, IPv4 and UDP headers): tun_flags says OAM.
        let mut oam = sent.to_vec();
        oam[14 + 20 + 8 + 1] |= 0x80;
        local.tx.stage(&oam, &PacketMeta::default()).unwrap();
        let (_, m) = first_with_meta(tunnel.rx[0].as_mut()).expect("the OAM packet");
        assert_eq!(m.tunnel.flags, vsw_packet::key::TUN_FLAG_OAM);
        // Another bridge's map is not this port's: a peer of that bridge clearing
        // it changes nothing here.
        world.set_metadata0("vsw-ut-gvother", None);
        local.tx.stage(sent, &PacketMeta::default()).unwrap();
        let (_, m) = first_with_meta(tunnel.rx[0].as_mut()).expect("still taken");
        assert_eq!(m.tunnel.metadata0, 0xdead_beef);
        // Unmapped on the port's own bridge, the same packet's critical option is
        // unknown: dropped.
        world.set_metadata0("vsw-ut-gvovl", None);
        local.tx.stage(sent, &PacketMeta::default()).unwrap();
        assert!(first_with_meta(tunnel.rx[0].as_mut()).is_none());
        drop(tunnel);
        crate::tunnel::close_tunnel(&world, "vsw-ut-gv", tunnel_reg);
        close_local(&world, "vsw-ut-gvbr", local_reg);
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
        let (_q1, r1) = open_local(&world, "vsw-ut-reopenbr", memory_port(16).0);
        let (_q2, r2) = open_local(&world, "vsw-ut-reopenbr", memory_port(16).0);
        close_local(&world, "vsw-ut-reopenbr", r1);
        assert!(world.snapshot().bridges.contains_key("vsw-ut-reopenbr"));
        close_local(&world, "vsw-ut-reopenbr", r2);
        assert!(!world.snapshot().bridges.contains_key("vsw-ut-reopenbr"));
    }
}
