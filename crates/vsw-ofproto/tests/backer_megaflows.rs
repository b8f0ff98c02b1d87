//! The fast path gives what a fresh translation gives, across bridges: an overlay
//! bridge with a VXLAN port, its underlay, and a bridge joined to it by a patch pair,
//! all on one backer. Random rules in the overlay (patch crossings, tunnel output
//! natively pushed, a select group decided by the datapath's hash and a
//! recirculation) and random packets — the workloads', and VXLAN packets from the
//! wire, popped natively — go through a running datapath; after every packet, what
//! came out of each port must be exactly what fresh translations say (a reference
//! executor that pushes and pops the headers and translates each recirculated or
//! popped pass anew). Rule changes, the next hop's MAC changing and the way out
//! becoming unknown (the tunnel port's own queue then) are interleaved: what keeps
//! the cached flows right is the revalidation, run as vswd runs it.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use vsw_datapath::{
    Datapath, DpAction, PmdConfig, PortHandle, PortStats, PushHeader, TunnelKey, Upcall,
};
use vsw_flow::{parse_flow, parse_group, Pipeline};
use vsw_ofproto::{Backer, BridgeSlot, Ofproto, TunnelEgress, TunnelWay};
use vsw_packet::builder::{ethernet, ipv4, tcp, udp, Ipv4};
use vsw_packet::rewrite::PacketBuf;
use vsw_packet::tunnel::{decap, EncapSpec, EncapTemplate, TunnelKind, TunnelPorts};
use vsw_packet::{extract, EtherType, FlowKey, MacAddr, VnetHdr};

/// Datapath ports: the overlay's a1, a2 and VXLAN port, the underlay's LOCAL port
/// and uplink, the patched bridge's b1.
const A1: u32 = 1;
const A2: u32 = 2;
const VX: u32 = 3;
const LOCAL: u32 = 4;
const UPLINK: u32 = 5;
const B1: u32 = 6;
const PORTS: u32 = 6;
/// The overlay's patch port (OpenFlow number in both bridges).
const PATCH: u32 = 9;
const HOST: [u8; 4] = [198, 18, 0, 1];
const REMOTE: [u8; 4] = [198, 18, 0, 2];
const VNI: u32 = 42;
const MAX_IDLE_MS: u64 = 600_000;

fn mac(n: u8) -> MacAddr {
    MacAddr([2, 0, 0, 0, 0, n])
}

fn spec(next_hop: MacAddr, src: [u8; 4], dst: [u8; 4], vni: u32) -> EncapSpec {
    EncapSpec {
        kind: TunnelKind::Vxlan,
        eth_src: mac(0x50),
        eth_dst: next_hop,
        src: std::net::Ipv4Addr::from(src).into(),
        dst: std::net::Ipv4Addr::from(dst).into(),
        tos: 0,
        ttl: 64,
        // Outer IPv4 ID 0: the reference pushes what the PMD pushes.
        df: true,
        udp_dst: 4789,
        udp_csum: false,
        vni,
        geneve_options: Vec::new(),
        gpe: None,
    }
}

/// The tunnels' state: one VXLAN port "vx" to REMOTE through underlay "und", whose
/// next hop's MAC the test changes, or forgets (`known`).
struct Tunnels {
    next_hop: Mutex<MacAddr>,
    known: AtomicBool,
}

impl TunnelEgress for Tunnels {
    fn way_out(
        &self,
        port: &str,
        key: &FlowKey,
        _l3: Option<u16>,
        mask: &mut FlowKey,
        _passing: bool,
    ) -> Result<TunnelWay, vsw_datapath::NoWay> {
        if port != "vx" || !self.known.load(Ordering::SeqCst) {
            return Err(vsw_datapath::NoWay::ByQueue);
        }
        let hop = *self.next_hop.lock().unwrap();
        // `key=flow`'s way: the ID the packet carries, VNI when it has none.
        mask.tun_id = u64::MAX;
        let vni = if key.tun_id != 0 {
            key.tun_id as u32
        } else {
            VNI
        };
        Ok(TunnelWay {
            spec: spec(hop, HOST, REMOTE, vni),
            underlay: "und".into(),
        })
    }

    fn terminates(
        &self,
        bridge: &str,
        key: &FlowKey,
        mask: &mut FlowKey,
    ) -> Option<vsw_datapath::tunnel_pop::Pop> {
        mask.dl_type = u16::MAX;
        mask.nw_proto = u8::MAX;
        mask.tp_dst = u16::MAX;
        mask.nw_src = u128::MAX;
        let tunnel = bridge == "und"
            && key.dl_type == EtherType::IPV4
            && key.nw_proto == 17
            && key.tp_dst == 4789
            && key.nw_src == u128::from(u32::from_be_bytes(REMOTE));
        tunnel.then_some(vsw_datapath::tunnel_pop::Pop {
            geneve: false,
            udp_port: 4789,
            option: None,
            other_option: None,
            receive: vsw_datapath::tunnel_pop::VXLAN_RECEIVE,
        })
    }

    fn receiving_port(
        &self,
        point: vsw_datapath::tunnel_pop::ReceivePoint,
        key: &FlowKey,
        mask: &mut FlowKey,
        _passing: bool,
    ) -> Option<(String, vsw_packet::tunnel::PacketTypeMode)> {
        mask.tun_src = u32::MAX;
        mask.tun_id = u64::MAX;
        let ours = !point.geneve
            && !point.l3
            && key.tun_src == u32::from_be_bytes(REMOTE)
            && key.tun_id == 42;
        ours.then(|| ("vx".to_string(), Default::default()))
    }
}

#[derive(Clone, Debug)]
enum Packet {
    /// A workload's, from a1 or b1.
    Workload {
        in_port: u32,
        src: u8,
        dst: u8,
        tcp: bool,
        tp_dst: u16,
    },
    /// A VXLAN packet from the wire (uplink), from REMOTE (or another address), with
    /// this VNI, around a workload frame.
    Tunnelled {
        from_remote: bool,
        vni: u32,
        src: u8,
        dst: u8,
    },
}

fn inner(src: u8, dst: u8, tcp_: bool, tp_dst: u16) -> Vec<u8> {
    let ip = Ipv4 {
        proto: if tcp_ { 6 } else { 17 },
        ..Ipv4::default()
    };
    let l4 = if tcp_ {
        tcp(1000, tp_dst, 0x10, b"data")
    } else {
        udp(1000, tp_dst, b"data")
    };
    ethernet(mac(dst), mac(src), &[], EtherType::IPV4, &ipv4(&ip, &l4))
}

impl Packet {
    fn in_port(&self) -> u32 {
        match self {
            Packet::Workload { in_port, .. } => *in_port,
            Packet::Tunnelled { .. } => UPLINK,
        }
    }

    fn frame(&self) -> Vec<u8> {
        match *self {
            Packet::Workload {
                src,
                dst,
                tcp,
                tp_dst,
                ..
            } => inner(src, dst, tcp, tp_dst),
            Packet::Tunnelled {
                from_remote,
                vni,
                src,
                dst,
            } => {
                let from = if from_remote { REMOTE } else { [198, 18, 0, 9] };
                let mut s = spec(mac(0x50), from, HOST, vni);
                s.eth_src = mac(0x60);
                let t = EncapTemplate::new(&s).unwrap();
                let f = inner(src, dst, false, 53);
                let mut out = vec![0u8; f.len() + t.overhead()];
                let n = t.push(&f, &mut out, 4000, 0).unwrap();
                out.truncate(n);
                out
            }
        }
    }
}

fn packet() -> impl Strategy<Value = Packet> {
    prop_oneof![
        3 => (
            prop_oneof![Just(A1), Just(B1)],
            1u8..=4,
            1u8..=4,
            any::<bool>(),
            prop_oneof![Just(53u16), Just(80)],
        )
            .prop_map(|(in_port, src, dst, tcp, tp_dst)| Packet::Workload {
                in_port,
                src,
                dst,
                tcp,
                tp_dst
            }),
        2 => (any::<bool>(), prop_oneof![Just(VNI), Just(7)], 1u8..=4, 1u8..=4).prop_map(
            |(from_remote, vni, src, dst)| Packet::Tunnelled {
                from_remote,
                vni,
                src,
                dst
            }
        ),
    ]
}

/// One overlay rule (datapath and OpenFlow numbers of the overlay's ports agree;
/// the patch port is 9).
fn rule() -> impl Strategy<Value = String> {
    let matching = prop_oneof![
        Just("in_port=1".to_string()),
        Just("in_port=3".to_string()),
        Just("in_port=9".to_string()),
        Just("udp".to_string()),
        Just("tcp,tp_dst=80".to_string()),
        Just("ip".to_string()),
    ];
    let action = prop_oneof![
        Just("output:1"),
        Just("output:2"),
        Just("output:3"),
        Just("output:9"),
        Just("NORMAL"),
        Just("group:1"),
        Just("mod_dl_dst:02:00:00:00:00:04"),
        Just("set_field:0x2a->tun_id"),
        Just("mod_tp_dst:443"),
    ];
    (1u16..=5, matching, proptest::collection::vec(action, 1..4)).prop_map(|(prio, m, a)| {
        let a: Vec<&str> = a
            .into_iter()
            .filter(|a| *a != "mod_tp_dst:443" || m.starts_with("udp") || m.starts_with("tcp"))
            .collect();
        let a = if a.is_empty() { vec!["drop"] } else { a };
        format!("priority={prio},{m},actions={}", a.join(","))
    })
}

#[derive(Clone, Debug)]
enum Op {
    Send(Packet),
    Rules(Vec<String>),
    /// The next hop's MAC is now this one.
    NextHop(u8),
    /// The way out is (un)known.
    Known(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => packet().prop_map(Op::Send),
        1 => proptest::collection::vec(rule(), 0..6).prop_map(Op::Rules),
        1 => (0x70u8..0x73).prop_map(Op::NextHop),
        1 => any::<bool>().prop_map(Op::Known),
    ]
}

/// A select group deciding by the datapath's hash (its buckets cross the patch or
/// go through the tunnel).
const SELECT: &str =
    "group_id=1,type=select,bucket=weight:1,actions=output:9,bucket=weight:1,actions=output:3";

fn overlay(rules: &[String]) -> Pipeline {
    let mut p = Pipeline::new();
    p.set_group(parse_group(SELECT, &|_: &str| None).unwrap(), false, 1)
        .unwrap();
    for r in rules {
        p.insert(parse_flow(r, &|_: &str| None).unwrap(), 1);
    }
    p
}

fn fixed(rules: &[&str]) -> Pipeline {
    let mut p = Pipeline::new();
    for r in rules {
        p.insert(parse_flow(r, &|_: &str| None).unwrap(), 1);
    }
    p
}

struct Rig {
    dp: Datapath,
    backer: Arc<Backer>,
    overlay: Arc<Ofproto>,
    tunnels: Arc<Tunnels>,
    ports: common::Ports,
    bridges: Vec<Arc<Ofproto>>,
}

fn rig(rules: &[String]) -> Rig {
    rig_with(rules, |_| vsw_datapath::memory::MEMORY_OFFLOADS)
}

/// [`rig`], each datapath port's transmit side finishing what `offloads` says.
fn rig_with(rules: &[String], offloads: impl Fn(u32) -> vsw_datapath::TxOffloads) -> Rig {
    let mut dp = Datapath::start(PmdConfig {
        cores: vec![0],
        pin: false,
    })
    .unwrap();
    let backer = Backer::new();
    let (a, overlay) = Ofproto::join(&backer, "ovl", overlay(rules)).unwrap();
    overlay.set_ports(vec![A1, A2, VX, PATCH]);
    // The underlay: the host's packets to the wire, the wire's to the host (where
    // tunnel packets are popped).
    let (u, underlay) = Ofproto::join(
        &backer,
        "und",
        fixed(&[
            "in_port=65534,actions=output:1",
            "in_port=1,actions=output:65534",
        ]),
    )
    .unwrap();
    underlay.set_ports(vec![1, 65534]);
    let (b, patched) = Ofproto::join(&backer, "brb", fixed(&["actions=NORMAL"])).unwrap();
    patched.set_ports(vec![1, PATCH]);
    let map: [(BridgeSlot, u32, u32); 8] = [
        (a, 1, A1),
        (a, 2, A2),
        (a, 3, VX),
        (a, PATCH, 7),
        (u, 65534, LOCAL),
        (u, 1, UPLINK),
        (b, 1, B1),
        (b, PATCH, 8),
    ];
    for (slot, of, dp_no) in map {
        backer.set_port(slot, of, dp_no).unwrap();
    }
    backer.set_patch(a, PATCH, "pa", "pb");
    backer.set_patch(b, PATCH, "pb", "pa");
    backer.set_tunnel_port(a, 3, "vx");
    let tunnels = Arc::new(Tunnels {
        next_hop: Mutex::new(mac(0x70)),
        known: AtomicBool::new(true),
    });
    backer.set_tunnel_egress(tunnels.clone());
    let (mut peers, mut stats) = (Vec::new(), Vec::new());
    for no in 1..=PORTS {
        let (q, peer) = vsw_datapath::memory::memory_port_with(1, 256, offloads(no));
        let s = Arc::new(PortStats::default());
        dp.add_port(PortHandle::new(no, &format!("p{no}"), q, s.clone()))
            .unwrap();
        peers.push(peer);
        stats.push(s);
    }
    dp.set_upcall(backer.clone()).unwrap();
    Rig {
        dp,
        backer,
        overlay,
        tunnels,
        ports: common::Ports {
            peers,
            stats,
            sent: vec![0; PORTS as usize],
        },
        bridges: vec![underlay, patched],
    }
}

/// What the datapath actions do to the packet in `buf` (which came in as `key`):
/// (port, frame) for each output; a recirculation's and a pop's next pass
/// translated anew.
fn expected(
    r: &Rig,
    buf: &mut PacketBuf,
    key: &FlowKey,
    (actions, headers): (&[DpAction], &[Arc<PushHeader>]),
    depth: usize,
) -> Vec<(u32, Vec<u8>)> {
    assert!(depth < 8, "recirculation without end");
    let mut out = Vec::new();
    // Each copy with the tunnel its packet had.
    let mut saved: Vec<(Vec<u8>, TunnelKey)> = Vec::new();
    let mut tunnel = TunnelKey {
        id: key.tun_id,
        src: key.tun_src,
        dst: key.tun_dst,
        metadata0: key.tun_metadata0,
        flags: key.tun_flags,
    };
    let mut dp_hash = 0;
    let mut at = 0;
    while let Some(a) = actions.get(at) {
        at += 1;
        match *a {
            DpAction::Save => saved.push((buf.data().to_vec(), tunnel)),
            DpAction::Restore => {
                let (copy, t) = saved.pop().expect("a saved copy");
                buf.load(&copy, None, VnetHdr::default()).unwrap();
                tunnel = t;
            }
            DpAction::Output(p) => out.push((p, buf.data().to_vec())),
            DpAction::SetDlDst(m) => buf.set_dl_dst(m),
            DpAction::SetTpDst(p) => buf.set_tp_dst(p),
            DpAction::SetTunnel(id) => tunnel.id = id,
            DpAction::Hash => {
                let mut k = FlowKey::default();
                extract(buf.data(), key.in_port, None, &mut k).unwrap();
                dp_hash = vsw_packet::key::l4_hash(&k);
            }
            DpAction::Recirc(id) => {
                let mut k = FlowKey::default();
                extract(buf.data(), key.in_port, None, &mut k).unwrap();
                tunnel.write_into(&mut k);
                k.recirc_id = id;
                k.dp_hash = dp_hash;
                let next = r.backer.translate(&k, vsw_datapath::clock::now_ms(), false);
                let mut copy = PacketBuf::new(4096);
                copy.load(buf.data(), None, VnetHdr::default()).unwrap();
                out.extend(expected(
                    r,
                    &mut copy,
                    &k,
                    (&next.actions, &next.headers),
                    depth + 1,
                ));
                // The recirculated pass ran on the packet itself.
                buf.load(copy.data(), None, VnetHdr::default()).unwrap();
            }
            DpAction::TunnelPush(n) => {
                let h = &headers[n as usize];
                assert_eq!(h.tunnel_port, VX);
                buf.push_tunnel(&h.template, 0).unwrap();
                tunnel = TunnelKey::default();
            }
            DpAction::TunnelPop(p) => {
                assert!(!p.geneve && p.udp_port == 4789 && p.option.is_none());
                let ports = TunnelPorts {
                    vxlan: Some(4789),
                    geneve: None,
                };
                let data = buf.data().to_vec();
                let Ok(d) = decap(&data, &ports, false, |_, _| false) else {
                    return out;
                };
                let v4 = |a: std::net::IpAddr| match a {
                    std::net::IpAddr::V4(a) => u32::from(a),
                    std::net::IpAddr::V6(_) => 0,
                };
                let mut k = FlowKey::default();
                extract(
                    d.inner,
                    vsw_datapath::tunnel_pop::VXLAN_RECEIVE,
                    None,
                    &mut k,
                )
                .unwrap();
                let t = TunnelKey {
                    id: u64::from(d.meta.id),
                    src: v4(d.meta.src),
                    dst: v4(d.meta.dst),
                    metadata0: 0,
                    flags: 0,
                };
                t.write_into(&mut k);
                let next = r.backer.translate(&k, vsw_datapath::clock::now_ms(), false);
                let mut popped = PacketBuf::new(4096);
                popped.load(d.inner, None, VnetHdr::default()).unwrap();
                out.extend(expected(
                    r,
                    &mut popped,
                    &k,
                    (&next.actions, &next.headers),
                    depth + 1,
                ));
                buf.load(popped.data(), None, VnetHdr::default()).unwrap();
            }
            ref other => panic!("{other} is not in these rules' reach"),
        }
    }
    out
}

fn run(ops: &[Op], first: &[String]) -> Result<(), TestCaseError> {
    let mut r = rig(first);
    let now = vsw_datapath::clock::now_ms;
    for op in ops {
        match op {
            Op::Rules(rules) => {
                r.overlay.set_pipeline(overlay(rules));
                r.dp.revalidate(now(), MAX_IDLE_MS).unwrap();
            }
            Op::NextHop(m) => {
                *r.tunnels.next_hop.lock().unwrap() = mac(*m);
                r.backer.underlay_changed();
                r.dp.revalidate(now(), MAX_IDLE_MS).unwrap();
            }
            Op::Known(k) => {
                r.tunnels.known.store(*k, Ordering::SeqCst);
                r.backer.underlay_changed();
                r.dp.revalidate(now(), MAX_IDLE_MS).unwrap();
            }
            Op::Send(p) => {
                let generation = r.backer.generation();
                let frame = p.frame();
                let got = r
                    .ports
                    .forward(&mut r.dp, p.in_port(), &frame, 1)
                    .map_err(TestCaseError::fail)?;
                let mut key = FlowKey::default();
                extract(&frame, p.in_port(), None, &mut key).unwrap();
                let fresh = r.backer.translate(&key, now(), false);
                let mut buf = PacketBuf::new(4096);
                buf.load(&frame, None, VnetHdr::default()).unwrap();
                let todo = (&fresh.actions[..], &fresh.headers[..]);
                let mut want = expected(&r, &mut buf, &key, todo, 0);
                want.sort();
                prop_assert_eq!(
                    &got,
                    &want,
                    "{:?} through {:?}: datapath flows {:?}",
                    p,
                    fresh.actions,
                    r.dp.dump_flows()
                );
                if r.backer.generation() != generation {
                    // A host learned or moved: the revalidator runs at once (vswd's
                    // is woken by the PMD).
                    r.dp.revalidate(now(), MAX_IDLE_MS).unwrap();
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(32)))]

    #[test]
    fn across_bridges_and_tunnels_the_fast_path_forwards_as_fresh_translations_say(
        first in proptest::collection::vec(rule(), 1..6),
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        run(&ops, &first)?;
    }
}

/// The shapes the property test is for, once each: through the tunnel (pushed, to
/// the uplink), from it (popped, to a1), across the patch, by the select group, and
/// the tunnel's way out changing and going.
#[test]
fn through_the_tunnel_across_the_patch_and_by_the_group() {
    let rules = vec![
        "priority=5,in_port=1,udp,actions=output:3".to_string(),
        // The group after a push: its next pass carries the tunnel the packet had.
        "priority=5,in_port=1,tcp,tp_dst=80,actions=set_field:0x7->tun_id,output:3,group:1"
            .to_string(),
        "priority=4,in_port=3,actions=output:1,output:9".to_string(),
        "priority=1,ip,actions=output:9".to_string(),
    ];
    let w = |src, dst, tcp, tp_dst| {
        Op::Send(Packet::Workload {
            in_port: A1,
            src,
            dst,
            tcp,
            tp_dst,
        })
    };
    let t = |vni, from_remote| {
        Op::Send(Packet::Tunnelled {
            from_remote,
            vni,
            src: 3,
            dst: 1,
        })
    };
    let ops = vec![
        w(1, 2, false, 53),
        w(1, 2, false, 53),
        t(VNI, true),
        t(VNI, true),
        t(7, true),
        t(VNI, false),
        w(1, 2, true, 80),
        w(2, 3, true, 80),
        Op::NextHop(0x71),
        w(1, 2, false, 53),
        Op::Known(false),
        w(1, 2, false, 53),
        Op::Known(true),
        w(1, 2, false, 53),
        Op::Send(Packet::Workload {
            in_port: B1,
            src: 4,
            dst: 1,
            tcp: false,
            tp_dst: 53,
        }),
    ];
    run(&ops, &rules).unwrap();
}

/// A TCP super-frame of `payload` bytes in segments of `mss`, its checksum left to
/// the device, as a kernel with offloads hands one over.
fn tcp_super_frame(payload: usize, mss: u16) -> (Vec<u8>, VnetHdr) {
    let ip = Ipv4 {
        proto: 6,
        ..Ipv4::default()
    };
    let data: Vec<u8> = (0..payload).map(|i| i as u8).collect();
    let f = ethernet(
        mac(2),
        mac(1),
        &[],
        EtherType::IPV4,
        &ipv4(&ip, &tcp(1000, 80, 0x18, &data)),
    );
    let vnet = VnetHdr {
        flags: vsw_packet::vnet::VNET_F_NEEDS_CSUM,
        gso_type: vsw_packet::vnet::VNET_GSO_TCPV4,
        hdr_len: 54,
        gso_size: mss,
        csum_start: 34,
        csum_offset: 16,
    };
    (f, vnet)
}

/// In the packet's own pass, whatever its size: a super-frame whose segments the
/// tunnel's MTU does not take is pushed with smaller ones; one that would pass IP's
/// largest packet with the outer headers is split in two, each pushed; a plain
/// packet above the tunnel's MTU is dropped and counted at the tunnel port. None
/// of them reaches the tunnel port's queue (which drops what does).
#[test]
fn a_tunnel_push_shrinks_splits_or_drops_what_does_not_fit_in_the_packets_own_pass() {
    use vsw_datapath::{PacketMeta, TxOffloads};
    const WAIT: std::time::Duration = std::time::Duration::from_secs(10);
    const QUIET: std::time::Duration = std::time::Duration::from_millis(200);
    let rules = vec!["priority=5,in_port=1,actions=output:3".to_string()];
    let mut rig = rig_with(&rules, |no| TxOffloads {
        // The tunnel's inner MTU; an uplink that takes tunnel super-frames whole.
        mtu: if no == VX { 1450 } else { 65_535 },
        tunnel_tso: no == UPLINK,
        ..vsw_datapath::memory::MEMORY_OFFLOADS
    });
    let ports = TunnelPorts {
        vxlan: Some(4789),
        geneve: None,
    };
    let uplink = (UPLINK - 1) as usize;
    let send = |rig: &mut Rig, f: &[u8], vnet: VnetHdr| {
        rig.ports.peers[(A1 - 1) as usize].send_with(
            f,
            PacketMeta {
                vnet,
                ..PacketMeta::default()
            },
        );
    };
    // The sender's segments (1,448) are larger than the tunnel takes (1,410).
    let (f, vnet) = tcp_super_frame(10_000, 1448);
    send(&mut rig, &f, vnet);
    let (out, meta) = rig.ports.peers[uplink]
        .recv_with(WAIT)
        .expect("one outer super-frame");
    let d = decap(&out, &ports, true, |_, _| false).unwrap();
    assert_eq!(d.inner, &f[..]);
    assert_eq!(meta.vnet.gso_size, 1410, "segments the tunnel's MTU takes");
    // 65,466 bytes of payload: with the outer headers, past IP's 65,535.
    let (f, vnet) = tcp_super_frame(65_466, 1448);
    send(&mut rig, &f, vnet);
    let mut payload = Vec::new();
    let (mut seq, mut lens) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        let (out, meta) = rig.ports.peers[uplink].recv_with(WAIT).expect("a part");
        assert!(out.len() - 14 <= 65_535, "{} bytes", out.len());
        assert_eq!(meta.vnet.gso_size, 1410);
        let d = decap(&out, &ports, true, |_, _| false).unwrap();
        seq.push(u32::from_be_bytes(d.inner[38..42].try_into().unwrap()));
        payload.extend_from_slice(&d.inner[54..]);
        lens.push(d.inner.len() - 54);
    }
    assert!(
        rig.ports.peers[uplink].recv_timeout(QUIET).is_none(),
        "two parts"
    );
    assert_eq!(payload, f[54..], "every byte, in order");
    assert_eq!(
        seq[1] - seq[0],
        lens[0] as u32,
        "the second part follows the first"
    );
    // A tunnel super-frame inside (a tunnel device's in the workload): cut into its
    // outer packets, each pushed, each within the tunnel's MTU.
    let (sf, vnet) = tcp_super_frame(10_000, 1448);
    let inner_tunnel =
        EncapTemplate::new(&spec(mac(0x33), [10, 0, 0, 1], [10, 0, 0, 2], 5)).unwrap();
    let mut f = vec![0u8; sf.len() + inner_tunnel.overhead()];
    let n = inner_tunnel.push(&sf, &mut f, 5000, 1).unwrap();
    f.truncate(n);
    send(&mut rig, &f, vnet.shifted(inner_tunnel.overhead() as u16));
    let mut carried = Vec::new();
    while carried.len() < 10_000 {
        let (out, meta) = rig.ports.peers[uplink]
            .recv_with(WAIT)
            .expect("an outer packet");
        assert!(out.len() <= 1450 + 14 + 50, "{} bytes", out.len());
        assert_eq!(meta.vnet, VnetHdr::default(), "complete");
        let d = decap(&out, &ports, true, |_, _| false).unwrap();
        let e = decap(d.inner, &ports, true, |_, _| false).expect("the inner tunnel's packet");
        carried.extend_from_slice(&e.inner[54..]);
    }
    assert_eq!(carried, sf[54..], "every byte, in order");
    assert!(rig.ports.peers[uplink].recv_timeout(QUIET).is_none());
    // A plain packet above the tunnel's MTU: dropped, counted at the tunnel port.
    let (f, _) = tcp_super_frame(1420, 1448);
    send(&mut rig, &f, VnetHdr::default());
    assert!(rig.ports.peers[uplink].recv_timeout(QUIET).is_none());
    let vx = rig.ports.stats[(VX - 1) as usize].view();
    assert_eq!(vx.tx_mtu_drops, 1);
    // One, two parts, then the inner tunnel's packets (segments of 1,450 less both
    // headers).
    assert_eq!(vx.tx_packets, 3 + 10_000u64.div_ceil(1450 - 50 - 40));
}

/// A VXLAN packet from the tunnel port's remote end, with its VNI, for a1.
fn from_the_remote() -> Packet {
    Packet::Tunnelled {
        from_remote: true,
        vni: VNI,
        src: 3,
        dst: 1,
    }
}

/// A packet popped in the datapath counts as received by its tunnel port (its
/// datapath in_port is the kind's receive point), as the port's queue counted it.
#[test]
fn a_popped_packet_counts_as_received_by_its_tunnel_port() {
    let rules = vec!["priority=4,in_port=3,actions=output:1".to_string()];
    let rig = rig(&rules);
    let tunnelled = from_the_remote();
    let inner_len = inner(3, 1, false, 53).len() as u64;
    for _ in 0..2 {
        rig.ports.peers[(UPLINK - 1) as usize].send(&tunnelled.frame());
        rig.ports.peers[(A1 - 1) as usize]
            .recv_with(std::time::Duration::from_secs(10))
            .expect("the inner frame");
    }
    let vx = rig.ports.stats[(VX - 1) as usize].view();
    assert_eq!((vx.rx_packets, vx.rx_bytes), (2, 2 * inner_len));
}

/// A controller's packet-out of a tunnel packet to the underlay's LOCAL port is
/// popped in the datapath and its next pass looked up as a received packet's: the
/// inner frame reaches the overlay's workload, counted on the tunnel port.
#[test]
fn a_packet_outs_tunnel_packet_is_popped_and_looked_up_again() {
    let rules = vec!["priority=4,in_port=3,actions=output:1".to_string()];
    let rig = rig(&rules);
    let tunnelled = from_the_remote();
    let frame = tunnelled.frame();
    let mut key = FlowKey::default();
    extract(&frame, 1, None, &mut key).unwrap();
    let underlay = &rig.bridges[0];
    let x = underlay.translate_packet_out(&key.into(), &[vsw_flow::Action::Output(65534)], 0);
    assert!(
        x.actions
            .iter()
            .any(|a| matches!(a, DpAction::TunnelPop(_))),
        "{:?}",
        x.actions
    );
    let punts = rig.dp.punts();
    let ticket = punts
        .inject(vsw_datapath::Injected {
            in_port: UPLINK,
            actions: x.actions,
            headers: x.pushed,
            frame,
        })
        .expect("room in the queue");
    assert!(punts.wait_sent(ticket, std::time::Duration::from_secs(10)));
    let (got, _) = rig.ports.peers[(A1 - 1) as usize]
        .recv_with(std::time::Duration::from_secs(10))
        .expect("the inner frame");
    assert_eq!(got, inner(3, 1, false, 53));
    assert_eq!(rig.ports.stats[(VX - 1) as usize].view().rx_packets, 1);
}
