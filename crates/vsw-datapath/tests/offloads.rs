//! Super-frames and checksums left to the device, on output ports that can and cannot
//! finish them; frames above the MTU.

mod common;

use common::*;
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use vsw_datapath::{PacketMeta, TxOffloads};
use vsw_packet::builder::{self, Ipv4, DST_MAC, SRC_MAC};
use vsw_packet::key::IPPROTO_TCP;
use vsw_packet::vnet::{VNET_F_NEEDS_CSUM, VNET_GSO_TCPV4};
use vsw_packet::{EtherType, VnetHdr};

const PLAIN: TxOffloads = TxOffloads {
    csum: false,
    tso: false,
    merges: false,
    tunnel_tso: false,
    mtu: 1500,
};
const FULL: TxOffloads = TxOffloads {
    csum: true,
    tso: true,
    merges: true,
    tunnel_tso: false,
    mtu: 1500,
};

/// A TCP frame of `len` payload bytes as a kernel with offloads hands it over: the
/// checksum field holds the pseudo-header sum, the rest is left to the device.
fn tcp_frame(len: usize) -> (Vec<u8>, VnetHdr) {
    let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let ip = Ipv4 {
        proto: IPPROTO_TCP,
        ..Ipv4::default()
    };
    let mut f = builder::ethernet(
        DST_MAC,
        SRC_MAC,
        &[],
        EtherType::IPV4,
        &builder::ipv4(&ip, &builder::tcp(40000, 5201, 0x18, &data)),
    );
    let tcp_len = f.len() - 34;
    let mut sum: u32 = f[26..34]
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum::<u32>()
        + u32::from(IPPROTO_TCP)
        + tcp_len as u32;
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[50..52].copy_from_slice(&(sum as u16).to_be_bytes());
    let vnet = VnetHdr {
        flags: VNET_F_NEEDS_CSUM,
        csum_start: 34,
        csum_offset: 16,
        ..VnetHdr::default()
    };
    (f, vnet)
}

fn gso(vnet: VnetHdr, mss: u16) -> VnetHdr {
    VnetHdr {
        gso_type: VNET_GSO_TCPV4,
        gso_size: mss,
        hdr_len: 54,
        ..vnet
    }
}

/// TCP payload of a frame whose checksums etherparse finds right.
fn valid_tcp_payload(f: &[u8]) -> Vec<u8> {
    let p = SlicedPacket::from_ethernet(f).expect("parses");
    let (Some(NetSlice::Ipv4(ip)), Some(TransportSlice::Tcp(tcp))) = (&p.net, &p.transport) else {
        panic!("not TCP/IPv4")
    };
    let h = ip.header();
    assert_eq!(h.to_header().calc_header_checksum(), h.header_checksum());
    assert_eq!(
        tcp.calc_checksum_ipv4(h.source(), h.destination()).unwrap(),
        tcp.checksum(),
        "TCP checksum"
    );
    tcp.payload().to_vec()
}

fn one_rule(sw: &mut Switch) {
    rules(&mut sw.dp, &["in_port=1,actions=output:2"]);
}

#[test]
fn a_port_without_offloads_gets_complete_segments() {
    let mut sw = switch_with_offloads(&[FULL, PLAIN]);
    one_rule(&mut sw);
    let (f, vnet) = tcp_frame(10_000);
    sw.peers[0].send_with(
        &f,
        PacketMeta {
            vnet: gso(vnet, 1448),
            vlan: None,
            tunnel: Default::default(),
        },
    );
    let mut data = Vec::new();
    for _ in 0..7 {
        let (seg, meta) = sw.peers[1].recv_with(WAIT).expect("a segment");
        assert!(seg.len() <= 1514);
        assert_eq!(meta.vnet, VnetHdr::default(), "nothing left to the device");
        data.extend(valid_tcp_payload(&seg));
    }
    assert!(sw.peers[1].recv_timeout(QUIET).is_none());
    assert_eq!(data, (0..10_000).map(|i| i as u8).collect::<Vec<u8>>());
    eventually("7 segments counted", || {
        sw.stats[1].view().tx_gso_segments == 7
    });
}

#[test]
fn a_port_with_offloads_gets_the_super_frame_as_it_came() {
    let mut sw = switch_with_offloads(&[FULL, FULL]);
    one_rule(&mut sw);
    let (f, vnet) = tcp_frame(10_000);
    sw.peers[0].send_with(
        &f,
        PacketMeta {
            vnet: gso(vnet, 1448),
            vlan: None,
            tunnel: Default::default(),
        },
    );
    let (out, meta) = sw.peers[1].recv_with(WAIT).expect("the super-frame");
    assert_eq!(out, f);
    assert_eq!(meta.vnet, gso(vnet, 1448));
    assert_eq!(sw.stats[1].view().tx_gso_segments, 0);
}

#[test]
fn a_smaller_mtu_than_the_senders_segments_means_smaller_segments() {
    let small = TxOffloads { mtu: 1000, ..FULL };
    let mut sw = switch_with_offloads(&[FULL, small]);
    one_rule(&mut sw);
    let (f, vnet) = tcp_frame(3000);
    sw.peers[0].send_with(
        &f,
        PacketMeta {
            vnet: gso(vnet, 1448),
            vlan: None,
            tunnel: Default::default(),
        },
    );
    let mut data = Vec::new();
    for _ in 0..4 {
        let seg = sw.peers[1].recv_timeout(WAIT).expect("a segment");
        assert!(
            seg.len() - 14 <= 1000,
            "IP packet of {} bytes",
            seg.len() - 14
        );
        data.extend(valid_tcp_payload(&seg));
    }
    assert_eq!(data.len(), 3000);
}

#[test]
fn checksums_are_finished_where_the_port_cannot() {
    let mut sw = switch_with_offloads(&[FULL, PLAIN, FULL]);
    rules(&mut sw.dp, &["in_port=1,actions=output:2,output:3"]);
    let (f, vnet) = tcp_frame(500);
    sw.peers[0].send_with(
        &f,
        PacketMeta {
            vnet,
            ..PacketMeta::default()
        },
    );
    let (done, meta) = sw.peers[1].recv_with(WAIT).expect("port 2");
    valid_tcp_payload(&done);
    assert_eq!(meta.vnet.flags & VNET_F_NEEDS_CSUM, 0);
    let (left, meta) = sw.peers[2].recv_with(WAIT).expect("port 3");
    assert_eq!(left, f, "a port that finishes checksums gets it unfinished");
    assert_eq!(meta.vnet, vnet);
    eventually("one software checksum", || {
        sw.stats[1].view().tx_csum_sw == 1
    });
    assert_eq!(sw.stats[2].view().tx_csum_sw, 0);
}

#[test]
fn a_frame_above_the_mtu_is_dropped_and_counted_never_cut() {
    let small = TxOffloads { mtu: 576, ..FULL };
    let mut sw = switch_with_offloads(&[FULL, small]);
    one_rule(&mut sw);
    let big = builder::udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 1000);
    let fits = builder::udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 500);
    sw.peers[0].send(&big);
    sw.peers[0].send(&fits);
    assert_eq!(sw.peers[1].recv_timeout(WAIT), Some(fits));
    assert!(sw.peers[1].recv_timeout(QUIET).is_none());
    eventually("one MTU drop", || sw.stats[1].view().tx_mtu_drops == 1);
    assert_eq!(sw.dp.pmd_stats()[0].lost, 1);
}

/// A sender's 1,448-byte segments of a 10,000-byte transfer, with full checksums.
fn segments_of_a_transfer() -> Vec<Vec<u8>> {
    let (big, _) = tcp_frame(10_000);
    let mut segs = Vec::new();
    let mut buf = vec![0u8; 70_000];
    vsw_packet::gso::segment_tcp(&big, 1448, &mut buf, |s| segs.push(s.to_vec())).unwrap();
    segs
}

/// `frames` waiting in port 1 before the datapath ever polls it (so they make one
/// batch), forwarded to port 2, which takes super-frames: its peer and counters, and
/// the datapath (which must live while the frames are read).
fn one_batch_to_a_tso_port(
    frames: &[Vec<u8>],
) -> (
    vsw_datapath::memory::MemoryPeer,
    std::sync::Arc<vsw_datapath::PortStats>,
    vsw_datapath::Datapath,
) {
    one_batch_to(frames, &vec![0; frames.len()], FULL)
}

/// [`one_batch_to_a_tso_port`], each frame received with its tunnel ID.
fn one_batch_with_tunnel_ids(
    frames: &[Vec<u8>],
    tun_ids: &[u64],
) -> (
    vsw_datapath::memory::MemoryPeer,
    std::sync::Arc<vsw_datapath::PortStats>,
    vsw_datapath::Datapath,
) {
    one_batch_to(frames, tun_ids, FULL)
}

/// `frames` in one batch (with their tunnel IDs) to port 2, whose device finishes
/// what `out` says.
fn one_batch_to(
    frames: &[Vec<u8>],
    tun_ids: &[u64],
    out: TxOffloads,
) -> (
    vsw_datapath::memory::MemoryPeer,
    std::sync::Arc<vsw_datapath::PortStats>,
    vsw_datapath::Datapath,
) {
    use std::sync::Arc;
    use vsw_datapath::memory::memory_port_with;
    use vsw_datapath::{Datapath, PmdConfig, PortHandle, PortStats};
    let (q1, peer1) = memory_port_with(1, 4096, FULL);
    let (q2, peer2) = memory_port_with(1, 4096, out);
    for (f, &tun_id) in frames.iter().zip(tun_ids) {
        peer1.send_with(
            f,
            PacketMeta {
                tunnel: vsw_datapath::TunnelKey {
                    id: tun_id,
                    ..Default::default()
                },
                ..PacketMeta::default()
            },
        );
    }
    let mut dp = Datapath::start(PmdConfig {
        cores: vec![0],
        pin: false,
    })
    .unwrap();
    let mut c = vsw_flow::Pipeline::new();
    c.insert(
        vsw_flow::parse_flow("in_port=1,actions=output:2", &|_: &str| None).unwrap(),
        0,
    );
    let ofproto = vsw_ofproto::Ofproto::new(c);
    ofproto.set_ports(vec![1, 2]);
    dp.set_upcall(ofproto).unwrap();
    let out_stats = Arc::new(PortStats::default());
    dp.add_port(PortHandle::new(2, "p2", q2, out_stats.clone()))
        .unwrap();
    dp.add_port(PortHandle::new(1, "p1", q1, Arc::new(PortStats::default())))
        .unwrap();
    (peer2, out_stats, dp)
}

#[test]
fn segments_of_one_flow_in_one_batch_leave_as_one_super_frame() {
    // What a sender without segmentation offload sends: 1448-byte segments.
    let segs = segments_of_a_transfer();
    let (peer2, out_stats, _dp) = one_batch_to_a_tso_port(&segs);
    let mut buf = vec![0u8; 70_000];
    let (merged, meta) = peer2.recv_with(WAIT).expect("the merged frame");
    assert!(
        peer2.recv_timeout(QUIET).is_none(),
        "one frame for all seven"
    );
    assert_eq!(meta.vnet.gso_type, VNET_GSO_TCPV4);
    assert_eq!(meta.vnet.gso_size, 1448);
    // Cut as the receiving kernel would, it gives back exactly what was sent.
    let mut again = Vec::new();
    vsw_packet::gso::segment_tcp(&merged, 1448, &mut buf, |s| again.push(s.to_vec())).unwrap();
    assert_eq!(again, segs);
    eventually("the merge counted", || {
        out_stats.view().tx_gro_segments == 7
    });
    assert_eq!(out_stats.view().tx_packets, 1);
}

/// A port whose frames leave for another switch (a tunnel port) takes super-frames
/// but gets a sender's segments as they were sent: never merged.
#[test]
fn segments_are_not_merged_for_a_port_that_does_not_merge() {
    let segs = segments_of_a_transfer();
    let tunnel_like = TxOffloads {
        merges: false,
        ..FULL
    };
    let (peer2, out_stats, _dp) = one_batch_to(&segs, &vec![0; segs.len()], tunnel_like);
    let got: Vec<Vec<u8>> = (0..segs.len())
        .map(|_| peer2.recv_with(WAIT).expect("a segment").0)
        .collect();
    assert_eq!(got, segs);
    assert!(peer2.recv_timeout(QUIET).is_none());
    eventually("all sent", || out_stats.view().tx_packets == 7);
    assert_eq!(out_stats.view().tx_gro_segments, 0);
}

#[test]
fn a_damaged_segment_is_never_delivered_with_a_valid_checksum() {
    let mut segs = segments_of_a_transfer();
    // One segment was damaged on the wire: a payload bit flipped, checksums as sent.
    segs[3][54 + 100] ^= 0x08;
    let marker = segs[3][54 + 90..54 + 110].to_vec();
    let (peer2, _, _dp) = one_batch_to_a_tso_port(&segs);
    let mut buf = vec![0u8; 70_000];
    let mut delivered = Vec::new();
    while let Some((f, meta)) = peer2.recv_with(QUIET) {
        if meta.vnet.is_gso() {
            // The receiver cuts and checksums it: everything in it becomes valid.
            vsw_packet::gso::segment_tcp(&f, 1448, &mut buf, |s| {
                delivered.push((s.to_vec(), true))
            })
            .unwrap();
        } else {
            delivered.push((f, false));
        }
    }
    let payload: usize = delivered.iter().map(|(f, _)| f.len() - 54).sum();
    assert_eq!(payload, 10_000, "every byte arrives once");
    let carrying: Vec<&(Vec<u8>, bool)> = delivered
        .iter()
        .filter(|(f, _)| f.windows(marker.len()).any(|w| w == marker))
        .collect();
    assert_eq!(carrying.len(), 1);
    let (f, merged) = carrying[0];
    assert!(!merged, "the damaged segment was merged into a super-frame");
    assert_eq!(f, &segs[3], "it leaves as it came");
}

#[test]
fn a_segment_size_of_one_is_refused_not_cut_into_thousands() {
    // Ports 2 and 3: one that cannot take super-frames, one that can.
    let mut sw = switch_with_offloads(&[FULL, PLAIN, FULL]);
    rules(&mut sw.dp, &["in_port=1,actions=output:2,output:3"]);
    let (f, vnet) = tcp_frame(60_000);
    let started = std::time::Instant::now();
    sw.peers[0].send_with(
        &f,
        PacketMeta {
            vnet: gso(vnet, 1),
            vlan: None,
            tunnel: Default::default(),
        },
    );
    eventually("both refusals counted", || {
        sw.stats[1].view().tx_gso_refused == 1 && sw.stats[2].view().tx_gso_refused == 1
    });
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    assert!(sw.peers[1].recv_timeout(QUIET).is_none(), "nothing cut");
    assert!(
        sw.peers[2].recv_timeout(QUIET).is_none(),
        "nothing passed on"
    );
    assert_eq!(sw.stats[1].view().tx_gso_segments, 0);
    // An ordinary segment size still goes through.
    let (f, vnet) = tcp_frame(3000);
    sw.peers[0].send_with(
        &f,
        PacketMeta {
            vnet: gso(vnet, 1448),
            vlan: None,
            tunnel: Default::default(),
        },
    );
    assert!(sw.peers[2].recv_timeout(WAIT).is_some());
}

/// `tcp_frame(len)` as Linux's vxlan device hands it to a veth with offloads on: one
/// VXLAN/UDP/IPv4 header in front, the virtio-net header moved behind it.
fn vxlan_super_frame(len: usize) -> (Vec<u8>, VnetHdr) {
    use vsw_packet::tunnel::{EncapSpec, EncapTemplate, TunnelKind};
    let (inner, vnet) = tcp_frame(len);
    let t = EncapTemplate::new(&EncapSpec {
        kind: TunnelKind::Vxlan,
        eth_src: vsw_packet::MacAddr([2, 0, 0, 0, 0, 1]),
        eth_dst: vsw_packet::MacAddr([2, 0, 0, 0, 0, 2]),
        src: "198.18.5.1".parse().unwrap(),
        dst: "198.18.5.2".parse().unwrap(),
        tos: 0,
        ttl: 64,
        df: false,
        udp_dst: 4789,
        udp_csum: false,
        vni: 42,
        geneve_options: Vec::new(),
        gpe: None,
    })
    .unwrap();
    let mut out = vec![0u8; len + 200];
    let n = t.push(&inner, &mut out, 40000, 1).unwrap();
    out.truncate(n);
    (out, gso(vnet, 1398).shifted(t.overhead() as u16))
}

#[test]
fn a_tunnelled_super_frame_is_cut_into_whole_vxlan_packets_for_a_plain_port() {
    let mut sw = switch_with_offloads(&[FULL, PLAIN]);
    one_rule(&mut sw);
    let (f, vnet) = vxlan_super_frame(10_000);
    sw.peers[0].send_with(
        &f,
        PacketMeta {
            vnet,
            ..PacketMeta::default()
        },
    );
    let ports = vsw_packet::tunnel::TunnelPorts {
        vxlan: Some(4789),
        geneve: None,
    };
    let mut data = Vec::new();
    let mut n = 0;
    while data.len() < 10_000 {
        let (seg, meta) = sw.peers[1].recv_with(WAIT).expect("a VXLAN packet");
        assert!(seg.len() <= 1514, "{} bytes", seg.len());
        assert_eq!(meta.vnet, VnetHdr::default(), "nothing left to the device");
        let d = vsw_packet::tunnel::decap(&seg, &ports, false, |_, _| false).expect("decaps");
        assert_eq!(d.meta.id, 42);
        data.extend(valid_tcp_payload(d.inner));
        n += 1;
    }
    assert!(sw.peers[1].recv_timeout(QUIET).is_none());
    assert_eq!(data, (0..10_000).map(|i| i as u8).collect::<Vec<u8>>());
    eventually("the segments counted", || {
        sw.stats[1].view().tx_gso_segments == n
    });
}

#[test]
fn a_port_that_takes_tunnelled_super_frames_gets_it_whole() {
    let tunnel = TxOffloads {
        tunnel_tso: true,
        ..FULL
    };
    let mut sw = switch_with_offloads(&[FULL, tunnel]);
    one_rule(&mut sw);
    let (f, vnet) = vxlan_super_frame(10_000);
    sw.peers[0].send_with(
        &f,
        PacketMeta {
            vnet,
            ..PacketMeta::default()
        },
    );
    let (out, meta) = sw.peers[1].recv_with(WAIT).expect("the super-frame");
    assert_eq!(out, f);
    assert_eq!(meta.vnet, vnet);
}

/// A queue that takes tunnel super-frames whole once it was asked to learn to (as
/// an underlay port's tunnel tap is made): until then, `offloads` says it does not.
struct Learning {
    inner: Box<dyn vsw_datapath::TxQueue>,
    learned: Arc<AtomicBool>,
}

impl vsw_datapath::TxQueue for Learning {
    fn offloads(&self) -> TxOffloads {
        TxOffloads {
            tunnel_tso: self.learned.load(Ordering::Relaxed),
            ..FULL
        }
    }
    fn learn_tunnel_tso(&mut self) {
        self.learned.store(true, Ordering::Relaxed);
    }
    fn stage(&mut self, data: &[u8], meta: &PacketMeta) -> Result<(), vsw_datapath::StageError> {
        self.inner.stage(data, meta)
    }
    fn pending(&self) -> usize {
        self.inner.pending()
    }
    fn flush(&mut self) -> usize {
        self.inner.flush()
    }
}

#[test]
fn a_port_that_learns_to_take_tunnelled_super_frames_gets_them_whole_after_the_first_cut() {
    let learned = Arc::new(AtomicBool::new(false));
    let (mut q, peer) = vsw_datapath::memory::memory_port_with(1, 4096, FULL);
    q.tx = Box::new(Learning {
        inner: q.tx,
        learned: learned.clone(),
    });
    q.tx_factory = None;
    let mut sw = switch_of(vec![
        vsw_datapath::memory::memory_port_with(1, 4096, FULL),
        (q, peer),
    ]);
    one_rule(&mut sw);
    let (f, vnet) = vxlan_super_frame(10_000);
    let meta = PacketMeta {
        vnet,
        ..PacketMeta::default()
    };
    sw.peers[0].send_with(&f, meta);
    let (first, m) = sw.peers[1].recv_with(WAIT).expect("a cut packet");
    assert!(first.len() <= 1514, "cut: {} bytes", first.len());
    assert_eq!(m.vnet, VnetHdr::default());
    assert!(learned.load(Ordering::Relaxed), "asked to learn");
    while sw.peers[1].recv_timeout(QUIET).is_some() {}
    // The offloads are read again after that batch: the next one goes whole.
    sw.peers[0].send_with(&f, meta);
    let (out, m) = sw.peers[1].recv_with(WAIT).expect("the super-frame");
    assert_eq!(out, f);
    assert_eq!(m.vnet, vnet);
}

#[test]
fn segments_merge_only_with_segments_of_their_tunnel_id_and_keep_it() {
    let segs = segments_of_a_transfer();
    assert_eq!(segs.len(), 7);
    let ids = [42, 42, 42, 42, 43, 43, 43];
    let (peer2, _, _dp) = one_batch_with_tunnel_ids(&segs, &ids);
    let (first, m1) = peer2.recv_with(WAIT).expect("the first merge");
    let (second, m2) = peer2.recv_with(WAIT).expect("the second merge");
    assert!(peer2.recv_timeout(QUIET).is_none());
    assert_eq!((m1.tunnel.id, m2.tunnel.id), (42, 43));
    assert_eq!(first.len(), 54 + 4 * 1448, "four segments of ID 42");
    assert_eq!(second.len(), 54 + 10_000 - 4 * 1448, "the rest, of ID 43");
}
