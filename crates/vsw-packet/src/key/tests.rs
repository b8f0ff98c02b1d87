use super::*;
use crate::builder::{self, samples, DST_MAC, SRC_MAC};
use crate::ethernet::ETH_HDR_LEN;
use proptest::prelude::*;

fn key_of(frame: &[u8]) -> FlowKey {
    let mut k = FlowKey::default();
    extract(frame, 7, None, &mut k).expect("well-formed frame");
    k
}

fn sample(name: &str) -> Vec<u8> {
    samples()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no sample {name}"))
        .1
}

const V6_DST: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0002;

#[test]
fn the_key_is_twelve_words() {
    assert_eq!(std::mem::size_of::<FlowKey>(), KEY_WORDS * 8);
}

#[test]
fn udp_over_ipv4() {
    let k = key_of(&sample("udp4"));
    assert_eq!(k.in_port, 7);
    assert_eq!((k.dl_src, k.dl_dst), (SRC_MAC, DST_MAC));
    assert_eq!(k.dl_type, EtherType::IPV4);
    assert_eq!({ k.nw_src }, 0xc612_0001);
    assert_eq!({ k.nw_dst }, 0xc612_0002);
    assert_eq!((k.nw_proto, k.nw_ttl, k.nw_frag), (IPPROTO_UDP, 64, 0));
    assert_eq!((k.tp_src, k.tp_dst), (1234, 53));
    assert_eq!(k.vlan_tci, 0);
}

#[test]
fn tcp_over_ipv4_with_options_gives_flags_and_tos() {
    let k = key_of(&sample("tcp4 with options"));
    assert_eq!((k.nw_proto, k.nw_tos), (IPPROTO_TCP, 0xb8));
    assert_eq!((k.tp_src, k.tp_dst, k.tcp_flags), (40000, 80, 0x012));
}

#[test]
fn sctp_and_icmp() {
    let k = key_of(&sample("sctp4"));
    assert_eq!((k.nw_proto, k.tp_src, k.tp_dst), (IPPROTO_SCTP, 5000, 6000));
    let k = key_of(&sample("icmp4"));
    assert_eq!((k.nw_proto, k.tp_src, k.tp_dst), (IPPROTO_ICMP, 8, 0));
    let k = key_of(&sample("sctp6"));
    assert_eq!((k.nw_proto, k.tp_src, k.tp_dst), (IPPROTO_SCTP, 7, 9));
    let k = key_of(&sample("icmp6 echo"));
    assert_eq!((k.nw_proto, k.tp_src, k.tp_dst), (IPPROTO_ICMPV6, 128, 0));
}

#[test]
fn ipv4_fragments_first_and_later() {
    let first = key_of(&sample("ipv4 first fragment"));
    assert_eq!(first.nw_frag, FRAG_ANY);
    assert_eq!((first.tp_src, first.tp_dst), (7, 9));
    let later = key_of(&sample("ipv4 later fragment"));
    assert_eq!(later.nw_frag, FRAG_ANY | FRAG_LATER);
    assert_eq!(
        (later.nw_proto, later.tp_src, later.tp_dst),
        (IPPROTO_UDP, 0, 0)
    );
}

#[test]
fn one_and_two_vlan_tags() {
    let k = key_of(&sample("vlan udp4"));
    assert_eq!((k.vlan_tci, k.inner_vlan_tci), (0x2064 | VLAN_CFI, 0));
    assert_eq!((k.dl_type, k.tp_dst), (EtherType::IPV4, 2));
    let k = key_of(&sample("qinq udp4"));
    assert_eq!(
        (k.vlan_tci, k.inner_vlan_tci),
        (0x0064 | VLAN_CFI, 0x00c8 | VLAN_CFI)
    );
    assert_eq!((k.dl_type, k.tp_src, k.tp_dst), (EtherType::IPV4, 3, 4));
}

#[test]
fn a_stripped_tag_is_the_outer_tag() {
    let plain = sample("udp4");
    let tagged = sample("vlan udp4");
    let mut k = FlowKey::default();
    let tag = VlanTag {
        tpid: EtherType::VLAN,
        tci: 0x2064,
    };
    extract(&plain, 7, Some(tag), &mut k).unwrap();
    assert_eq!(k.vlan_tci, key_of(&tagged).vlan_tci);
    assert_eq!((k.tp_src, k.tp_dst), (1234, 53));
    // The frame's own tag after a stripped one is the inner tag.
    extract(&tagged, 7, Some(tag), &mut k).unwrap();
    assert_eq!(
        (k.vlan_tci, k.inner_vlan_tci),
        (0x2064 | VLAN_CFI, 0x2064 | VLAN_CFI)
    );
}

#[test]
fn ipv6_fields_and_extension_headers() {
    let k = key_of(&sample("udp6"));
    assert_eq!((k.nw_tos, k.label, k.nw_ttl), (0x20, 0xabcde, 64));
    assert_eq!({ k.nw_dst }, V6_DST);
    let k = key_of(&sample("tcp6"));
    assert_eq!(
        (k.nw_proto, k.tp_src, k.tp_dst, k.tcp_flags),
        (IPPROTO_TCP, 5, 6, 2)
    );
    let k = key_of(&sample(
        "tcp6 with hop-by-hop, destination options, first fragment",
    ));
    assert_eq!((k.nw_proto, k.nw_frag), (IPPROTO_TCP, FRAG_ANY));
    assert_eq!((k.tp_src, k.tp_dst, k.tcp_flags), (7, 8, 0x018));
    use crate::wire::ipv6::exthdr;
    assert_eq!(k.ipv6_exthdr, exthdr::HOP | exthdr::DEST | exthdr::FRAG);
    assert_eq!(key_of(&sample("tcp6")).ipv6_exthdr, 0);
    let k = key_of(&sample("ipv6 later fragment"));
    assert_eq!(
        (k.nw_proto, k.nw_frag),
        (IPPROTO_UDP, FRAG_ANY | FRAG_LATER)
    );
    assert_eq!((k.tp_src, k.tp_dst), (0, 0));
}

#[test]
fn an_mpls_packet_gives_its_outermost_entry_and_nothing_behind_it() {
    // A label stack entry in front of a UDP packet, the ethertype made MPLS.
    let udp = sample("udp4");
    let mut f = udp[..ETH_HDR_LEN].to_vec();
    f[12..14].copy_from_slice(&EtherType::MPLS.to_be_bytes());
    f.extend_from_slice(&crate::wire::mpls::entry(1000, 5, true, 63).to_be_bytes());
    f.extend_from_slice(&udp[ETH_HDR_LEN..]);
    let k = key_of(&f);
    assert_eq!(k.dl_type, EtherType::MPLS);
    assert_eq!(k.label, crate::wire::mpls::entry(1000, 5, true, 63));
    // The IP header behind the label is not parsed.
    assert_eq!(({ k.nw_src }, k.nw_proto, k.tp_dst), (0, 0, 0));
    let mut cut = FlowKey::default();
    assert_eq!(
        extract(&f[..ETH_HDR_LEN + 3], 1, None, &mut cut),
        Err(Malformed::ShortMpls)
    );
}

#[test]
fn a_pbb_frame_gives_its_itag_and_nothing_behind_it() {
    // A backbone header and an I-TAG (priority 3, I-SID 100) in front of a
    // customer's UDP frame.
    let customer = sample("udp4");
    let mut f = customer[..12].to_vec();
    f.extend_from_slice(&EtherType::PBB.to_be_bytes());
    f.extend_from_slice(&[0x60, 0, 0, 100]);
    f.extend_from_slice(&customer);
    let k = key_of(&f);
    assert_eq!(k.dl_type, EtherType::PBB);
    assert_eq!(k.label, 0x6000_0064);
    assert_eq!(crate::wire::pbb::isid(k.label), 100);
    assert_eq!(({ k.nw_src }, k.nw_proto, k.tp_dst), (0, 0, 0));
    let mut cut = FlowKey::default();
    assert_eq!(
        extract(&f[..ETH_HDR_LEN + 3], 1, None, &mut cut),
        Err(Malformed::ShortItag)
    );
}

#[test]
fn neighbour_discovery_target_and_link_layer_addresses() {
    let k = key_of(&sample("icmp6 neighbour solicitation"));
    assert_eq!((k.tp_src, k.nd_target), (135, V6_DST));
    assert_eq!((k.arp_sha, k.arp_tha), (SRC_MAC, MacAddr::ZERO));
    let k = key_of(&sample("icmp6 neighbour advertisement"));
    assert_eq!((k.tp_src, k.nd_target), (136, V6_DST));
    assert_eq!((k.arp_sha, k.arp_tha), (MacAddr::ZERO, DST_MAC));
}

#[test]
fn arp_addresses() {
    let k = key_of(&sample("arp request"));
    assert_eq!(k.nw_proto, 1);
    assert_eq!((k.nw_src, k.nw_dst), (0xc612_0001, 0xc612_0002));
    assert_eq!((k.arp_sha, k.arp_tha), (SRC_MAC, MacAddr::ZERO));
    // Reverse ARP has ARP's layout: the same fields.
    let mut rarp = sample("arp request");
    rarp[12..14].copy_from_slice(&EtherType::RARP.to_be_bytes());
    let r = key_of(&rarp);
    assert_eq!(r.dl_type, EtherType::RARP);
    assert_eq!(
        (r.nw_proto, { r.nw_src }, r.arp_sha),
        (1, 0xc612_0001, SRC_MAC)
    );
}

#[test]
fn nsh_fields_take_their_slots() {
    use crate::wire::nsh::{Nsh, MD1_LEN};
    let h = Nsh {
        flags: 1,
        ttl: 40,
        md_type: 1,
        next_proto: 3,
        path: 0x0001_23fe,
        context: [0x11, 0x22, 0x33, 0x44],
    };
    let mut f = sample("arp request")[..12].to_vec();
    f.extend_from_slice(&EtherType::NSH.to_be_bytes());
    f.extend_from_slice(&h.base_bytes(MD1_LEN));
    for c in h.context {
        f.extend_from_slice(&c.to_be_bytes());
    }
    f.extend_from_slice(&sample("arp request"));
    let k = key_of(&f);
    assert_eq!(k.dl_type, EtherType::NSH);
    assert_eq!(k.nsh(), h);
    assert_eq!({ k.label }, 0x0001_23fe);
    // A header vsw does not switch by (version 1) leaves them 0, and is no error.
    f[14] |= 0x40;
    let k = key_of(&f);
    assert_eq!((k.nsh(), k.dl_type), (Nsh::default(), EtherType::NSH));
}

#[test]
fn ethernet_padding_is_not_read_as_payload() {
    // A later-fragment-free IPv4 packet whose total length ends before the frame:
    // the padding after it must not become a TCP header.
    let ip = builder::Ipv4 {
        proto: IPPROTO_TCP,
        ..builder::Ipv4::default()
    };
    let mut f = builder::ethernet(
        DST_MAC,
        SRC_MAC,
        &[],
        EtherType::IPV4,
        &builder::ipv4(&ip, &[]),
    );
    f.extend_from_slice(&[0xff; 26]);
    let k = key_of(&f);
    assert_eq!((k.tp_src, k.tp_dst, k.tcp_flags), (0, 0, 0));
}

#[test]
fn malformed_frames_are_errors_with_what_could_be_parsed() {
    let mut k = FlowKey::default();
    assert_eq!(
        extract(&[0u8; 13], 1, None, &mut k),
        Err(Malformed::ShortFrame)
    );
    assert_eq!(k.in_port, 1);
    let mut f = sample("udp4");
    f[14] = 0x44; // IHL 4: shorter than the fixed header
    assert_eq!(extract(&f, 1, None, &mut k), Err(Malformed::BadIpv4));
    assert_eq!((k.dl_type, k.dl_src), (EtherType::IPV4, SRC_MAC));
    let f = sample("udp6");
    assert_eq!(extract(&f[..40], 1, None, &mut k), Err(Malformed::BadIpv6));
    let f = sample("tcp6 with hop-by-hop, destination options, first fragment");
    // Cut inside the destination-options header.
    assert_eq!(
        extract(&f[..14 + 40 + 8 + 10], 1, None, &mut k),
        Err(Malformed::BadIpv6)
    );
    assert_eq!({ k.nw_dst }, V6_DST);
    let f = sample("arp request");
    assert_eq!(
        extract(&f[..14 + 20], 1, None, &mut k),
        Err(Malformed::BadArp)
    );
}

#[test]
fn an_endless_extension_chain_stops() {
    let mut chain = builder::udp(1, 2, &[]);
    for _ in 0..20 {
        chain = builder::ipv6_option_header(60, 0, &chain);
    }
    let ip = builder::Ipv6 {
        next: 60,
        ..builder::Ipv6::default()
    };
    let f = builder::ethernet(
        DST_MAC,
        SRC_MAC,
        &[],
        EtherType::IPV6,
        &builder::ipv6(&ip, &chain),
    );
    let k = key_of(&f);
    // Gives up after MAX_IPV6_EXTENSIONS headers, with the protocol it got to.
    assert_eq!((k.nw_proto, k.tp_src), (60, 0));
}

/// Every byte of `part` is 0 or the same as in `full`: a truncated frame's key holds
/// only what the whole frame's key holds.
fn is_part_of(part: &FlowKey, full: &FlowKey) -> bool {
    let (p, f) = (bytemuck::bytes_of(part), bytemuck::bytes_of(full));
    p.iter().zip(f).all(|(p, f)| *p == 0 || p == f)
}

#[test]
fn truncation_at_every_offset_of_every_protocol() {
    for (name, frame) in samples() {
        let full = key_of(&frame);
        for cut in 0..frame.len() {
            let mut k = FlowKey::default();
            let r = extract(&frame[..cut], 7, None, &mut k);
            assert!(
                is_part_of(&k, &full),
                "{name} cut at {cut}: {k:?} has fields the whole frame's key {full:?} lacks"
            );
            if cut < ETH_HDR_LEN {
                assert_eq!(r, Err(Malformed::ShortFrame), "{name} cut at {cut}");
            }
        }
    }
}

proptest! {
    #[test]
    fn never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..200), port in any::<u32>()) {
        let mut k = FlowKey::default();
        let _ = extract(&bytes, port, None, &mut k);
        let _ = extract(&bytes, port, Some(VlanTag { tpid: EtherType::VLAN, tci: 5 }), &mut k);
        prop_assert_eq!(k.in_port, port);
    }
}

/// The select-group hash reads what Open vSwitch's `sym_l4` reads: packets that
/// differ only in their MAC addresses, in ARP's addresses, in IP addresses or in
/// ports hash apart; fields it does not read (TTL, TOS, the input port) do not
/// move it.
#[test]
fn the_l4_hash_reads_addresses_and_ports_and_nothing_else() {
    let udp = key_of(&sample("udp4"));
    let arp = key_of(&sample("arp request"));
    let spread = |base: FlowKey, vary: &dyn Fn(&mut FlowKey, u8)| {
        (0..64u8)
            .map(|i| {
                let mut k = base;
                vary(&mut k, i);
                l4_hash(&k) & 3
            })
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    assert_eq!(
        spread(udp, &|k, i| k.dl_src = MacAddr([2, 0, 0, 0, 0, i])),
        4
    );
    assert_eq!(
        spread(udp, &|k, i| k.dl_dst = MacAddr([2, 0, 0, 0, i, 1])),
        4
    );
    assert_eq!(spread(udp, &|k, i| k.tp_src = u16::from(i)), 4);
    assert_eq!(spread(udp, &|k, i| k.nw_dst = u128::from(i)), 4);
    assert_eq!(spread(arp, &|k, i| k.nw_src = u128::from(i)), 4);
    assert_eq!(spread(udp, &|k, i| k.nw_ttl = i), 1);
    assert_eq!(spread(udp, &|k, i| k.nw_tos = i), 1);
    assert_eq!(spread(udp, &|k, i| k.in_port = u32::from(i)), 1);
}

proptest! {
    /// What the hash reads is all in its mask: a key cut to the mask hashes as
    /// the whole key does (a flow that matched less would hash packets apart).
    #[test]
    fn the_l4_hash_reads_only_what_its_mask_says(
        words in any::<[u64; KEY_WORDS]>(),
        dl_type in prop_oneof![
            Just(EtherType::IPV4), Just(EtherType::IPV6), Just(EtherType::ARP),
            Just(EtherType::RARP), any::<u16>()
        ],
        nw_proto in prop_oneof![Just(IPPROTO_TCP), Just(IPPROTO_UDP), Just(IPPROTO_SCTP), any::<u8>()],
    ) {
        let mut k: FlowKey = bytemuck::cast(words);
        k.dl_type = dl_type;
        k.nw_proto = nw_proto;
        let cut = k.masked(&l4_hash_mask(&k));
        prop_assert_eq!(l4_hash(&cut), l4_hash(&k));
        prop_assert_eq!(l4_hash_mask(&cut), l4_hash_mask(&k));
    }
}
