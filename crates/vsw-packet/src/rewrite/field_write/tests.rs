use super::*;
use crate::builder::{self, Ipv4, Ipv6, DST_MAC, SRC_MAC};
use crate::checksum;
use crate::rewrite::NshField;
use crate::vnet::VnetHdr;
use proptest::prelude::*;

const IP: usize = 14;

fn frame(ethertype: u16, l3: &[u8]) -> Vec<u8> {
    builder::ethernet(DST_MAC, SRC_MAC, &[], ethertype, l3)
}

/// Where the checksum of a transport header sits.
fn csum_at(proto: u8) -> usize {
    l4_csum_at(proto).expect("a checksummed protocol")
}

/// The pseudo-header sum (or 0 for ICMPv4, which has none).
fn pseudo(d: &[u8], v6: bool, proto: u8, l4_len: usize) -> u64 {
    if proto == IPPROTO_ICMP {
        return 0;
    }
    let addrs = if v6 {
        &d[IP + 8..IP + 40]
    } else {
        &d[IP + 12..IP + 20]
    };
    checksum::sum(addrs, u64::from(proto) + l4_len as u64)
}

fn l4_of(d: &[u8], v6: bool) -> (u8, usize) {
    if v6 {
        (d[IP + 6], IP + 40)
    } else {
        (d[IP + 9], IP + usize::from(d[IP] & 0xf) * 4)
    }
}

/// Fills in a right transport checksum.
fn with_csum(mut f: Vec<u8>, v6: bool) -> Vec<u8> {
    let (proto, l4) = l4_of(&f, v6);
    let at = l4 + csum_at(proto);
    f[at..at + 2].fill(0);
    let c = !checksum::fold(checksum::sum(&f[l4..], pseudo(&f, v6, proto, f.len() - l4)));
    f[at..at + 2].copy_from_slice(&c.to_be_bytes());
    f
}

fn l4_valid(d: &[u8], v6: bool) -> bool {
    let (proto, l4) = l4_of(d, v6);
    checksum::fold(checksum::sum(&d[l4..], pseudo(d, v6, proto, d.len() - l4))) == 0xffff
}

fn ipv4_valid(d: &[u8], at: usize) -> bool {
    builder::checksum(&d[at..at + 20]) == 0
}

fn loaded(f: &[u8]) -> PacketBuf {
    let mut p = PacketBuf::new(2048);
    p.load(f, None, VnetHdr::default()).unwrap();
    p
}

fn v6(next: u8, payload: &[u8]) -> Vec<u8> {
    let h = Ipv6 {
        next,
        ..Ipv6::default()
    };
    with_csum(frame(EtherType::IPV6, &builder::ipv6(&h, payload)), true)
}

fn v4(proto: u8, payload: &[u8]) -> Vec<u8> {
    let h = Ipv4 {
        proto,
        ..Ipv4::default()
    };
    frame(EtherType::IPV4, &builder::ipv4(&h, payload))
}

const ADDR: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xca, 0xfe, 0, 7];
const MAC: MacAddr = MacAddr([0x0a, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);

#[test]
fn ipv6_addresses_keep_every_transport_checksum_right() {
    let ns = builder::icmpv6_nd(135, 1, Some(MAC));
    for f in [
        v6(IPPROTO_TCP, &builder::tcp(1, 2, 0x10, b"payload")),
        v6(IPPROTO_UDP, &builder::udp(1, 2, b"odd")),
        v6(IPPROTO_ICMPV6, &ns),
    ] {
        assert!(l4_valid(&f, true), "the test frame itself");
        let mut p = loaded(&f);
        p.write_field(FieldWrite::Ipv6Src(ADDR));
        p.write_field(FieldWrite::Ipv6Dst([0xfe; 16]));
        let d = p.data();
        assert_eq!(&d[IP + 8..IP + 24], &ADDR);
        assert_eq!(&d[IP + 24..IP + 40], &[0xfe; 16]);
        assert!(l4_valid(d, true), "protocol {}", d[IP + 6]);
    }
}

#[test]
fn a_device_finished_checksum_follows_the_addresses_only() {
    let f = v6(IPPROTO_TCP, &builder::tcp(1, 2, 0x10, b"payload"));
    // What a guest leaves for the device: the pseudo-header sum, uncomplemented.
    let mut partial = f.clone();
    let l4 = IP + 40;
    let seed = checksum::fold(pseudo(&f, true, IPPROTO_TCP, f.len() - l4));
    partial[l4 + 16..l4 + 18].copy_from_slice(&seed.to_be_bytes());
    let mut p = PacketBuf::new(2048);
    let vnet = VnetHdr {
        flags: crate::vnet::VNET_F_NEEDS_CSUM,
        ..VnetHdr::default()
    };
    p.load(&partial, None, vnet).unwrap();
    p.write_field(FieldWrite::Ipv6Dst(ADDR));
    let d = p.data();
    let want = checksum::fold(pseudo(d, true, IPPROTO_TCP, d.len() - l4));
    assert_eq!(u16::from_be_bytes([d[l4 + 16], d[l4 + 17]]), want);
}

#[test]
fn label_ecn_and_ttl_over_both_ip_versions() {
    let mut p = loaded(&v4(IPPROTO_UDP, &builder::udp(1, 2, b"x")));
    p.write_field(FieldWrite::IpEcn(3));
    p.write_field(FieldWrite::NwTtl(7));
    let d = p.data();
    assert_eq!(d[IP + 1] & 3, 3);
    assert_eq!(d[IP + 8], 7);
    assert!(ipv4_valid(d, IP));

    let mut p = loaded(&v6(IPPROTO_UDP, &builder::udp(1, 2, b"x")));
    p.write_field(FieldWrite::Ipv6Label(0xabcde));
    p.write_field(FieldWrite::IpEcn(2));
    p.write_field(FieldWrite::NwTtl(9));
    let ip = ipv6::Packet::new_checked(&p.data()[IP..]).unwrap();
    assert_eq!(ip.flow_label(), 0xabcde);
    assert_eq!(ip.traffic_class() & 3, 2);
    assert_eq!(ip.hop_limit(), 9);
    assert_eq!(p.data()[IP] >> 4, 6, "the version stays");
}

#[test]
fn arp_fields() {
    let a = builder::arp(
        1,
        SRC_MAC,
        [198, 18, 0, 1],
        MacAddr([0; 6]),
        [198, 18, 0, 2],
    );
    let mut p = loaded(&frame(EtherType::ARP, &a));
    p.write_field(FieldWrite::ArpOp(2));
    p.write_field(FieldWrite::ArpSpa([198, 18, 0, 9]));
    p.write_field(FieldWrite::ArpTpa([198, 18, 0, 1]));
    p.write_field(FieldWrite::ArpSha(MAC));
    p.write_field(FieldWrite::ArpTha(SRC_MAC));
    let got = arp::Packet::new_checked(&p.data()[IP..]).unwrap();
    assert_eq!(got.operation(), 2);
    let e = got.ethernet_ipv4().unwrap().unwrap();
    assert_eq!((e.spa, e.tpa), (0xc612_0009, 0xc612_0001));
    assert_eq!((e.sha, e.tha), (&MAC.0[..], &SRC_MAC.0[..]));
}

#[test]
fn icmp_type_and_code_keep_the_checksum_right() {
    let f = with_csum(v4(IPPROTO_ICMP, &builder::icmp(8, 0)), false);
    assert!(l4_valid(&f, false));
    let mut p = loaded(&f);
    p.write_field(FieldWrite::Icmpv4Type(0));
    p.write_field(FieldWrite::Icmpv4Code(5));
    // An ICMPv6 write leaves an ICMPv4 packet alone.
    p.write_field(FieldWrite::Icmpv6Type(1));
    let d = p.data();
    assert_eq!((d[34], d[35]), (0, 5));
    assert!(l4_valid(d, false));

    let mut p = loaded(&v6(IPPROTO_ICMPV6, &builder::icmp(128, 0)));
    p.write_field(FieldWrite::Icmpv6Type(129));
    p.write_field(FieldWrite::Icmpv6Code(1));
    let d = p.data();
    assert_eq!((d[54], d[55]), (129, 1));
    assert!(l4_valid(d, true));
}

#[test]
fn neighbour_discovery_target_and_link_layer_options() {
    let mut p = loaded(&v6(
        IPPROTO_ICMPV6,
        &builder::icmpv6_nd(135, 1, Some(SRC_MAC)),
    ));
    p.write_field(FieldWrite::NdTarget(ADDR));
    p.write_field(FieldWrite::NdSll(MAC));
    // A solicitation has no target link-layer address to write.
    p.write_field(FieldWrite::NdTll(DST_MAC));
    let d = p.data();
    assert_eq!(&d[54 + 8..54 + 24], &ADDR);
    assert_eq!(&d[54 + 26..54 + 32], &MAC.0);
    assert!(l4_valid(d, true));

    let mut p = loaded(&v6(
        IPPROTO_ICMPV6,
        &builder::icmpv6_nd(136, 1, Some(SRC_MAC)),
    ));
    p.write_field(FieldWrite::NdSll(DST_MAC));
    assert_eq!(
        &p.data()[54 + 26..54 + 32],
        &SRC_MAC.0,
        "not in an advertisement"
    );
    p.write_field(FieldWrite::NdTll(MAC));
    assert_eq!(&p.data()[54 + 26..54 + 32], &MAC.0);
    assert!(l4_valid(p.data(), true));
}

#[test]
fn ttls_copy_between_the_headers_of_ip_in_ip() {
    let inner = Ipv4 {
        proto: IPPROTO_UDP,
        ttl: 9,
        ..Ipv4::default()
    };
    let outer = Ipv4 {
        proto: IPPROTO_IPIP,
        ttl: 64,
        ..Ipv4::default()
    };
    let f = frame(
        EtherType::IPV4,
        &builder::ipv4(&outer, &builder::ipv4(&inner, &builder::udp(1, 2, b"x"))),
    );
    let mut p = loaded(&f);
    p.write_field(FieldWrite::CopyTtlOut);
    assert_eq!(p.data()[IP + 8], 9);
    assert!(ipv4_valid(p.data(), IP));
    let mut p = loaded(&f);
    p.write_field(FieldWrite::CopyTtlIn);
    assert_eq!(p.data()[IP + 20 + 8], 64);
    assert!(ipv4_valid(p.data(), IP + 20));

    // IPv6 inside IPv4, the other way.
    let h6 = Ipv6 {
        hop_limit: 3,
        ..Ipv6::default()
    };
    let outer = Ipv4 {
        proto: IPPROTO_IPV6_INNER,
        ttl: 50,
        ..Ipv4::default()
    };
    let f = frame(
        EtherType::IPV4,
        &builder::ipv4(&outer, &builder::ipv6(&h6, &builder::udp(1, 2, b"x"))),
    );
    let mut p = loaded(&f);
    p.write_field(FieldWrite::CopyTtlIn);
    assert_eq!(p.data()[IP + 20 + 7], 50);

    // One IP header: nothing to copy.
    let f = v4(IPPROTO_UDP, &builder::udp(1, 2, b"x"));
    let mut p = loaded(&f);
    p.write_field(FieldWrite::CopyTtlOut);
    p.write_field(FieldWrite::CopyTtlIn);
    assert_eq!(p.data(), &f[..]);
}

fn any_write() -> impl Strategy<Value = FieldWrite> {
    let mac = any::<[u8; 6]>().prop_map(MacAddr);
    prop_oneof![
        any::<[u8; 16]>().prop_map(FieldWrite::Ipv6Src),
        any::<[u8; 16]>().prop_map(FieldWrite::Ipv6Dst),
        any::<u32>().prop_map(FieldWrite::Ipv6Label),
        any::<u32>().prop_map(FieldWrite::PbbIsid),
        (0u8..6, any::<u32>()).prop_map(|(f, v)| {
            let field = match f {
                0 => NshField::Flags,
                1 => NshField::Ttl,
                2 => NshField::Spi,
                3 => NshField::Si,
                n => NshField::Context(n * 2 - 8),
            };
            FieldWrite::Nsh(field, v)
        }),
        any::<u8>().prop_map(FieldWrite::IpEcn),
        any::<u8>().prop_map(FieldWrite::NwTtl),
        any::<u16>().prop_map(FieldWrite::ArpOp),
        any::<[u8; 4]>().prop_map(FieldWrite::ArpSpa),
        mac.clone().prop_map(FieldWrite::ArpSha),
        any::<u8>().prop_map(FieldWrite::Icmpv4Type),
        any::<u8>().prop_map(FieldWrite::Icmpv6Code),
        any::<[u8; 16]>().prop_map(FieldWrite::NdTarget),
        mac.clone().prop_map(FieldWrite::NdSll),
        mac.prop_map(FieldWrite::NdTll),
        Just(FieldWrite::CopyTtlOut),
        Just(FieldWrite::CopyTtlIn),
    ]
}

proptest! {
    /// The incremental update equals a sum taken again, at even and odd offsets.
    #[test]
    fn an_adjusted_checksum_is_the_recomputed_one(
        data in proptest::collection::vec(any::<u8>(), 2..64),
        at in 0usize..64,
        new in proptest::collection::vec(any::<u8>(), 1..16),
    ) {
        let at = at % data.len();
        let n = new.len().min(data.len() - at);
        let before = checksum::checksum(&data);
        let mut after = data.clone();
        after[at..at + n].copy_from_slice(&new[..n]);
        let adjusted = csum_adjust(before, &data[at..at + n], &new[..n], at % 2 == 1, false);
        // 0 and 0xffff are the same one's-complement number.
        let want = checksum::checksum(&after);
        prop_assert!(adjusted == want || (adjusted | want == 0xffff && adjusted & want == 0));
    }

    /// Any frame, any write: no panic, and the length never changes.
    #[test]
    fn any_write_on_any_frame_is_safe(
        mut f in proptest::collection::vec(any::<u8>(), 0..200),
        ethertype in prop_oneof![Just(0x0800u16), Just(0x86dd), Just(0x0806), Just(0x894f), any::<u16>()],
        proto in prop_oneof![Just(4u8), Just(41), Just(58), Just(1), Just(6), Just(17), any::<u8>()],
        w in any_write(),
    ) {
        if f.len() >= 24 {
            f[12..14].copy_from_slice(&ethertype.to_be_bytes());
            f[14] = if ethertype == 0x86dd { 0x60 } else { 0x45 };
            f[23] = proto;
            if f.len() > 20 { f[20] = proto; }
            if ethertype == 0x894f {
                // NSH version 0, MD type 1 or 2 by `proto`'s low bit.
                f[14] &= 0x3f;
                f[15] = (f[15] & 0xc0) | if proto & 1 == 0 { 6 } else { 2 + (proto >> 6) };
                f[16] = 1 + (proto & 1);
            }
        }
        let mut p = PacketBuf::new(2048);
        if p.load(&f, None, VnetHdr::default()).is_ok() {
            p.write_field(w);
            prop_assert_eq!(p.data().len(), f.len());
            // A pop takes off no more than the frame, and leaves an Ethernet frame.
            let _ = p.pop_nsh_ethernet();
            prop_assert!(p.data().len() == f.len() || p.data().len() >= 14);
        }
    }
}
