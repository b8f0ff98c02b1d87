use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::*;
use crate::builder;
use crate::checksum;
use crate::mac::MacAddr;
use crate::wire::{geneve, ipv4, udp, vxlan};

const PORTS: TunnelPorts = TunnelPorts {
    vxlan: Some(4789),
    geneve: Some(6081),
};

fn v4(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(198, 18, 1, last))
}

fn v6(last: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, last))
}

fn spec(kind: TunnelKind, ipv6: bool, csum: bool) -> EncapSpec {
    let mut options = Vec::new();
    if kind == TunnelKind::Geneve {
        let mut o = [0u8; 8];
        geneve::emit_option(&mut o, 0xffff, 0x01, &[0xde, 0xad, 0xbe, 0xef]);
        options = o.to_vec();
    }
    EncapSpec {
        kind,
        eth_src: MacAddr([2, 0, 0, 0, 0, 1]),
        eth_dst: MacAddr([2, 0, 0, 0, 0, 2]),
        src: if ipv6 { v6(1) } else { v4(1) },
        dst: if ipv6 { v6(2) } else { v4(2) },
        tos: 0x10,
        ttl: 63,
        df: true,
        udp_dst: kind.default_port(),
        udp_csum: csum,
        vni: 0x00ab_cdef,
        geneve_options: options,
        gpe: None,
    }
}

fn inner() -> Vec<u8> {
    builder::udp4_frame([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80, 100)
}

fn encap(s: &EncapSpec, inner: &[u8]) -> Vec<u8> {
    let t = EncapTemplate::new(s).unwrap();
    let mut out = vec![0u8; 2048];
    let n = t
        .push(inner, &mut out, udp_source_port(0x1234_5678), 7)
        .unwrap();
    out.truncate(n);
    out
}

#[test]
fn every_kind_and_family_round_trips_with_its_metadata() {
    for kind in [TunnelKind::Vxlan, TunnelKind::Geneve] {
        for ipv6 in [false, true] {
            for csum in [false, true] {
                let s = spec(kind, ipv6, csum);
                let f = encap(&s, &inner());
                let d = decap(&f, &PORTS, false, |_, _| false).unwrap();
                let what = format!("{kind:?} ipv6={ipv6} csum={csum}");
                assert_eq!(d.inner, &inner()[..], "{what}");
                assert_eq!(d.meta.kind, kind);
                assert_eq!(d.meta.id, 0x00ab_cdef);
                assert_eq!((d.meta.src, d.meta.dst), (s.src, s.dst));
                assert_eq!((d.meta.tos, d.meta.ttl), (0x10, 63));
                assert_eq!(d.meta.csum, csum || ipv6, "{what}: always over IPv6");
                assert_eq!(d.meta.df, !ipv6);
                assert_eq!(d.options, &s.geneve_options[..]);
                if !ipv6 {
                    let ip = ipv4::Packet::new_checked(&f[14..]).unwrap();
                    assert!(ip.checksum_right(), "{what}");
                    assert_eq!(ip.total_len(), f.len() - 14);
                    assert_eq!(ip.ident(), 0, "DF: no identification");
                }
            }
        }
    }
}

#[test]
fn the_udp_checksum_is_the_rfc_768_one() {
    let f = encap(&spec(TunnelKind::Vxlan, false, true), &inner());
    let datagram = &f[34..];
    // Pseudo-header written out: source, destination, zero, protocol, UDP length.
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&f[26..34]);
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&(datagram.len() as u16).to_be_bytes());
    let mut zeroed = datagram.to_vec();
    zeroed[6..8].fill(0);
    pseudo.extend_from_slice(&zeroed);
    let want = checksum::checksum(&pseudo);
    assert_eq!(udp::Packet::new_checked(datagram).unwrap().checksum(), want);
}

#[test]
fn lengths_overhead_and_inner_mtu() {
    let t = EncapTemplate::new(&spec(TunnelKind::Vxlan, false, false)).unwrap();
    assert_eq!(t.overhead(), 14 + 20 + 8 + 8);
    // Linux's vxlan device on a 1,500-byte underlay: MTU 1,450.
    assert_eq!(t.inner_frame_max(1500) - 14, 1450);
    let g6 = EncapTemplate::new(&spec(TunnelKind::Geneve, true, false)).unwrap();
    assert_eq!(g6.overhead(), 14 + 40 + 8 + 8 + 8);
    let f = encap(&spec(TunnelKind::Geneve, true, false), &inner());
    assert_eq!(f.len(), g6.overhead() + inner().len());
    let mut small = [0u8; 60];
    assert_eq!(t.push(&inner(), &mut small, 1, 1), None, "no room");
    // Without DF the identification is the sender's.
    let mut s = spec(TunnelKind::Vxlan, false, false);
    s.df = false;
    let f = encap(&s, &inner());
    let ip = ipv4::Packet::new_checked(&f[14..]).unwrap();
    assert_eq!((ip.ident(), ip.dont_fragment()), (7, false));
    assert!(ip.checksum_right());
}

#[test]
fn source_ports_spread_over_linux_range() {
    let ports: std::collections::HashSet<u16> = (0..1000u32)
        .map(|i| udp_source_port(i.wrapping_mul(0x9e37_79b9)))
        .collect();
    assert!(ports.len() > 950, "{} distinct of 1000", ports.len());
    assert!(ports.iter().all(|p| (32768..61000).contains(p)));
    assert_eq!(udp_source_port(0), 32768);
    assert!(udp_source_port(u32::MAX) < 61000);
}

#[test]
fn bad_specs_are_refused() {
    let mut s = spec(TunnelKind::Vxlan, false, false);
    s.dst = v6(2);
    assert_eq!(EncapTemplate::new(&s), Err(EncapError::MixedFamilies));
    let mut s = spec(TunnelKind::Vxlan, false, false);
    s.geneve_options = vec![0; 8];
    assert_eq!(EncapTemplate::new(&s), Err(EncapError::VxlanOptions));
    let mut s = spec(TunnelKind::Geneve, false, false);
    s.geneve_options = vec![0; 6];
    assert_eq!(EncapTemplate::new(&s), Err(EncapError::BadGeneveOptions));
    s.geneve_options = vec![0, 0, 0, 5, 0, 0, 0, 0];
    assert_eq!(EncapTemplate::new(&s), Err(EncapError::BadGeneveOptions));
}

#[test]
fn each_malformed_input_is_refused_with_its_reason() {
    let vx = encap(&spec(TunnelKind::Vxlan, false, true), &inner());
    let gen = encap(&spec(TunnelKind::Geneve, false, false), &inner());
    let refused = |f: &[u8]| decap(f, &PORTS, false, |_, _| false).unwrap_err();
    // Not for a tunnel: other ports, other protocols, other frames.
    assert_eq!(
        decap(&vx, &TunnelPorts::default(), false, |_, _| true),
        Err(DecapError::NotTunnel)
    );
    assert_eq!(refused(&inner()), DecapError::NotTunnel);
    assert_eq!(refused(&vx[..20]), DecapError::NotTunnel);
    // The IPv4 header's checksum.
    let mut f = vx.clone();
    f[14 + 8] -= 1; // TTL
    assert_eq!(refused(&f), DecapError::BadIpChecksum);
    // A fragment (MF set, checksum fixed).
    let mut f = vx.clone();
    f[14 + 6] |= 0x20;
    fix_ip_checksum(&mut f);
    assert_eq!(refused(&f), DecapError::Fragment);
    // The IP total length past the frame.
    let mut f = vx.clone();
    f.truncate(f.len() - 1);
    assert_eq!(refused(&f), DecapError::Truncated("IPv4"));
    // A UDP length past the datagram.
    let mut f = vx.clone();
    let len = u16::from_be_bytes([f[38], f[39]]) + 1;
    f[38..40].copy_from_slice(&len.to_be_bytes());
    assert_eq!(refused(&f), DecapError::Truncated("UDP"));
    // A payload byte changed under the UDP checksum.
    let mut f = vx.clone();
    let last = f.len() - 1;
    f[last] ^= 1;
    assert_eq!(refused(&f), DecapError::BadUdpChecksum);
    // VXLAN without its I flag (no checksum to upset).
    let mut f = encap(&spec(TunnelKind::Vxlan, false, false), &inner());
    f[42] = 0;
    assert_eq!(refused(&f), DecapError::VxlanNoVni);
    // Geneve: not Ethernet; a critical option it does not know, and one it does.
    let mut f = gen.clone();
    f[44] = 0x08;
    assert_eq!(refused(&f), DecapError::GeneveNotEthernet);
    let mut s = spec(TunnelKind::Geneve, false, false);
    s.geneve_options[2] |= geneve::OPT_TYPE_CRITICAL;
    let f = encap(&s, &inner());
    assert_eq!(refused(&f), DecapError::UnknownCriticalOption);
    assert!(decap(&f, &PORTS, false, |class, kind| class == 0xffff
        && kind == 0x81)
    .is_ok());
    // An option running past the options.
    let mut f = gen.clone();
    f[42 + 8 + 3] = 9;
    assert_eq!(refused(&f), DecapError::Truncated("Geneve option"));
    // The header's options past the datagram.
    let mut f = gen.clone();
    f[42] = 40;
    assert_eq!(refused(&f), DecapError::Truncated("Geneve"));
    // An inner frame too short for Ethernet.
    let f = encap(&spec(TunnelKind::Vxlan, false, false), &[0u8; 10]);
    assert_eq!(refused(&f), DecapError::InnerTooShort);
    assert_eq!(vxlan::HEADER_LEN, 8);
}

/// VXLAN-GPE arrives on VXLAN's port: Ethernet as ever, IPv4, IPv6 and NSH as
/// packets of their Ethernet type without an Ethernet header; OAM and any other
/// next protocol are refused with their reason; a GPE template refuses Geneve.
#[test]
fn gpe_packets_say_what_they_carry() {
    let gpe = |np: u8| EncapSpec {
        gpe: Some(np),
        ..spec(TunnelKind::Vxlan, false, false)
    };
    let ip = &inner()[14..];
    for (np, t) in [
        (vxlan::NP_IPV4, 0x0800),
        (vxlan::NP_IPV6, 0x86dd),
        (vxlan::NP_NSH, 0x894f),
    ] {
        let f = encap(&gpe(np), ip);
        let d = decap(&f, &PORTS, false, |_, _| false).unwrap();
        assert_eq!((d.inner, d.l3, d.meta.id), (ip, Some(t), 0x00ab_cdef));
        assert!(EncapTemplate::new(&gpe(np)).unwrap().strips_ethernet());
    }
    let f = encap(&gpe(vxlan::NP_ETHERNET), &inner());
    let d = decap(&f, &PORTS, false, |_, _| false).unwrap();
    assert_eq!((d.inner, d.l3), (&inner()[..], None));
    assert!(!EncapTemplate::new(&gpe(vxlan::NP_ETHERNET))
        .unwrap()
        .strips_ethernet());
    let refused = |f: &[u8]| decap(f, &PORTS, false, |_, _| false).unwrap_err();
    let mut f = encap(&gpe(vxlan::NP_IPV4), ip);
    f[42] |= 0x01;
    assert_eq!(refused(&f), DecapError::GpeNotCarried, "OAM");
    let f = encap(&gpe(5), ip);
    assert_eq!(refused(&f), DecapError::GpeNotCarried, "MPLS");
    let f = encap(&gpe(vxlan::NP_IPV4), &[]);
    assert_eq!(refused(&f), DecapError::InnerTooShort);
    let s = EncapSpec {
        gpe: Some(vxlan::NP_IPV4),
        ..spec(TunnelKind::Geneve, false, false)
    };
    assert_eq!(EncapTemplate::new(&s), Err(EncapError::GpeNotVxlan));
}

fn fix_ip_checksum(f: &mut [u8]) {
    f[24..26].fill(0);
    let c = checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

proptest! {
    /// Bytes from anywhere never panic the decapsulation.
    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = decap(&bytes, &PORTS, false, |_, _| false);
    }

    /// A real tunnel packet with bytes changed, or cut anywhere, is decapsulated or
    /// refused, and what comes out lies within the frame.
    #[test]
    fn mutated_tunnel_packets_are_taken_or_refused(
        geneve in any::<bool>(),
        ipv6 in any::<bool>(),
        gpe in proptest::option::of(0u8..6),
        flips in proptest::collection::vec((0usize..200, any::<u8>()), 0..4),
        cut in 0usize..220,
    ) {
        let kind = if geneve { TunnelKind::Geneve } else { TunnelKind::Vxlan };
        // VXLAN-GPE too, of any next protocol (IP without its Ethernet header).
        let (s, payload) = match gpe {
            Some(np) if !geneve => (EncapSpec { gpe: Some(np), ..spec(kind, ipv6, true) }, &inner()[14..]),
            _ => (spec(kind, ipv6, true), &inner()[..]),
        };
        let mut f = encap(&s, payload);
        for (at, b) in flips {
            if let Some(x) = f.get_mut(at) {
                *x ^= b;
            }
        }
        f.truncate(cut.min(f.len()));
        if let Ok(d) = decap(&f, &PORTS, false, |_, _| false) {
            let range = f.as_ptr_range();
            prop_assert!(range.contains(&d.inner.as_ptr()));
            let least = if d.l3.is_some() { 1 } else { 14 };
            prop_assert!(d.inner.len() >= least);
            prop_assert!(d.l3.is_none() || !geneve);
        }
    }

    /// A tunnelled super-frame with bytes changed, cut anywhere, under any
    /// virtio-net header, is cut into frames no larger than its buffer, or refused.
    #[test]
    fn mutated_tunnelled_super_frames_are_cut_or_refused(
        geneve in any::<bool>(),
        ipv6 in any::<bool>(),
        flips in proptest::collection::vec((0usize..200, any::<u8>()), 0..4),
        cut in 0usize..12_000,
        vnet_change in proptest::option::of((any::<u16>(), any::<u16>(), any::<u16>())),
    ) {
        let kind = if geneve { TunnelKind::Geneve } else { TunnelKind::Vxlan };
        let (mut f, mut vnet, _) = tunnelled_super_frame(&spec(kind, ipv6, true));
        for (at, b) in flips {
            if let Some(x) = f.get_mut(at) {
                *x ^= b;
            }
        }
        f.truncate(cut.min(f.len()));
        if let Some((start, offset, size)) = vnet_change {
            vnet.csum_start = start;
            vnet.csum_offset = offset;
            vnet.gso_size = size;
        }
        if let Some(t) = udp_tunnel_super_frame(&f, &vnet) {
            let mut buf = vec![0u8; 1600];
            if let Ok(mss) = tunnel_segment_size(&f, &t, &vnet, 1500) {
                let _ = segment_udp_tunnel(&f, &t, mss, &mut buf, |seg| {
                    assert!(seg.len() <= 1514);
                });
            }
        }
    }
}

/// A frame Linux's vxlan device sent (kernel 6.x here: `ip link add vx0 type vxlan id
/// 42 remote 198.18.5.1 local 198.18.5.2 dstport 4789`, an MLD report inside),
/// captured on the underlay veth: its UDP checksum left for the receiver to finish
/// (only the pseudo-header's sum is there), as veths pass it on.
const LINUX_VXLAN: &str = "1a1378d1d563cacd9b74b31208004500007ee45d00004011ffe9c6120502c61205019ce212b5006a96a30800000000002a00333300000016c6c1b0d5fde386dd600000000024000100000000000000000000000000000000ff0200000000000000000000000000163a000502000001008f0070d10000000104000000ff0200000000000000000001ffd5fde3";

/// A captured tunnel frame built again by vsw from what its decapsulation read (its
/// MACs, addresses, TOS, TTL, DF, VNI, options), with the sender's UDP source port
/// and IPv4 identification; no UDP checksum.
fn rebuilt(f: &[u8], d: &Decapped<'_>, udp_src: u16, ip_id: u16) -> Vec<u8> {
    let t = EncapTemplate::new(&EncapSpec {
        kind: d.meta.kind,
        eth_src: MacAddr(f[6..12].try_into().unwrap()),
        eth_dst: MacAddr(f[0..6].try_into().unwrap()),
        src: d.meta.src,
        dst: d.meta.dst,
        tos: d.meta.tos,
        ttl: d.meta.ttl,
        df: d.meta.df,
        udp_dst: d.meta.kind.default_port(),
        udp_csum: false,
        vni: d.meta.id,
        geneve_options: d.options.to_vec(),
        gpe: None,
    })
    .unwrap();
    let mut out = vec![0u8; 256];
    let n = t.push(d.inner, &mut out, udp_src, ip_id).unwrap();
    out.truncate(n);
    out
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn a_frame_from_linux_vxlan_decapsulates_and_vsw_builds_the_same_headers() {
    let f = unhex(LINUX_VXLAN);
    // Its checksum is unfinished: taken when the device vouches for it (NEEDS_CSUM),
    // refused if it were checked here.
    assert_eq!(
        decap(&f, &PORTS, false, |_, _| false),
        Err(DecapError::BadUdpChecksum)
    );
    let d = decap(&f, &PORTS, true, |_, _| false).unwrap();
    assert_eq!(d.meta.id, 42);
    assert_eq!(d.meta.src, IpAddr::V4(Ipv4Addr::new(198, 18, 5, 2)));
    assert_eq!(d.meta.dst, IpAddr::V4(Ipv4Addr::new(198, 18, 5, 1)));
    assert_eq!((d.meta.ttl, d.meta.df, d.meta.csum), (64, false, true));
    assert_eq!(d.inner, &f[50..]);
    // The same inner frame through vsw's template, with the kernel's choices (no DF,
    // its identification and source port): the same bytes, but the checksum.
    let (mut ours, mut theirs) = (rebuilt(&f, &d, 0x9ce2, 0xe45d), f.clone());
    ours[40..42].fill(0);
    theirs[40..42].fill(0);
    assert_eq!(ours, theirs);
}

/// A frame Open vSwitch 3.1 (netdev datapath, native tunneling) sent out of a Geneve
/// port (`options:remote_ip=198.18.6.2 options:key=42`, a flow setting
/// `tun_metadata0` = 0x11223344 mapped to option class 0xffff type 1), captured on
/// the underlay veth.
const OVS_GENEVE: &str = "0200c61206026e9335639a46080045000082000040004011a243c6120601c61206029ecc17c1006e00000200655800002a00ffff0101112233443333fff1e94bf21336f1e94b86dd6000000000203aff00000000000000000000000000000000ff0200000000000000000001fff1e94b87000eac00000000fe80000000000000f01336fffef1e94b0e0118db6f49ddbf";

#[test]
fn a_geneve_frame_from_open_vswitch_round_trips_byte_for_byte() {
    let f = unhex(OVS_GENEVE);
    let d = decap(&f, &PORTS, false, |_, _| false).unwrap();
    assert_eq!(d.meta.kind, TunnelKind::Geneve);
    assert_eq!(d.meta.id, 42);
    assert_eq!((d.meta.df, d.meta.csum, d.meta.oam), (true, false, false));
    let opts: Vec<_> = geneve::options(d.options)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(opts.len(), 1);
    assert_eq!(
        (opts[0].class, opts[0].kind, opts[0].data),
        (0xffff, 1, &[0x11, 0x22, 0x33, 0x44][..])
    );
    // Built again by vsw with the same choices: the same bytes, all of them.
    assert_eq!(rebuilt(&f, &d, 0x9ecc, 0), f);
}

#[test]
fn a_flow_hashes_alike_and_flows_apart() {
    let a = builder::udp4_frame([10, 0, 0, 1], [10, 0, 0, 2], 1000, 80, 100);
    let mut a2 = a.clone();
    a2[18..20].copy_from_slice(&[0x12, 0x34]); // another IP identification
    assert_eq!(flow_hash(&a), flow_hash(&a2), "one flow, one hash");
    let b = builder::udp4_frame([10, 0, 0, 1], [10, 0, 0, 2], 1001, 80, 100);
    let c = builder::udp4_frame([10, 0, 0, 3], [10, 0, 0, 2], 1000, 80, 100);
    assert_ne!(flow_hash(&a), flow_hash(&b), "ports count");
    assert_ne!(flow_hash(&a), flow_hash(&c), "addresses count");
    // Anything at all hashes without panicking.
    assert_eq!(flow_hash(&[]), flow_hash(&[]));
    let _ = flow_hash(&[0u8; 13]);
}

/// A 10,000-byte TCP super-frame inside `spec`'s outer headers, with the virtio-net
/// header Linux gives it: segments of 1,398 bytes, the inner TCP checksum left.
fn tunnelled_super_frame(s: &EncapSpec) -> (Vec<u8>, crate::vnet::VnetHdr, Vec<u8>) {
    let data: Vec<u8> = (0..10_000).map(|i| (i * 7 + 3) as u8).collect();
    let (frame, vnet) = builder::tunnelled_tcp_super_frame(s, &data, 1398);
    (frame, vnet, data)
}

#[test]
fn a_tunnelled_super_frame_is_cut_into_complete_outer_frames() {
    for kind in [TunnelKind::Vxlan, TunnelKind::Geneve] {
        for ipv6 in [false, true] {
            for csum in [false, true] {
                let what = format!("{kind:?} ipv6={ipv6} csum={csum}");
                let s = spec(kind, ipv6, csum);
                let (frame, vnet, data) = tunnelled_super_frame(&s);
                let t = udp_tunnel_super_frame(&frame, &vnet).expect(&what);
                let overhead = EncapTemplate::new(&s).unwrap().overhead();
                assert_eq!(t.inner, overhead, "{what}");
                let mss = tunnel_segment_size(&frame, &t, &vnet, 1500).unwrap();
                let by_mtu = 1500 - (overhead - 14) - 14 - 40;
                assert_eq!(mss, by_mtu.min(1398), "{what}: the sender or the MTU");
                let mut buf = vec![0u8; 2048];
                let mut payload = Vec::new();
                let mut n = 0;
                segment_udp_tunnel(&frame, &t, mss, &mut buf, |seg| {
                    n += 1;
                    assert!(seg.len() - 14 <= 1500, "{what}");
                    // Every outer check decap makes holds, nothing vouched for.
                    let d = decap(seg, &PORTS, false, |_, _| false).expect(&what);
                    assert_eq!(d.meta.csum, csum || ipv6, "{what}");
                    let inner = d.inner;
                    let tcp_len = inner.len() - 34;
                    let pseudo = crate::wire::tcp::pseudo_header_sum(inner, 14, false, tcp_len);
                    assert_eq!(
                        checksum::fold(checksum::sum(&inner[34..], pseudo)),
                        0xffff,
                        "{what}: inner TCP checksum"
                    );
                    let ip = ipv4::Packet::new_checked(&inner[14..]).unwrap();
                    assert!(ip.checksum_right());
                    payload.extend_from_slice(&inner[54..]);
                })
                .expect(&what);
                assert_eq!(n, data.len().div_ceil(mss), "{what}");
                assert_eq!(payload, data, "{what}");
            }
        }
    }
}

#[test]
fn only_tunnelled_super_frames_are_taken_for_tunnel_segmentation() {
    let s = spec(TunnelKind::Vxlan, false, false);
    let (frame, vnet, _) = tunnelled_super_frame(&s);
    // Not a super-frame: nothing to cut.
    let plain = crate::vnet::VnetHdr::default();
    assert_eq!(udp_tunnel_super_frame(&frame, &plain), None);
    // The checksum left in the outer headers: not the tunnel's inner segmentation.
    let outer = crate::vnet::VnetHdr {
        csum_start: 34,
        csum_offset: 6,
        ..vnet
    };
    assert_eq!(udp_tunnel_super_frame(&frame, &outer), None);
    // Cut short anywhere before the checksum field left: no panic, not taken.
    for cut in 0..usize::from(vnet.csum_start + vnet.csum_offset + 2) {
        assert_eq!(
            udp_tunnel_super_frame(&frame[..cut], &vnet),
            None,
            "cut at {cut}"
        );
    }
    // A plain TCP super-frame is not a tunnelled one.
    let inner = &frame[EncapTemplate::new(&s).unwrap().overhead()..];
    let inner_vnet = crate::vnet::VnetHdr {
        csum_start: 34,
        ..vnet
    };
    assert_eq!(udp_tunnel_super_frame(inner, &inner_vnet), None);
}

#[test]
fn an_inherited_tos_and_ttl_are_written_over_the_template_and_checked() {
    use crate::builder::{Ipv4, DST_MAC, SRC_MAC};
    let inner = builder::ethernet(
        DST_MAC,
        SRC_MAC,
        &[],
        crate::wire::ethernet::EtherType::IPV4,
        &builder::ipv4(
            &Ipv4 {
                tos: 0x28,
                ttl: 17,
                ..Ipv4::default()
            },
            &builder::udp(1, 2, &[0; 20]),
        ),
    );
    assert_eq!(inner_tos_ttl(&inner), Some((0x28, 17)));
    assert_eq!(
        inner_tos_ttl(&builder::arp(
            1,
            MacAddr::ZERO,
            [0; 4],
            MacAddr::ZERO,
            [0; 4]
        )),
        None
    );
    for ipv6 in [false, true] {
        let s = spec(TunnelKind::Vxlan, ipv6, false);
        let t = EncapTemplate::new(&s).unwrap();
        let mut f = encap(&s, &inner);
        t.set_tos_ttl(&mut f, 0x28, 17).unwrap();
        // Every outer check holds (the IPv4 header checksum among them).
        let d = decap(&f, &PORTS, false, |_, _| false).unwrap();
        assert_eq!((d.meta.tos, d.meta.ttl), (0x28, 17), "ipv6={ipv6}");
    }
}
