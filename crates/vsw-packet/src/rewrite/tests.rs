use super::*;
use crate::builder::{self, Ipv4, Ipv6, DST_MAC, SRC_MAC};
use crate::key::IPPROTO_ICMP;
use crate::vnet::VNET_F_NEEDS_CSUM;
use proptest::prelude::*;

/// One's-complement sum of `data` (not complemented), folded.
fn sum16(data: &[u8], mut acc: u32) -> u32 {
    for c in data.chunks(2) {
        acc += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc
}

/// The pseudo-header sum of the IPv4 or IPv6 packet at `ip` for `l4_len` bytes.
fn pseudo(d: &[u8], ip: usize, v6: bool, proto: u8, l4_len: usize) -> u32 {
    let addrs = if v6 {
        &d[ip + 8..ip + 40]
    } else {
        &d[ip + 12..ip + 20]
    };
    sum16(addrs, u32::from(proto) + l4_len as u32)
}

/// Fills in a correct TCP/UDP checksum for a frame without tags.
fn with_l4_csum(mut f: Vec<u8>, v6: bool) -> Vec<u8> {
    let ip = 14;
    let (proto, l4) = if v6 {
        (f[ip + 6], ip + 40)
    } else {
        (f[ip + 9], ip + 20)
    };
    let at = if proto == IPPROTO_TCP {
        l4 + 16
    } else {
        l4 + 6
    };
    f[at..at + 2].fill(0);
    let s = sum16(&f[l4..], pseudo(&f, ip, v6, proto, f.len() - l4));
    let c = !(s as u16);
    f[at..at + 2].copy_from_slice(&c.to_be_bytes());
    f
}

fn l4_valid(d: &[u8], ip: usize, v6: bool) -> bool {
    let (proto, l4) = if v6 {
        (d[ip + 6], ip + 40)
    } else {
        (d[ip + 9], ip + 20)
    };
    sum16(&d[l4..], pseudo(d, ip, v6, proto, d.len() - l4)) == 0xffff
}

fn ip_valid(d: &[u8], ip: usize) -> bool {
    builder::checksum(&d[ip..ip + 20]) == 0
}

fn tcp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let ip = Ipv4 {
        src,
        dst,
        proto: IPPROTO_TCP,
        ..Ipv4::default()
    };
    let f = builder::ethernet(
        DST_MAC,
        SRC_MAC,
        &[],
        EtherType::IPV4,
        &builder::ipv4(&ip, &builder::tcp(sport, dport, 0x10, b"payload!")),
    );
    with_l4_csum(f, false)
}

fn udp6(sport: u16, dport: u16) -> Vec<u8> {
    let ip = Ipv6::default();
    let f = builder::ethernet(
        DST_MAC,
        SRC_MAC,
        &[],
        EtherType::IPV6,
        &builder::ipv6(&ip, &builder::udp(sport, dport, b"abc")),
    );
    with_l4_csum(f, true)
}

fn loaded(f: &[u8]) -> PacketBuf {
    let mut p = PacketBuf::new(2048);
    p.load(f, None, VnetHdr::default()).unwrap();
    p
}

#[test]
fn addresses_keep_both_checksums_right() {
    let f = tcp4([198, 18, 0, 1], [198, 18, 0, 2], 1000, 80);
    assert!(
        ip_valid(&f, 14) && l4_valid(&f, 14, false),
        "the test frame itself"
    );
    let mut p = loaded(&f);
    p.set_nw_src([198, 19, 7, 9]);
    p.set_nw_dst([198, 18, 255, 254]);
    let d = p.data();
    assert_eq!(&d[26..34], &[198, 19, 7, 9, 198, 18, 255, 254]);
    assert!(ip_valid(d, 14), "IPv4 header checksum");
    assert!(l4_valid(d, 14, false), "TCP checksum");
}

#[test]
fn udp_without_a_checksum_stays_without() {
    let f = builder::udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], 1, 2, 10);
    assert_eq!(&f[40..42], &[0, 0]);
    let mut p = loaded(&f);
    p.set_nw_dst([198, 18, 0, 3]);
    p.set_tp_dst(99);
    assert_eq!(&p.data()[40..42], &[0, 0]);
    assert!(ip_valid(p.data(), 14));
}

#[test]
fn ports_over_ipv4_and_ipv6() {
    let mut p = loaded(&tcp4([198, 18, 0, 1], [198, 18, 0, 2], 1000, 80));
    p.set_tp_src(5555);
    p.set_tp_dst(8080);
    assert_eq!(&p.data()[34..38], &[0x15, 0xb3, 0x1f, 0x90]);
    assert!(l4_valid(p.data(), 14, false));
    let mut p = loaded(&udp6(7, 9));
    p.set_tp_dst(4789);
    assert!(l4_valid(p.data(), 14, true), "UDP over IPv6");
}

/// An SCTP header from port 5000 to 6000 over IPv4 (its CRC not filled in).
fn sctp4() -> Vec<u8> {
    let ip = Ipv4 {
        proto: IPPROTO_SCTP,
        ..Ipv4::default()
    };
    builder::ethernet(
        DST_MAC,
        SRC_MAC,
        &[],
        EtherType::IPV4,
        &builder::ipv4(&ip, &builder::sctp(5000, 6000)),
    )
}

#[test]
fn sctp_ports_get_a_new_crc() {
    let mut f = sctp4();
    let crc = crc32c::crc32c(&f[34..]);
    f[42..46].copy_from_slice(&crc.to_le_bytes());
    let mut p = loaded(&f);
    p.set_tp_dst(7000);
    let d = p.data().to_vec();
    let stored = u32::from_le_bytes(d[42..46].try_into().unwrap());
    let mut zeroed = d[34..].to_vec();
    zeroed[8..12].fill(0);
    assert_eq!(stored, crc32c::crc32c(&zeroed));
    assert_ne!(stored, crc, "the port change must change the CRC");
}

/// A short SCTP packet padded to Ethernet's 60 bytes: the CRC covers the SCTP
/// packet (the IP payload), not the padding after it.
#[test]
fn a_padded_frame_s_sctp_crc_covers_only_the_sctp_packet() {
    let mut f = sctp4();
    let sctp_end = f.len();
    f.resize(60, 0);
    let mut p = loaded(&f);
    p.set_tp_src(7000);
    let d = p.data().to_vec();
    assert_eq!(d.len(), 60, "the padding stays");
    let stored = u32::from_le_bytes(d[42..46].try_into().unwrap());
    let mut zeroed = d[34..sctp_end].to_vec();
    zeroed[8..12].fill(0);
    assert_eq!(stored, crc32c::crc32c(&zeroed));
}

#[test]
fn ttl_and_hop_limit() {
    let mut p = loaded(&tcp4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2));
    p.dec_ttl().unwrap();
    assert_eq!(p.data()[22], 63);
    assert!(ip_valid(p.data(), 14));
    let ip = Ipv4 {
        ttl: 1,
        proto: IPPROTO_ICMP,
        ..Ipv4::default()
    };
    let f = builder::ethernet(
        DST_MAC,
        SRC_MAC,
        &[],
        EtherType::IPV4,
        &builder::ipv4(&ip, &builder::icmp(8, 0)),
    );
    assert_eq!(loaded(&f).dec_ttl(), Err(RewriteError::TtlExpired));
    let mut p = loaded(&udp6(1, 2));
    p.dec_ttl().unwrap();
    assert_eq!(p.data()[14 + 7], 63);
}

#[test]
fn tos_keeps_ecn() {
    let mut f = tcp4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2);
    f[15] = 0x03;
    let c = builder::checksum(&{
        let mut h = f[14..34].to_vec();
        h[10..12].fill(0);
        h
    });
    f[24..26].copy_from_slice(&c.to_be_bytes());
    let mut p = loaded(&f);
    p.set_nw_tos(0xb8);
    assert_eq!(p.data()[15], 0xbb);
    assert!(ip_valid(p.data(), 14));
    let mut p = loaded(&udp6(1, 2));
    p.set_nw_tos(0x20);
    assert_eq!(
        u32::from_be_bytes(p.data()[14..18].try_into().unwrap()) >> 20,
        0x620
    );
}

#[test]
fn vlan_push_set_and_strip() {
    let f = builder::udp4_frame([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 0);
    let mut p = loaded(&f);
    p.set_vlan_vid(10).unwrap();
    assert_eq!(
        &p.data()[12..16],
        &[0x81, 0x00, 0x00, 0x0a],
        "a tag is pushed"
    );
    assert_eq!(&p.data()[16..], &f[12..]);
    p.set_vlan_pcp(5).unwrap();
    assert_eq!(&p.data()[14..16], &[0xa0, 0x0a]);
    p.push_vlan(EtherType::QINQ).unwrap();
    assert_eq!(
        &p.data()[12..20],
        &[0x88, 0xa8, 0xa0, 0x0a, 0x81, 0x00, 0xa0, 0x0a]
    );
    p.strip_vlan();
    p.strip_vlan();
    assert_eq!(p.data(), &f[..]);
    p.strip_vlan();
    assert_eq!(
        p.data(),
        &f[..],
        "stripping an untagged frame changes nothing"
    );
    assert_eq!(&p.data()[..12], &f[..12]);
}

#[test]
fn a_stripped_tag_comes_back_and_offsets_follow() {
    let f = tcp4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2);
    let vnet = VnetHdr {
        flags: VNET_F_NEEDS_CSUM,
        csum_start: 34,
        csum_offset: 16,
        ..VnetHdr::default()
    };
    let mut p = PacketBuf::new(2048);
    let tag = VlanTag {
        tpid: EtherType::VLAN,
        tci: 7,
    };
    p.load(&f, Some(tag), vnet).unwrap();
    assert_eq!(&p.data()[12..16], &[0x81, 0, 0, 7]);
    assert_eq!(p.vnet.csum_start, 38);
    p.strip_vlan();
    assert_eq!(p.vnet.csum_start, 34);
    assert_eq!(p.data(), &f[..]);
}

#[test]
fn a_checksum_left_to_the_device_follows_addresses_not_ports() {
    let mut f = tcp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2);
    // As the kernel hands it over: the field holds the pseudo-header sum.
    let seed = pseudo(&f, 14, false, IPPROTO_TCP, f.len() - 34) as u16;
    f[50..52].copy_from_slice(&seed.to_be_bytes());
    let vnet = VnetHdr {
        flags: VNET_F_NEEDS_CSUM,
        csum_start: 34,
        csum_offset: 16,
        ..VnetHdr::default()
    };
    let mut p = PacketBuf::new(2048);
    p.load(&f, None, vnet).unwrap();
    p.set_tp_dst(443);
    assert_eq!(
        &p.data()[50..52],
        &seed.to_be_bytes(),
        "ports are not in the seed"
    );
    p.set_nw_src([198, 19, 1, 1]);
    let d = p.data();
    let want = pseudo(d, 14, false, IPPROTO_TCP, d.len() - 34) as u16;
    assert_eq!(&d[50..52], &want.to_be_bytes());
}

#[test]
fn rewrites_never_panic_on_short_frames() {
    let f = tcp4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2);
    for cut in 0..f.len() {
        let mut p = loaded(&f[..cut]);
        p.set_dl_src(MacAddr::BROADCAST);
        p.set_nw_src([9, 9, 9, 9]);
        p.set_nw_tos(4);
        p.set_tp_dst(1);
        let _ = p.dec_ttl();
        let _ = p.set_vlan_vid(3);
        p.strip_vlan();
    }
}

proptest! {
    #[test]
    fn any_rewrite_leaves_valid_checksums(
        src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(),
        sport in any::<u16>(), dport in any::<u16>(),
        new_src in any::<[u8; 4]>(), new_port in any::<u16>(),
    ) {
        let mut p = loaded(&tcp4(src, dst, sport, dport));
        p.set_nw_src(new_src);
        p.set_tp_src(new_port);
        p.dec_ttl().unwrap();
        prop_assert!(ip_valid(p.data(), 14));
        prop_assert!(l4_valid(p.data(), 14, false));
    }
}

fn vxlan_template(csum: bool) -> crate::tunnel::EncapTemplate {
    gpe_template(csum, None)
}

/// VXLAN's template, with GPE's next protocol `gpe` when there is one.
fn gpe_template(csum: bool, gpe: Option<u8>) -> crate::tunnel::EncapTemplate {
    use std::net::{IpAddr, Ipv4Addr};
    crate::tunnel::EncapTemplate::new(&crate::tunnel::EncapSpec {
        kind: crate::tunnel::TunnelKind::Vxlan,
        eth_src: MacAddr([2, 0, 0, 0, 0, 1]),
        eth_dst: MacAddr([2, 0, 0, 0, 0, 2]),
        src: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
        dst: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
        tos: 0,
        ttl: 64,
        df: true,
        udp_dst: 4789,
        udp_csum: csum,
        vni: 42,
        geneve_options: Vec::new(),
        gpe,
    })
    .unwrap()
}

/// A decapsulated packet without Ethernet is kept behind a placeholder Ethernet
/// header of zero addresses and its type, written where the outer headers were;
/// with no room before it, refused.
#[test]
fn a_packet_without_ethernet_is_kept_behind_a_placeholder() {
    let ip = builder::ipv4(&Ipv4::default(), &builder::udp(1000, 2000, &[7u8; 20]));
    let mut outer = vec![0xaa; 50];
    outer.extend_from_slice(&ip);
    let mut buf = PacketBuf::new(2048);
    buf.load(&outer, None, VnetHdr::default()).unwrap();
    buf.keep_behind_ethernet(50, ip.len(), EtherType::IPV4, VnetHdr::default())
        .unwrap();
    assert_eq!(&buf.data()[..12], &[0; 12]);
    assert_eq!(&buf.data()[12..14], &[0x08, 0x00]);
    assert_eq!(&buf.data()[14..], &ip[..]);
    let mut buf = PacketBuf::new(2048);
    buf.load(&outer, None, VnetHdr::default()).unwrap();
    assert_eq!(
        buf.keep_behind_ethernet(10, 5, EtherType::IPV4, VnetHdr::default()),
        Err(RewriteError::NoHeadroom)
    );
}

/// VXLAN-GPE carrying IPv4: the frame's Ethernet header and tag come off before
/// the push, and the receiver gets the IP packet as its next protocol; carrying
/// Ethernet, the frame goes in whole. A super-frame is refused (the datapath cuts
/// it first).
#[test]
fn a_gpe_push_of_ip_takes_the_ethernet_header_off() {
    use crate::wire::vxlan;
    let ports = crate::tunnel::TunnelPorts {
        vxlan: Some(4789),
        geneve: None,
    };
    let ip = builder::ipv4(&Ipv4::default(), &builder::udp(1000, 2000, &[7u8; 100]));
    let frame = builder::ethernet(
        DST_MAC,
        SRC_MAC,
        &[(EtherType::VLAN, 5)],
        EtherType::IPV4,
        &ip,
    );
    let mut buf = PacketBuf::new(2048);
    buf.load(&frame, None, VnetHdr::default()).unwrap();
    buf.push_tunnel(&gpe_template(true, Some(vxlan::NP_IPV4)), 3)
        .unwrap();
    assert_eq!(buf.data().len(), ip.len() + 50);
    let d = crate::tunnel::decap(buf.data(), &ports, false, |_, _| false).unwrap();
    assert_eq!((d.inner, d.l3), (&ip[..], Some(EtherType::IPV4)));
    let mut buf = PacketBuf::new(2048);
    buf.load(&frame, None, VnetHdr::default()).unwrap();
    buf.push_tunnel(&gpe_template(false, Some(vxlan::NP_ETHERNET)), 3)
        .unwrap();
    let d = crate::tunnel::decap(buf.data(), &ports, false, |_, _| false).unwrap();
    assert_eq!((d.inner, d.l3), (&frame[..], None));
    let mut buf = PacketBuf::new(2048);
    let gso = VnetHdr {
        gso_type: crate::vnet::VNET_GSO_TCPV4,
        gso_size: 1000,
        ..VnetHdr::default()
    };
    buf.load(&frame, None, gso).unwrap();
    assert_eq!(
        buf.push_tunnel(&gpe_template(false, Some(vxlan::NP_IPV4)), 3),
        Err(RewriteError::TooBig)
    );
}

/// A pushed header decapsulates back to the frame it was pushed on, with its VNI
/// and checksums right; an unfinished inner checksum is finished first.
#[test]
fn a_pushed_tunnel_header_decapsulates_back_to_the_frame() {
    let ports = crate::tunnel::TunnelPorts {
        vxlan: Some(4789),
        geneve: None,
    };
    let frame = with_l4_csum(
        builder::ethernet(
            DST_MAC,
            SRC_MAC,
            &[],
            EtherType::IPV4,
            &builder::ipv4(&Ipv4::default(), &builder::udp(1000, 2000, &[7u8; 100])),
        ),
        false,
    );
    for csum in [false, true] {
        let mut buf = PacketBuf::new(2048);
        buf.load(&frame, None, VnetHdr::default()).unwrap();
        buf.push_tunnel(&vxlan_template(csum), 9).unwrap();
        assert_eq!(buf.data().len(), frame.len() + 50);
        assert_eq!(buf.vnet, VnetHdr::default());
        let d = crate::tunnel::decap(buf.data(), &ports, false, |_, _| false).unwrap();
        assert_eq!(d.inner, &frame[..]);
        assert_eq!((d.meta.id, d.meta.csum), (42, csum));
    }
    // A partial checksum (left to the device) is finished before the header covers it.
    let mut partial = frame.clone();
    // The device's way: the checksum field holds the pseudo-header's sum.
    let at = 14 + 20 + 6;
    let seed = pseudo(&partial, 14, false, 17, partial.len() - 34) as u16;
    partial[at..at + 2].copy_from_slice(&seed.to_be_bytes());
    let vnet = VnetHdr {
        flags: VNET_F_NEEDS_CSUM,
        csum_start: 34,
        csum_offset: 6,
        ..VnetHdr::default()
    };
    let mut buf = PacketBuf::new(2048);
    buf.load(&partial, None, vnet).unwrap();
    buf.push_tunnel(&vxlan_template(true), 1).unwrap();
    let d = crate::tunnel::decap(buf.data(), &ports, false, |_, _| false).unwrap();
    assert_eq!(
        sum16(
            &d.inner[34..],
            pseudo(d.inner, 14, false, 17, d.inner.len() - 34)
        ),
        0xffff
    );
}

/// A super-frame keeps its segmentation behind the header; one whose outer packet
/// would pass IP's largest, and a header longer than the headroom, are refused.
#[test]
fn a_pushed_super_frame_keeps_its_segmentation_and_an_oversized_one_is_refused() {
    let t = vxlan_template(false);
    let vnet = VnetHdr {
        gso_type: crate::vnet::VNET_GSO_TCPV4,
        gso_size: 1448,
        hdr_len: 66,
        flags: VNET_F_NEEDS_CSUM,
        csum_start: 34,
        csum_offset: 16,
    };
    let tcp_frame = |payload: &[u8]| {
        let ip = Ipv4 {
            proto: IPPROTO_TCP,
            ..Ipv4::default()
        };
        builder::ethernet(
            DST_MAC,
            SRC_MAC,
            &[],
            EtherType::IPV4,
            &builder::ipv4(&ip, &builder::tcp(1, 2, 0x10, payload)),
        )
    };
    let small = tcp_frame(&[1u8; 4000]);
    let mut buf = PacketBuf::new(70_000);
    buf.load(&small, None, vnet).unwrap();
    buf.push_tunnel(&t, 0).unwrap();
    assert_eq!(buf.vnet, vnet.shifted(50));
    // 65,524 bytes: with 50 more, the outer IP packet would pass 65,535.
    let big = tcp_frame(&vec![1u8; 65_470]);
    buf.load(&big, None, vnet).unwrap();
    assert_eq!(buf.push_tunnel(&t, 0), Err(RewriteError::TooBig));
    assert_eq!(buf.data(), &big[..], "nothing changed");
}

/// Outer headers on outer headers: the frame moves back to make room in front,
/// where the buffer has it behind; bytes and offload state as they were.
#[test]
fn room_in_front_is_made_by_moving_the_frame_back() {
    let frame: Vec<u8> = (0..200).map(|i| i as u8).collect();
    let mut buf = PacketBuf::new(2048);
    buf.load(&frame, None, VnetHdr::default()).unwrap();
    let had = buf.headroom();
    assert!(buf.make_headroom(had), "already there");
    assert_eq!(buf.headroom(), had);
    assert!(buf.make_headroom(had + 300));
    assert_eq!(buf.headroom(), had + 300);
    assert_eq!(buf.data(), &frame[..]);
    // A frame that fills the buffer has no room to move.
    let full = vec![7u8; 2048];
    buf.load(&full, None, VnetHdr::default()).unwrap();
    let had = buf.headroom();
    assert!(!buf.make_headroom(had + 100));
    assert_eq!((buf.headroom(), buf.data()), (had, &full[..]));
}

/// An IPv4 header that says length 0 (a super-frame's, its length left to the
/// segmentation): the ports are rewritten all the same, the payload taken to run
/// to the frame's end.
#[test]
fn a_zero_ip_length_still_has_its_ports_rewritten() {
    let mut f = tcp4([198, 18, 0, 1], [198, 18, 0, 2], 1000, 80);
    f[16..18].fill(0);
    let mut p = loaded(&f);
    p.set_tp_dst(8080);
    assert_eq!(&p.data()[36..38], &8080u16.to_be_bytes());
}
