//! Builds well-formed frames of every protocol the key extractor knows, for tests,
//! fuzz seeds and benchmarks. Not used on the packet path.

use crate::mac::MacAddr;
use crate::wire::ethernet::{self, EtherType, ETH_HDR_LEN};
use crate::wire::ip::{
    IPPROTO_FRAGMENT, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP,
};
use crate::wire::{arp, ipv4, ipv6, sctp, tcp, udp};

/// An Ethernet frame: destination, source, optional tags (TPID, TCI) outermost first,
/// ethertype, payload.
pub fn ethernet(
    dst: MacAddr,
    src: MacAddr,
    tags: &[(u16, u16)],
    ethertype: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = vec![0u8; ETH_HDR_LEN];
    {
        let mut eth = ethernet::Frame::new_checked(&mut f[..]).expect("a whole header");
        eth.set_dst_addr(dst);
        eth.set_src_addr(src);
    }
    f.truncate(ethernet::field::ETHERTYPE.start);
    for (tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// IPv4 header fields the extractor reads.
#[derive(Clone, Copy, Debug)]
pub struct Ipv4 {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub proto: u8,
    pub tos: u8,
    pub ttl: u8,
    /// Flags and fragment offset as on the wire (0x2000 = more fragments).
    pub frag: u16,
    /// Options, a multiple of 4 bytes.
    pub options: usize,
}

impl Default for Ipv4 {
    fn default() -> Self {
        Ipv4 {
            src: [198, 18, 0, 1],
            dst: [198, 18, 0, 2],
            proto: IPPROTO_UDP,
            tos: 0,
            ttl: 64,
            frag: 0,
            options: 0,
        }
    }
}

pub use crate::checksum::checksum;

/// An IPv4 packet with a correct header checksum.
pub fn ipv4(h: &Ipv4, payload: &[u8]) -> Vec<u8> {
    let ihl = ipv4::MIN_HEADER_LEN + h.options;
    let total = ihl + payload.len();
    let mut p = vec![0u8; ihl];
    ipv4::Repr {
        header_len: ihl,
        tos: h.tos,
        total_len: total as u16,
        frag: h.frag,
        ttl: h.ttl,
        protocol: h.proto,
        src: h.src,
        dst: h.dst,
    }
    .emit(&mut p);
    p.extend_from_slice(payload);
    p
}

/// IPv6 header fields the extractor reads.
#[derive(Clone, Copy, Debug)]
pub struct Ipv6 {
    pub src: u128,
    pub dst: u128,
    pub next: u8,
    pub tclass: u8,
    pub label: u32,
    pub hop_limit: u8,
}

impl Default for Ipv6 {
    fn default() -> Self {
        Ipv6 {
            src: 0x2001_0db8_0000_0000_0000_0000_0000_0001,
            dst: 0x2001_0db8_0000_0000_0000_0000_0000_0002,
            next: IPPROTO_UDP,
            tclass: 0,
            label: 0,
            hop_limit: 64,
        }
    }
}

pub fn ipv6(h: &Ipv6, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; ipv6::HEADER_LEN];
    ipv6::Repr {
        traffic_class: h.tclass,
        flow_label: h.label,
        payload_len: payload.len() as u16,
        next_header: h.next,
        hop_limit: h.hop_limit,
        src: h.src,
        dst: h.dst,
    }
    .emit(&mut p);
    p.extend_from_slice(payload);
    p
}

/// An IPv6 extension header of the hop-by-hop/routing/destination-options shape:
/// next header, length in 8-byte units beyond the first, padding.
pub fn ipv6_option_header(next: u8, units_beyond_first: u8, rest: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; (usize::from(units_beyond_first) + 1) * 8];
    h[ipv6::field::EXT_NEXT] = next;
    h[ipv6::field::EXT_LEN] = units_beyond_first;
    h.extend_from_slice(rest);
    h
}

/// An IPv6 fragment header; `offset` in bytes (a multiple of 8).
pub fn ipv6_fragment_header(next: u8, offset: u16, more: bool, rest: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; 8];
    h[ipv6::field::EXT_NEXT] = next;
    h[ipv6::field::FRAG_OFF_M]
        .copy_from_slice(&((offset & 0xfff8) | u16::from(more)).to_be_bytes());
    // The identification.
    h[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    h.extend_from_slice(rest);
    h
}

pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; udp::HEADER_LEN];
    udp::emit(&mut h, sport, dport, payload.len());
    h.extend_from_slice(payload);
    h
}

pub fn tcp(sport: u16, dport: u16, flags: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; tcp::MIN_HEADER_LEN];
    tcp::emit(&mut h, sport, dport, 1000, flags, 65535);
    h.extend_from_slice(payload);
    h
}

pub fn sctp(sport: u16, dport: u16) -> Vec<u8> {
    let mut h = vec![0u8; sctp::HEADER_LEN];
    let mut p = sctp::Packet::new_checked(&mut h[..]).expect("a whole header");
    p.set_src_port(sport);
    p.set_dst_port(dport);
    h
}

pub fn icmp(icmp_type: u8, code: u8) -> Vec<u8> {
    vec![icmp_type, code, 0, 0, 0, 1, 0, 1]
}

/// An ICMPv6 neighbour solicitation (135) or advertisement (136) for `target`, with a
/// link-layer address option (source for 135, target for 136) when `lladdr` is given.
pub fn icmpv6_nd(icmp_type: u8, target: u128, lladdr: Option<MacAddr>) -> Vec<u8> {
    let mut h = vec![icmp_type, 0, 0, 0, 0, 0, 0, 0];
    h.extend_from_slice(&target.to_be_bytes());
    if let Some(mac) = lladdr {
        let kind = if icmp_type == 135 { 1 } else { 2 };
        h.extend_from_slice(&[kind, 1]);
        h.extend_from_slice(&mac.0);
    }
    h
}

/// An IGMPv1/v2 message (query, report or leave) about `group`, its checksum right.
pub fn igmp(msg_type: u8, group: [u8; 4]) -> Vec<u8> {
    let mut m = vec![msg_type, 0, 0, 0];
    m.extend_from_slice(&group);
    with_checksum_at_2(m)
}

/// An IGMPv3 or MLDv2 group record: its type, the group, its sources.
pub type GroupRecord<'a, A> = (u8, A, &'a [A]);

/// An IGMPv3 report of `records`.
pub fn igmp_v3_report(records: &[GroupRecord<'_, [u8; 4]>]) -> Vec<u8> {
    let mut m = vec![crate::mcast::igmp::V3_REPORT, 0, 0, 0, 0, 0];
    m.extend_from_slice(&(records.len() as u16).to_be_bytes());
    for (kind, group, sources) in records {
        m.extend_from_slice(&[*kind, 0]);
        m.extend_from_slice(&(sources.len() as u16).to_be_bytes());
        m.extend_from_slice(group);
        for s in *sources {
            m.extend_from_slice(s);
        }
    }
    with_checksum_at_2(m)
}

fn with_checksum_at_2(mut m: Vec<u8>) -> Vec<u8> {
    let c = checksum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

/// The Ethernet address of IP multicast group `dst` (RFC 1112 6.4, RFC 2464 7).
pub fn multicast_mac(dst: std::net::IpAddr) -> MacAddr {
    match dst {
        std::net::IpAddr::V4(a) => {
            let o = a.octets();
            MacAddr([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
        }
        std::net::IpAddr::V6(a) => {
            let o = a.octets();
            MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
        }
    }
}

/// An IGMP message from `src` (MAC and address) to `dst` in its frame: TTL 1, as
/// hosts send them.
pub fn igmp_frame(src: (MacAddr, [u8; 4]), dst: [u8; 4], msg: &[u8]) -> Vec<u8> {
    let ip = ipv4(
        &Ipv4 {
            src: src.1,
            dst,
            proto: crate::wire::ip::IPPROTO_IGMP,
            ttl: 1,
            ..Ipv4::default()
        },
        msg,
    );
    let mac = multicast_mac(std::net::Ipv4Addr::from(dst).into());
    ethernet(mac, src.0, &[], EtherType::IPV4, &ip)
}

/// An MLD message (ICMPv6 `msg_type`) with `body` after its first 8 bytes (for
/// MLDv1 the group, for an MLDv2 report its records: `mld_v2_records`), from `src`
/// to `dst` behind a hop-by-hop header (the router alert hosts send), its
/// checksum right.
pub fn mld_frame(
    src: (MacAddr, u128),
    dst: u128,
    msg_type: u8,
    records: u16,
    body: &[u8],
) -> Vec<u8> {
    let mut m = vec![msg_type, 0, 0, 0, 0, 0];
    m.extend_from_slice(&records.to_be_bytes());
    m.extend_from_slice(body);
    let mut acc = crate::checksum::sum(&src.1.to_be_bytes(), 0);
    acc = crate::checksum::sum(&dst.to_be_bytes(), acc);
    acc = crate::checksum::sum(&(m.len() as u32).to_be_bytes(), acc);
    acc = crate::checksum::sum(&[0, 0, 0, IPPROTO_ICMPV6], acc);
    acc = crate::checksum::sum(&m, acc);
    m[2..4].copy_from_slice(&(!crate::checksum::fold(acc)).to_be_bytes());
    let hop = {
        // Router alert (type 5, MLD), then a two-byte pad.
        let mut h = vec![IPPROTO_ICMPV6, 0, 5, 2, 0, 0, 1, 0];
        h.extend_from_slice(&m);
        h
    };
    let ip = ipv6(
        &Ipv6 {
            src: src.1,
            dst,
            next: crate::wire::ip::IPPROTO_HOPOPTS,
            hop_limit: 1,
            ..Ipv6::default()
        },
        &hop,
    );
    let mac = multicast_mac(std::net::Ipv6Addr::from(dst).into());
    ethernet(mac, src.0, &[], EtherType::IPV6, &ip)
}

/// MLDv2 group records.
pub fn mld_v2_records(records: &[GroupRecord<'_, u128>]) -> Vec<u8> {
    let mut b = Vec::new();
    for (kind, group, sources) in records {
        b.extend_from_slice(&[*kind, 0]);
        b.extend_from_slice(&(sources.len() as u16).to_be_bytes());
        b.extend_from_slice(&group.to_be_bytes());
        for s in *sources {
            b.extend_from_slice(&s.to_be_bytes());
        }
    }
    b
}

/// An Ethernet/IPv4 ARP packet.
pub fn arp(op: u16, sha: MacAddr, spa: [u8; 4], tha: MacAddr, tpa: [u8; 4]) -> Vec<u8> {
    let mut a = vec![0u8; arp::ETHERNET_IPV4_LEN];
    arp::emit_ethernet_ipv4(&mut a, op, sha.0, spa, tha.0, tpa);
    a
}

pub const SRC_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
pub const DST_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

/// A UDP/IPv4 frame between the two test hosts; `payload` bytes of zeros.
pub fn udp4_frame(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: usize) -> Vec<u8> {
    let ip = Ipv4 {
        src,
        dst,
        ..Ipv4::default()
    };
    ethernet(
        DST_MAC,
        SRC_MAC,
        &[],
        EtherType::IPV4,
        &ipv4(&ip, &udp(sport, dport, &vec![0; payload])),
    )
}

/// An IPv4 TCP super-frame carrying `payload` behind `spec`'s tunnel headers, as a
/// Linux tunnel device hands one over: the virtio-net header asks for inner segments
/// of `mss` bytes and leaves the inner TCP checksum to finish.
pub fn tunnelled_tcp_super_frame(
    spec: &crate::tunnel::EncapSpec,
    payload: &[u8],
    mss: u16,
) -> (Vec<u8>, crate::vnet::VnetHdr) {
    let ip = ipv4(
        &Ipv4 {
            proto: IPPROTO_TCP,
            ..Ipv4::default()
        },
        &tcp(40000, 5201, 0x18, payload),
    );
    let inner = ethernet(DST_MAC, SRC_MAC, &[], EtherType::IPV4, &ip);
    let t = crate::tunnel::EncapTemplate::new(spec).expect("a spec a template takes");
    let mut out = vec![0u8; inner.len() + t.overhead()];
    let n = t.push(&inner, &mut out, 40001, 9).expect("room for it");
    out.truncate(n);
    let vnet = crate::vnet::VnetHdr {
        flags: crate::vnet::VNET_F_NEEDS_CSUM,
        gso_type: crate::vnet::VNET_GSO_TCPV4,
        hdr_len: (t.overhead() + 54) as u16,
        gso_size: mss,
        csum_start: (t.overhead() + 34) as u16,
        csum_offset: 16,
    };
    (out, vnet)
}

/// One frame of every kind the extractor knows: name and frame. Seeds for fuzzing and
/// the per-protocol truncation tests.
pub fn samples() -> Vec<(&'static str, Vec<u8>)> {
    let (d, s) = (DST_MAC, SRC_MAC);
    let v4 = Ipv4::default();
    let v6 = Ipv6::default();
    let eth4 = |ip: &Ipv4, l4: &[u8]| ethernet(d, s, &[], EtherType::IPV4, &ipv4(ip, l4));
    let eth6 = |ip: &Ipv6, l4: &[u8]| ethernet(d, s, &[], EtherType::IPV6, &ipv6(ip, l4));
    let t = |p| Ipv4 { proto: p, ..v4 };
    let t6 = |p| Ipv6 { next: p, ..v6 };
    vec![
        ("udp4", eth4(&v4, &udp(1234, 53, b"hello"))),
        (
            "tcp4 with options",
            eth4(
                &Ipv4 {
                    options: 8,
                    tos: 0xb8,
                    ..t(IPPROTO_TCP)
                },
                &tcp(40000, 80, 0x012, b"x"),
            ),
        ),
        ("sctp4", eth4(&t(IPPROTO_SCTP), &sctp(5000, 6000))),
        ("icmp4", eth4(&t(IPPROTO_ICMP), &icmp(8, 0))),
        (
            "ipv4 first fragment",
            eth4(&Ipv4 { frag: 0x2000, ..v4 }, &udp(7, 9, &[0; 16])),
        ),
        (
            "ipv4 later fragment",
            eth4(&Ipv4 { frag: 0x0003, ..v4 }, &[0xaa; 24]),
        ),
        (
            "vlan udp4",
            ethernet(
                d,
                s,
                &[(EtherType::VLAN, 0x2064)],
                EtherType::IPV4,
                &ipv4(&v4, &udp(1, 2, &[])),
            ),
        ),
        (
            "qinq udp4",
            ethernet(
                d,
                s,
                &[(EtherType::QINQ, 0x0064), (EtherType::VLAN, 0x00c8)],
                EtherType::IPV4,
                &ipv4(&v4, &udp(3, 4, &[])),
            ),
        ),
        (
            "udp6",
            eth6(
                &Ipv6 {
                    label: 0xabcde,
                    tclass: 0x20,
                    ..v6
                },
                &udp(1, 2, &[]),
            ),
        ),
        ("tcp6", eth6(&t6(IPPROTO_TCP), &tcp(5, 6, 0x002, &[]))),
        (
            "tcp6 with hop-by-hop, destination options, first fragment",
            eth6(
                &t6(0),
                &ipv6_option_header(
                    60,
                    0,
                    &ipv6_option_header(
                        IPPROTO_FRAGMENT,
                        1,
                        &ipv6_fragment_header(IPPROTO_TCP, 0, true, &tcp(7, 8, 0x018, &[])),
                    ),
                ),
            ),
        ),
        (
            "ipv6 later fragment",
            eth6(
                &t6(IPPROTO_FRAGMENT),
                &ipv6_fragment_header(IPPROTO_UDP, 1280, false, &[0; 16]),
            ),
        ),
        ("sctp6", eth6(&t6(IPPROTO_SCTP), &sctp(7, 9))),
        ("icmp6 echo", eth6(&t6(IPPROTO_ICMPV6), &icmp(128, 0))),
        (
            "icmp6 neighbour solicitation",
            eth6(
                &t6(IPPROTO_ICMPV6),
                &icmpv6_nd(135, 0x2001_0db8_0000_0000_0000_0000_0000_0002, Some(s)),
            ),
        ),
        (
            "icmp6 neighbour advertisement",
            eth6(
                &t6(IPPROTO_ICMPV6),
                &icmpv6_nd(136, 0x2001_0db8_0000_0000_0000_0000_0000_0002, Some(d)),
            ),
        ),
        (
            "arp request",
            ethernet(
                MacAddr::BROADCAST,
                s,
                &[],
                EtherType::ARP,
                &arp(1, s, [198, 18, 0, 1], MacAddr::ZERO, [198, 18, 0, 2]),
            ),
        ),
        ("unknown ethertype", ethernet(d, s, &[], 0x88b5, &[1, 2, 3])),
    ]
}
