//! Flow-key extraction: one pass over a frame's headers into the fields rules match on.

use crate::ethernet::{EtherType, VlanTag, ETH_HDR_LEN};
use crate::mac::MacAddr;

pub const IPPROTO_HOPOPTS: u8 = 0;
pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_ROUTING: u8 = 43;
pub const IPPROTO_FRAGMENT: u8 = 44;
pub const IPPROTO_AH: u8 = 51;
pub const IPPROTO_ICMPV6: u8 = 58;
pub const IPPROTO_DSTOPTS: u8 = 60;
pub const IPPROTO_SCTP: u8 = 132;

/// ICMPv6 neighbour solicitation and advertisement (RFC 4861).
pub const ND_NEIGHBOR_SOLICIT: u8 = 135;
pub const ND_NEIGHBOR_ADVERT: u8 = 136;

/// The OpenFlow "CFI" bit: set in `vlan_tci` when the frame carries a tag, so that
/// VID 0 with a tag differs from no tag at all.
pub const VLAN_CFI: u16 = 0x1000;

/// `nw_frag` bits: the packet is a fragment; it is a fragment other than the first.
pub const FRAG_ANY: u8 = 1;
pub const FRAG_LATER: u8 = 2;

/// How many IPv6 extension headers are followed before giving up: enough for any
/// real packet, few enough that a crafted chain cannot make a lookup expensive.
const MAX_IPV6_EXTENSIONS: usize = 8;

/// Words of a [`FlowKey`]: the classifier and the exact-match cache mask, hash and
/// compare keys as this many `u64`s.
pub const KEY_WORDS: usize = 12;

/// What a rule can match on, laid out without padding so that it can be read as
/// [`KEY_WORDS`] machine words ([`FlowKey::words`]).
///
/// Addresses are `u128` so that IPv4 and IPv6 share one field; `dl_type` says which.
/// As in OpenFlow: for ARP, `nw_src`/`nw_dst` are the sender/target protocol
/// addresses, `nw_proto` the opcode (low 8 bits) and `arp_sha`/`arp_tha` the hardware
/// addresses; for ICMP and ICMPv6, `tp_src`/`tp_dst` are the type and code; for IPv6
/// neighbour discovery, `arp_sha`/`arp_tha` hold the source/target link-layer
/// address options and `nd_target` the target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct FlowKey {
    pub nw_src: u128,
    pub nw_dst: u128,
    pub nd_target: u128,
    pub in_port: u32,
    /// The IPv6 flow label (20 bits).
    pub ipv6_label: u32,
    pub dl_src: MacAddr,
    pub dl_dst: MacAddr,
    pub arp_sha: MacAddr,
    pub arp_tha: MacAddr,
    /// TCI of the outer tag with [`VLAN_CFI`] set, or 0 without a tag.
    pub vlan_tci: u16,
    /// TCI of the inner tag of a double-tagged (802.1ad) frame, with [`VLAN_CFI`].
    pub inner_vlan_tci: u16,
    /// The ethertype after the tags.
    pub dl_type: u16,
    pub tp_src: u16,
    pub tp_dst: u16,
    /// TCP flags (12 bits).
    pub tcp_flags: u16,
    pub nw_proto: u8,
    /// The IPv4 TOS byte or IPv6 traffic class: DSCP in the upper 6 bits, ECN below.
    pub nw_tos: u8,
    pub nw_ttl: u8,
    /// [`FRAG_ANY`] | [`FRAG_LATER`].
    pub nw_frag: u8,
}

// A member added to the key must keep it whole words: checked when compiling rather
// than when the first packet is cast.
const _: () = assert!(std::mem::size_of::<FlowKey>() == KEY_WORDS * 8);
const _: () = assert!(std::mem::align_of::<FlowKey>() >= std::mem::align_of::<u64>());

impl FlowKey {
    /// The key as machine words, for masking, hashing and comparing.
    #[inline]
    pub fn words(&self) -> &[u64; KEY_WORDS] {
        bytemuck::cast_ref(self)
    }

    #[inline]
    pub fn words_mut(&mut self) -> &mut [u64; KEY_WORDS] {
        bytemuck::cast_mut(self)
    }

    /// The key with only the bits of `mask` kept.
    #[inline]
    pub fn masked(&self, mask: &FlowKey) -> FlowKey {
        let mut out = *self;
        for (o, m) in out.words_mut().iter_mut().zip(mask.words()) {
            *o &= m;
        }
        out
    }
}

/// Odd multipliers, one per word position (from the digits of pi).
const HASH_K: [u64; KEY_WORDS] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7345,
    0xa409_3822_299f_31d1,
    0x082e_fa98_ec4e_6c89,
    0x4528_21e6_38d0_1377,
    0xbe54_66cf_34e9_0c6d,
    0xc0ac_29b7_c97c_50dd,
    0x3f84_d5b5_b547_0917,
    0x9216_d5d9_8979_fb1b,
    0xd131_0ba6_98df_b5ad,
    0x2ffd_72db_d01a_dfb7,
    0xb8e1_afed_6a26_7e97,
];

/// Hash of the first `n` words of a key (the exact-match cache and the classifier's
/// subtables use it). Each word is multiplied by its own constant and the products
/// summed, so the multiplications run side by side instead of one after another; the
/// finishing mix carries every input bit into the high bits that hash tables use as
/// tags (keys that differ only in the upper bits of a word, where the transport ports
/// sit, must not share a tag).
#[inline]
pub fn hash_words(words: &[u64; KEY_WORDS], n: usize) -> u64 {
    let mut acc = 0u64;
    for (w, k) in words.iter().zip(HASH_K).take(n) {
        acc = acc.wrapping_add(w.wrapping_mul(k));
    }
    let h = (acc ^ (acc >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
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
    #[error("truncated IPv6 header or extension header")]
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

/// Extracts the flow key of `frame` received on `in_port` into `key`. `stripped` is a
/// VLAN tag the receiving device already took out of the frame.
///
/// `key` always ends up with every field that could be parsed (the rest zero), and
/// nothing past the frame's end is read. A frame whose L2 or L3 header is cut short
/// or inconsistent is also `Malformed`: the datapath counts and drops it. A short L4
/// header is not an error: the ports stay zero, as for a later fragment.
pub fn extract(
    frame: &[u8],
    in_port: u32,
    stripped: Option<VlanTag>,
    key: &mut FlowKey,
) -> Result<(), Malformed> {
    *key = FlowKey {
        in_port,
        ..FlowKey::default()
    };
    if frame.len() < ETH_HDR_LEN {
        return Err(Malformed::ShortFrame);
    }
    key.dl_dst = MacAddr::from_slice(&frame[0..6]).unwrap_or_default();
    key.dl_src = MacAddr::from_slice(&frame[6..12]).unwrap_or_default();
    let mut ethertype = be16(frame, 12).ok_or(Malformed::ShortFrame)?;
    let mut off = ETH_HDR_LEN;
    let mut tags = 0;
    if let Some(tag) = stripped {
        key.vlan_tci = tag.tci | VLAN_CFI;
        tags = 1;
    }
    // Up to two tags (802.1ad outer + 802.1Q inner); a third stays in the payload.
    while (ethertype == EtherType::VLAN || ethertype == EtherType::QINQ) && tags < 2 {
        let tci = be16(frame, off).ok_or(Malformed::ShortVlan)? | VLAN_CFI;
        if tags == 0 {
            key.vlan_tci = tci;
        } else {
            key.inner_vlan_tci = tci;
        }
        ethertype = be16(frame, off + 2).ok_or(Malformed::ShortVlan)?;
        off += 4;
        tags += 1;
    }
    key.dl_type = ethertype;
    let l3 = &frame[off..];
    match ethertype {
        EtherType::IPV4 => extract_ipv4(key, l3),
        EtherType::IPV6 => extract_ipv6(key, l3),
        EtherType::ARP => extract_arp(key, l3),
        _ => Ok(()),
    }
}

fn extract_ipv4(key: &mut FlowKey, l3: &[u8]) -> Result<(), Malformed> {
    let vihl = *l3.first().ok_or(Malformed::BadIpv4)?;
    let ihl = usize::from(vihl & 0x0f) * 4;
    if vihl >> 4 != 4 || ihl < 20 || l3.len() < ihl {
        return Err(Malformed::BadIpv4);
    }
    key.nw_src = u128::from(be32(l3, 12).ok_or(Malformed::BadIpv4)?);
    key.nw_dst = u128::from(be32(l3, 16).ok_or(Malformed::BadIpv4)?);
    key.nw_proto = l3[9];
    key.nw_tos = l3[1];
    key.nw_ttl = l3[8];
    let total = usize::from(be16(l3, 2).ok_or(Malformed::BadIpv4)?);
    if total < ihl {
        return Err(Malformed::BadIpv4);
    }
    let frag = be16(l3, 6).ok_or(Malformed::BadIpv4)?;
    let (more, offset) = (frag & 0x2000 != 0, frag & 0x1fff);
    if more || offset != 0 {
        key.nw_frag = FRAG_ANY | if offset != 0 { FRAG_LATER } else { 0 };
    }
    // Ethernet pads short frames: the payload ends where the IP header says. A frame
    // shorter than that was cut off on the way: its L4 header is not trusted.
    if offset == 0 && total <= l3.len() {
        extract_l4(key, &l3[ihl..total]);
    }
    Ok(())
}

fn extract_ipv6(key: &mut FlowKey, l3: &[u8]) -> Result<(), Malformed> {
    if l3.len() < 40 || l3[0] >> 4 != 6 {
        return Err(Malformed::BadIpv6);
    }
    let word0 = be32(l3, 0).ok_or(Malformed::BadIpv6)?;
    key.nw_tos = (word0 >> 20) as u8;
    key.ipv6_label = word0 & 0x000f_ffff;
    key.nw_ttl = l3[7];
    key.nw_src = be128(l3, 8).ok_or(Malformed::BadIpv6)?;
    key.nw_dst = be128(l3, 24).ok_or(Malformed::BadIpv6)?;
    // A payload length of 0 is a jumbogram (or a TSO super-frame): the frame's end is
    // the packet's end.
    let payload = usize::from(be16(l3, 4).ok_or(Malformed::BadIpv6)?);
    let end = if payload == 0 {
        l3.len()
    } else {
        (40 + payload).min(l3.len())
    };
    let l3 = &l3[..end];
    let mut next = l3[6];
    let mut off = 40;
    for _ in 0..MAX_IPV6_EXTENSIONS {
        let len = match next {
            IPPROTO_HOPOPTS | IPPROTO_ROUTING | IPPROTO_DSTOPTS => {
                (usize::from(*l3.get(off + 1).ok_or(Malformed::BadIpv6)?) + 1) * 8
            }
            IPPROTO_AH => (usize::from(*l3.get(off + 1).ok_or(Malformed::BadIpv6)?) + 2) * 4,
            IPPROTO_FRAGMENT => {
                let field = be16(l3, off + 2).ok_or(Malformed::BadIpv6)?;
                let (offset, more) = (field & 0xfff8, field & 1 != 0);
                if offset != 0 || more {
                    key.nw_frag = FRAG_ANY | if offset != 0 { FRAG_LATER } else { 0 };
                }
                if offset != 0 {
                    // A later fragment carries no L4 header; its protocol is still known.
                    key.nw_proto = l3[off];
                    return Ok(());
                }
                8
            }
            _ => break,
        };
        if off + len > l3.len() {
            return Err(Malformed::BadIpv6);
        }
        next = l3[off];
        off += len;
    }
    key.nw_proto = next;
    extract_l4(key, &l3[off..]);
    Ok(())
}

fn extract_arp(key: &mut FlowKey, l3: &[u8]) -> Result<(), Malformed> {
    let op = be16(l3, 6).ok_or(Malformed::BadArp)?;
    key.nw_proto = op.min(255) as u8;
    // Ethernet/IPv4 ARP is 28 bytes; other hardware types keep only the opcode.
    if be16(l3, 0) == Some(1) && be16(l3, 2) == Some(EtherType::IPV4) {
        if l3.len() < 28 {
            return Err(Malformed::BadArp);
        }
        key.arp_sha = MacAddr::from_slice(&l3[8..14]).unwrap_or_default();
        key.nw_src = u128::from(be32(l3, 14).ok_or(Malformed::BadArp)?);
        key.arp_tha = MacAddr::from_slice(&l3[18..24]).unwrap_or_default();
        key.nw_dst = u128::from(be32(l3, 24).ok_or(Malformed::BadArp)?);
    }
    Ok(())
}

fn extract_l4(key: &mut FlowKey, l4: &[u8]) {
    match key.nw_proto {
        IPPROTO_TCP => {
            if let (Some(s), Some(d), Some(f)) = (be16(l4, 0), be16(l4, 2), be16(l4, 12)) {
                key.tp_src = s;
                key.tp_dst = d;
                key.tcp_flags = f & 0x0fff;
            }
        }
        IPPROTO_UDP | IPPROTO_SCTP => {
            if let (Some(s), Some(d)) = (be16(l4, 0), be16(l4, 2)) {
                key.tp_src = s;
                key.tp_dst = d;
            }
        }
        IPPROTO_ICMP => {
            if let (Some(t), Some(c)) = (l4.first(), l4.get(1)) {
                key.tp_src = u16::from(*t);
                key.tp_dst = u16::from(*c);
            }
        }
        IPPROTO_ICMPV6 => {
            if let (Some(&t), Some(&c)) = (l4.first(), l4.get(1)) {
                key.tp_src = u16::from(t);
                key.tp_dst = u16::from(c);
                if c == 0 && (t == ND_NEIGHBOR_SOLICIT || t == ND_NEIGHBOR_ADVERT) {
                    extract_nd(key, t, l4);
                }
            }
        }
        _ => {}
    }
}

/// Neighbour discovery: the target address and the link-layer address option that
/// goes with the message (source for a solicitation, target for an advertisement).
fn extract_nd(key: &mut FlowKey, icmp_type: u8, l4: &[u8]) {
    let Some(target) = be128(l4, 8) else {
        return;
    };
    key.nd_target = target;
    let mut opts = &l4[24..];
    while opts.len() >= 8 {
        let (kind, len) = (opts[0], usize::from(opts[1]) * 8);
        if len == 0 || len > opts.len() {
            // An option of length 0 or past the end: RFC 4861 says drop the message;
            // the key keeps what was valid before it.
            return;
        }
        if len == 8 {
            let mac = MacAddr::from_slice(&opts[2..8]).unwrap_or_default();
            match (kind, icmp_type) {
                (1, ND_NEIGHBOR_SOLICIT) => key.arp_sha = mac,
                (2, ND_NEIGHBOR_ADVERT) => key.arp_tha = mac,
                _ => {}
            }
        }
        opts = &opts[len..];
    }
}

#[cfg(test)]
pub(crate) mod tests;
