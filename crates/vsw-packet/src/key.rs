//! Flow-key extraction: one pass over a frame's headers into the fields rules match on.

use crate::ethernet::{EtherType, VlanTag, ETH_HDR_LEN};
use crate::mac::MacAddr;

pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_ICMPV6: u8 = 58;
pub const IPPROTO_SCTP: u8 = 132;

/// The OpenFlow "CFI" bit: set in `vlan_tci` when the frame carries a tag, so that
/// VID 0 with a tag differs from no tag at all.
pub const VLAN_CFI: u16 = 0x1000;

/// What a rule can match on. Addresses are kept as `u128` so that IPv4 and IPv6
/// share one field; `dl_type` says which it is. For ARP, `nw_src`/`nw_dst` are the
/// sender/target protocol addresses and `nw_proto` the opcode (as in OpenFlow); for
/// ICMP, `tp_src`/`tp_dst` are the type and code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub in_port: u32,
    pub dl_src: MacAddr,
    pub dl_dst: MacAddr,
    /// TCI of the outer tag with [`VLAN_CFI`] set, or 0 without a tag.
    pub vlan_tci: u16,
    pub dl_type: u16,
    pub nw_src: u128,
    pub nw_dst: u128,
    pub nw_proto: u8,
    pub tp_src: u16,
    pub tp_dst: u16,
}

/// Why a frame cannot be switched at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("frame shorter than an Ethernet header")]
    ShortFrame,
    #[error("truncated VLAN tag")]
    ShortVlan,
    #[error("truncated or inconsistent IPv4 header")]
    BadIpv4,
    #[error("truncated IPv6 header")]
    BadIpv6,
    #[error("truncated ARP packet")]
    BadArp,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be128(b: &[u8], at: usize) -> Option<u128> {
    Some(u128::from_be_bytes(b.get(at..at + 16)?.try_into().ok()?))
}

/// Extracts the flow key of `frame` received on `in_port`. `stripped` is a VLAN tag
/// the receiving device already took out of the frame.
///
/// A frame whose L2 or L3 header is cut short or inconsistent is `Malformed`: the
/// datapath counts and drops it. A short L4 header leaves the ports at zero (the
/// frame is a fragment or carries options vsw does not interpret).
pub fn extract(
    frame: &[u8],
    in_port: u32,
    stripped: Option<VlanTag>,
) -> Result<FlowKey, Malformed> {
    if frame.len() < ETH_HDR_LEN {
        return Err(Malformed::ShortFrame);
    }
    let mut key = FlowKey {
        in_port,
        dl_dst: MacAddr::from_slice(&frame[0..6]).unwrap_or_default(),
        dl_src: MacAddr::from_slice(&frame[6..12]).unwrap_or_default(),
        ..FlowKey::default()
    };
    let mut ethertype = be16(frame, 12).ok_or(Malformed::ShortFrame)?;
    let mut off = ETH_HDR_LEN;
    if let Some(tag) = stripped {
        key.vlan_tci = tag.tci | VLAN_CFI;
    }
    // Up to two tags (802.1ad outer + 802.1Q inner); the key keeps the outer one.
    let mut tags = 0;
    while (ethertype == EtherType::VLAN || ethertype == EtherType::QINQ) && tags < 2 {
        let tci = be16(frame, off).ok_or(Malformed::ShortVlan)?;
        if key.vlan_tci == 0 {
            key.vlan_tci = tci | VLAN_CFI;
        }
        ethertype = be16(frame, off + 2).ok_or(Malformed::ShortVlan)?;
        off += 4;
        tags += 1;
    }
    key.dl_type = ethertype;
    let l3 = &frame[off..];
    match ethertype {
        EtherType::IPV4 => {
            let vihl = *l3.first().ok_or(Malformed::BadIpv4)?;
            let ihl = usize::from(vihl & 0x0f) * 4;
            if vihl >> 4 != 4 || ihl < 20 || l3.len() < ihl {
                return Err(Malformed::BadIpv4);
            }
            let total = usize::from(be16(l3, 2).ok_or(Malformed::BadIpv4)?);
            if total < ihl {
                return Err(Malformed::BadIpv4);
            }
            key.nw_proto = l3[9];
            key.nw_src = u128::from(be32(l3, 12).ok_or(Malformed::BadIpv4)?);
            key.nw_dst = u128::from(be32(l3, 16).ok_or(Malformed::BadIpv4)?);
            let frag = be16(l3, 6).ok_or(Malformed::BadIpv4)?;
            let later_fragment = frag & 0x1fff != 0;
            if !later_fragment {
                extract_l4(&mut key, &l3[ihl..]);
            }
        }
        EtherType::IPV6 => {
            if l3.len() < 40 || l3[0] >> 4 != 6 {
                return Err(Malformed::BadIpv6);
            }
            key.nw_proto = l3[6];
            key.nw_src = be128(l3, 8).ok_or(Malformed::BadIpv6)?;
            key.nw_dst = be128(l3, 24).ok_or(Malformed::BadIpv6)?;
            extract_l4(&mut key, &l3[40..]);
        }
        EtherType::ARP => {
            // Ethernet/IPv4 ARP is 28 bytes; other hardware types keep only the opcode.
            let op = be16(l3, 6).ok_or(Malformed::BadArp)?;
            key.nw_proto = op.min(255) as u8;
            if be16(l3, 0) == Some(1) && be16(l3, 2) == Some(EtherType::IPV4) {
                key.nw_src = u128::from(be32(l3, 14).ok_or(Malformed::BadArp)?);
                key.nw_dst = u128::from(be32(l3, 24).ok_or(Malformed::BadArp)?);
            }
        }
        _ => {}
    }
    Ok(key)
}

fn extract_l4(key: &mut FlowKey, l4: &[u8]) {
    match key.nw_proto {
        IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP => {
            if let (Some(s), Some(d)) = (be16(l4, 0), be16(l4, 2)) {
                key.tp_src = s;
                key.tp_dst = d;
            }
        }
        IPPROTO_ICMP | IPPROTO_ICMPV6 => {
            if let (Some(t), Some(c)) = (l4.first(), l4.get(1)) {
                key.tp_src = u16::from(*t);
                key.tp_dst = u16::from(*c);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    pub fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 4];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&EtherType::IPV4.to_be_bytes());
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&32u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = IPPROTO_UDP;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn udp_over_ipv4() {
        let f = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1234, 53);
        let k = extract(&f, 7, None).unwrap();
        assert_eq!(k.in_port, 7);
        assert_eq!(k.dl_type, EtherType::IPV4);
        assert_eq!(k.nw_src, 0xc612_0001);
        assert_eq!(k.nw_dst, 0xc612_0002);
        assert_eq!(k.nw_proto, IPPROTO_UDP);
        assert_eq!((k.tp_src, k.tp_dst), (1234, 53));
        assert_eq!(k.dl_src.to_string(), "02:00:00:00:00:01");
        assert_eq!(k.vlan_tci, 0);
    }

    #[test]
    fn vlan_in_frame_and_stripped() {
        let plain = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2);
        let mut tagged = plain[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
        tagged.extend_from_slice(&plain[12..]);
        let k = extract(&tagged, 1, None).unwrap();
        assert_eq!(k.vlan_tci, 10 | VLAN_CFI);
        assert_eq!(k.tp_dst, 2);
        let k2 = extract(
            &plain,
            1,
            Some(VlanTag {
                tpid: EtherType::VLAN,
                tci: 10,
            }),
        )
        .unwrap();
        assert_eq!(k, k2);
    }

    #[test]
    fn later_fragment_has_no_ports() {
        let mut f = udp4([198, 18, 0, 1], [198, 18, 0, 2], 1, 2);
        f[14 + 6..14 + 8].copy_from_slice(&100u16.to_be_bytes());
        let k = extract(&f, 1, None).unwrap();
        assert_eq!((k.tp_src, k.tp_dst), (0, 0));
        assert_eq!(k.nw_proto, IPPROTO_UDP);
    }

    #[test]
    fn arp_request() {
        let mut f = vec![0u8; 42];
        f[0..6].copy_from_slice(&[0xff; 6]);
        f[12..14].copy_from_slice(&EtherType::ARP.to_be_bytes());
        let a = &mut f[14..];
        a[0..2].copy_from_slice(&1u16.to_be_bytes());
        a[2..4].copy_from_slice(&EtherType::IPV4.to_be_bytes());
        a[4] = 6;
        a[5] = 4;
        a[6..8].copy_from_slice(&1u16.to_be_bytes());
        a[14..18].copy_from_slice(&[198, 18, 0, 1]);
        a[24..28].copy_from_slice(&[198, 18, 0, 2]);
        let k = extract(&f, 1, None).unwrap();
        assert_eq!(k.nw_proto, 1);
        assert_eq!(k.nw_src, 0xc612_0001);
        assert_eq!(k.nw_dst, 0xc612_0002);
    }

    #[test]
    fn malformed_frames() {
        assert_eq!(extract(&[0u8; 13], 1, None), Err(Malformed::ShortFrame));
        let mut f = udp4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2);
        f[14] = 0x44; // IHL 4: shorter than the fixed header
        assert_eq!(extract(&f, 1, None), Err(Malformed::BadIpv4));
        let f = udp4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2);
        assert_eq!(extract(&f[..20], 1, None), Err(Malformed::BadIpv4));
        let mut v6 = f[..14].to_vec();
        v6[12..14].copy_from_slice(&EtherType::IPV6.to_be_bytes());
        v6.extend_from_slice(&[0x60; 20]);
        assert_eq!(extract(&v6, 1, None), Err(Malformed::BadIpv6));
    }

    proptest! {
        #[test]
        fn never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..200), port in any::<u32>()) {
            let _ = extract(&bytes, port, None);
            let _ = extract(&bytes, port, Some(VlanTag { tpid: EtherType::VLAN, tci: 5 }));
        }

        #[test]
        fn truncation_never_panics(cut in 0usize..46) {
            let f = udp4([198, 18, 0, 1], [198, 18, 0, 2], 9, 10);
            let _ = extract(&f[..cut], 1, None);
        }
    }
}
