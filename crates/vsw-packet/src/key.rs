//! Flow-key extraction: one pass over a frame's headers into the fields rules match on.

use crate::mac::MacAddr;
use crate::wire::ethernet::{self, EtherType, VlanTag, MAX_TAGS};
use crate::wire::icmp::{self, ND_OPT_SOURCE_LLADDR, ND_OPT_TARGET_LLADDR};
use crate::wire::{arp, ipv4, ipv6, mpls, nsh, pbb, tcp, udp};

pub use crate::wire::icmp::{ND_NEIGHBOR_ADVERT, ND_NEIGHBOR_SOLICIT};
pub use crate::wire::ip::{
    IPPROTO_AH, IPPROTO_DSTOPTS, IPPROTO_FRAGMENT, IPPROTO_HOPOPTS, IPPROTO_ICMP, IPPROTO_ICMPV6,
    IPPROTO_IGMP, IPPROTO_ROUTING, IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP,
};

/// The OpenFlow "CFI" bit: set in `vlan_tci` when the frame carries a tag, so that
/// VID 0 with a tag differs from no tag at all.
pub const VLAN_CFI: u16 = 0x1000;

/// `tun_flags` bit: the packet came in as a tunnel's control (OAM) packet.
pub const TUN_FLAG_OAM: u16 = 1;

/// NSH (`dl_type` 0x894f) has no addresses, so its fields take their slots: the
/// base header's flags, TTL, MD type and next protocol in `nw_dst`'s low 32 bits
/// (shifted by these), the service path (SPI and SI, as on the wire) in `label`,
/// and the MD type 1 context C1–C4 in `nw_src` (C1 the most significant word).
pub const NSH_FLAGS_SHIFT: u32 = 24;
pub const NSH_TTL_SHIFT: u32 = 16;
pub const NSH_MDTYPE_SHIFT: u32 = 8;
pub const NSH_NP_SHIFT: u32 = 0;

/// `nw_frag` bits: the packet is a fragment; it is a fragment other than the first.
pub const FRAG_ANY: u8 = 1;
pub const FRAG_LATER: u8 = 2;

/// How many IPv6 extension headers are followed before giving up: enough for any
/// real packet, few enough that a crafted chain cannot make a lookup expensive.
const MAX_IPV6_EXTENSIONS: usize = 8;

/// Words of a [`FlowKey`]: the classifier and the exact-match cache mask, hash and
/// compare keys as this many `u64`s.
pub const KEY_WORDS: usize = 26;

/// The words before the ones few flows match (the label slot and `dp_hash`, and
/// the connection tracker's fields): what most lookups pack, hash and compare.
pub const COMMON_WORDS: usize = 16;

/// What a rule can match on, laid out without padding so that it can be read as
/// [`KEY_WORDS`] machine words ([`FlowKey::words`]).
///
/// Addresses are `u128` so that IPv4 and IPv6 share one field; `dl_type` says which.
/// As in OpenFlow: for ARP, `nw_src`/`nw_dst` are the sender/target protocol
/// addresses, `nw_proto` the opcode (low 8 bits) and `arp_sha`/`arp_tha` the hardware
/// addresses; for ICMP, ICMPv6 and IGMP, `tp_src`/`tp_dst` are the type and code; for IPv6
/// neighbour discovery, `arp_sha`/`arp_tha` hold the source/target link-layer
/// address options and `nd_target` the target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
// Aligned at 8 rather than the u128s' 16: a 16-byte alignment would pad the key to
// 16 words, one more for every lookup to mask, hash and compare. Fields are read and
// written by value (the compiler refuses a reference to an unaligned u128 field).
#[repr(C, packed(8))]
pub struct FlowKey {
    pub nw_src: u128,
    pub nw_dst: u128,
    pub nd_target: u128,
    /// OpenFlow's metadata: 0 for every packet, written by rules (`write_metadata`)
    /// for the tables after them; never read from a packet.
    pub metadata: u64,
    /// The tunnel key (VNI) a packet came in with; 0 for a packet that came in on
    /// no tunnel.
    pub tun_id: u64,
    /// The outer IPv4 source and destination of the tunnel packet it came in with
    /// (`tun_src`, `tun_dst`); 0 for a packet that came in on no tunnel, or on one
    /// over IPv6 (Open vSwitch's `tun_ipv6_src`/`_dst`, which vsw does not match).
    pub tun_src: u32,
    pub tun_dst: u32,
    /// The value of the Geneve option the switch's TLV map names `tun_metadata0`
    /// (up to 4 bytes, as a big-endian number); 0 when the packet carried none.
    pub tun_metadata0: u32,
    /// The tunnel's flags the rules may match (`tun_flags`): [`TUN_FLAG_OAM`], the
    /// Geneve O bit, as in Open vSwitch (16 bits, as NXM_NX_TUN_FLAGS).
    pub tun_flags: u16,
    /// IPv6: which extension headers the packet has, as OpenFlow's `ipv6_exthdr`
    /// bits ([`crate::wire::ipv6::exthdr`]); 0 for every other packet.
    pub ipv6_exthdr: u16,
    pub in_port: u32,
    /// Which recirculation this pass of the packet is: 0 as it arrives, the number
    /// a `recirc` datapath action gave it on each later pass (what the slow path
    /// froze there). Beside `in_port` because every datapath flow matches both
    /// exactly: the word after them is looked at only by flows that need it.
    pub recirc_id: u32,
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
    /// IPv6: the flow label (20 bits). MPLS (`dl_type` 0x8847 or 0x8848): the
    /// outermost label stack entry as on the wire (label, TC, bottom of stack, TTL:
    /// [`crate::wire::mpls`]), the only MPLS header the key holds. PBB (`dl_type`
    /// 0x88e7): the I-TAG as on the wire ([`crate::wire::pbb`]), the I-SID in its
    /// low 24 bits. NSH (0x894f): the service path header ([`NSH_FLAGS_SHIFT`]).
    /// One slot for all four: a packet is one of them, and `dl_type` is in every
    /// match.
    pub label: u32,
    /// The hash a `hash` datapath action computed of the packet (its addresses and
    /// ports) before a recirculation; 0 until then. A select group's buckets are
    /// chosen by its low bits on the next pass.
    pub dp_hash: u32,
    /// What the connection tracker said of the packet at its last `ct` action (Open
    /// vSwitch's `ct_*` fields, carried to the pass after it): the connection's mark,
    /// its zone, `ct_state`'s bits, its original direction's protocol, and its
    /// label. All 0 for a packet no `ct` has seen.
    pub ct_mark: u32,
    pub ct_zone: u16,
    pub ct_state: u8,
    pub ct_nw_proto: u8,
    pub ct_label: u128,
    /// The connection's original direction (`ct_nw_src`, … `ct_tp_dst`): its
    /// addresses (IPv4's or IPv6's, the other family's 0) and ports (ICMP's type
    /// and code, as Open vSwitch has them). Last, past the words most flows
    /// match, which datapath flows that match none of them do not look at.
    pub ct_ipv6_src: u128,
    pub ct_ipv6_dst: u128,
    pub ct_nw_src: u32,
    pub ct_nw_dst: u32,
    pub ct_tp_src: u16,
    pub ct_tp_dst: u16,
    pub ct_pad: u32,
}

// A member added to the key must keep it whole words: checked when compiling rather
// than when the first packet is cast.
const _: () = assert!(std::mem::size_of::<FlowKey>() == KEY_WORDS * 8);
const _: () = assert!(std::mem::align_of::<FlowKey>() >= std::mem::align_of::<u64>());

impl FlowKey {
    /// Puts an NSH header's fields in their slots ([`NSH_FLAGS_SHIFT`]).
    pub fn set_nsh(&mut self, h: &nsh::Nsh) {
        self.nw_dst = u128::from(
            u32::from(h.flags) << NSH_FLAGS_SHIFT
                | u32::from(h.ttl) << NSH_TTL_SHIFT
                | u32::from(h.md_type) << NSH_MDTYPE_SHIFT
                | u32::from(h.next_proto) << NSH_NP_SHIFT,
        );
        self.label = h.path;
        self.nw_src = h
            .context
            .iter()
            .fold(0u128, |acc, c| acc << 32 | u128::from(*c));
    }

    /// The NSH header's fields, from their slots.
    pub fn nsh(&self) -> nsh::Nsh {
        let base = self.nw_dst as u32;
        let byte = |shift: u32| (base >> shift) as u8;
        let mut context = [0u32; 4];
        for (i, c) in context.iter_mut().enumerate() {
            *c = (self.nw_src >> (96 - 32 * i)) as u32;
        }
        nsh::Nsh {
            flags: byte(NSH_FLAGS_SHIFT),
            ttl: byte(NSH_TTL_SHIFT),
            md_type: byte(NSH_MDTYPE_SHIFT),
            next_proto: byte(NSH_NP_SHIFT),
            path: self.label,
            context,
        }
    }

    /// A mask that looks at every bit.
    pub fn exact() -> FlowKey {
        bytemuck::cast([u64::MAX; KEY_WORDS])
    }

    /// The key as machine words, for masking, hashing and comparing.
    #[inline]
    pub fn words(&self) -> &[u64; KEY_WORDS] {
        bytemuck::cast_ref(self)
    }

    #[inline]
    pub fn words_mut(&mut self) -> &mut [u64; KEY_WORDS] {
        bytemuck::cast_mut(self)
    }

    /// As a mask: also looks at every bit `other` looks at.
    #[inline]
    pub fn widen(&mut self, other: &FlowKey) {
        for (m, o) in self.words_mut().iter_mut().zip(other.words()) {
            *m |= o;
        }
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

/// Odd multipliers, one per word position (from the digits of pi, then the
/// mixing constants of well-known hashes).
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
    0x8ff9_9a15_b5a3_d3bb,
    0x0801_f2e2_8587_48f7,
    0xba7c_9045_f12c_7f99,
    0x24a1_9947_b391_6cf7,
    0x0d95_748f_728e_b658,
    0x7182_6e2d_ab98_9517,
    0x9e37_79b9_7f4a_7c15,
    0xc2b2_ae3d_27d4_eb4f,
    0x1656_67b1_9e37_79f9,
    0x27d4_eb2f_1656_67c5,
    0x85eb_ca77_c2b2_ae63,
    0x94d0_49bb_1331_11eb,
    0xbf58_476d_1ce4_e5b9,
    0xd6e8_feb8_6659_fd93,
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

/// The packet's addresses and ports hashed into 32 bits (as Open vSwitch's
/// select groups hash by default, `sym_l4`'s fields though not symmetric):
/// Ethernet addresses and type, then for IP the addresses, the protocol and — for
/// TCP, UDP and SCTP — the ports; for ARP its protocol addresses. Every packet of
/// one connection direction gets the same value; the datapath's `hash` action
/// computes it for a select group's recirculation.
pub fn l4_hash(key: &FlowKey) -> u32 {
    let mut words = [0u64; KEY_WORDS];
    let dl_type = key.dl_type;
    words[0] = u64::from(dl_type);
    words[1] = key.dl_src.to_u64();
    words[2] = key.dl_dst.to_u64();
    let ip = matches!(dl_type, EtherType::IPV4 | EtherType::IPV6);
    if ip || EtherType::is_arp(dl_type) {
        let (src, dst) = (key.nw_src, key.nw_dst);
        words[3] = src as u64;
        words[4] = (src >> 64) as u64;
        words[5] = dst as u64;
        words[6] = (dst >> 64) as u64;
    }
    if ip {
        words[7] = u64::from(key.nw_proto);
        if matches!(key.nw_proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP) {
            words[8] = (u64::from(key.tp_src) << 16) | u64::from(key.tp_dst);
        }
    }
    let h = hash_words(&words, 9);
    (h ^ (h >> 32)) as u32
}

/// The fields [`l4_hash`] reads of `key` (a mask): what a flow that chose by the
/// hash in translation must match.
pub fn l4_hash_mask(key: &FlowKey) -> FlowKey {
    let dl_type = key.dl_type;
    let mut m = FlowKey {
        dl_type: u16::MAX,
        dl_src: MacAddr([0xff; 6]),
        dl_dst: MacAddr([0xff; 6]),
        ..FlowKey::default()
    };
    let ip = matches!(dl_type, EtherType::IPV4 | EtherType::IPV6);
    if ip || EtherType::is_arp(dl_type) {
        m.nw_src = u128::MAX;
        m.nw_dst = u128::MAX;
    }
    if ip {
        m.nw_proto = u8::MAX;
        if matches!(key.nw_proto, IPPROTO_TCP | IPPROTO_UDP | IPPROTO_SCTP) {
            m.tp_src = u16::MAX;
            m.tp_dst = u16::MAX;
        }
    }
    m
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
    #[error("truncated MPLS label stack entry")]
    ShortMpls,
    #[error("truncated PBB I-TAG")]
    ShortItag,
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
    let eth = ethernet::Frame::new_checked(frame).map_err(|_| Malformed::ShortFrame)?;
    key.dl_dst = eth.dst_addr();
    key.dl_src = eth.src_addr();
    // A tag the device took out is the outer one; up to two in all.
    let mut tcis = [0u16; MAX_TAGS];
    let mut n = 0;
    if let Some(tag) = stripped {
        tcis[0] = tag.tci;
        n = 1;
    }
    let tags = eth.tags(MAX_TAGS - n).map_err(|_| Malformed::ShortVlan)?;
    for tci in tags.tcis() {
        tcis[n] = *tci;
        n += 1;
    }
    if n > 0 {
        key.vlan_tci = tcis[0] | VLAN_CFI;
    }
    if n > 1 {
        key.inner_vlan_tci = tcis[1] | VLAN_CFI;
    }
    key.dl_type = tags.ethertype;
    let l3 = &frame[tags.payload..];
    match tags.ethertype {
        EtherType::IPV4 => extract_ipv4(key, l3),
        EtherType::IPV6 => extract_ipv6(key, l3),
        EtherType::ARP | EtherType::RARP => extract_arp(key, l3),
        // As Open vSwitch: nothing behind the labels is looked at (what they carry
        // is the label's to say); a pop and a recirculation show it.
        EtherType::MPLS | EtherType::MPLS_MULTICAST => {
            key.label = mpls::top_entry(l3).ok_or(Malformed::ShortMpls)?;
            Ok(())
        }
        // The I-TAG only: the customer's frame behind it is seen after a pop_pbb
        // and a recirculation, as what an MPLS label carries is.
        EtherType::PBB => {
            key.label = pbb::itag(l3).ok_or(Malformed::ShortItag)?;
            Ok(())
        }
        // The header's fields only: what it carries is seen after a decap and a
        // recirculation. A header that is not NSH vsw switches by leaves them 0
        // (Open vSwitch forwards it so too).
        EtherType::NSH => {
            if let Some((h, _)) = nsh::Nsh::parse(l3) {
                key.set_nsh(&h);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn extract_ipv4(key: &mut FlowKey, l3: &[u8]) -> Result<(), Malformed> {
    let ip = ipv4::Packet::new_checked(l3).map_err(|_| Malformed::BadIpv4)?;
    key.nw_src = u128::from(ip.src_addr());
    key.nw_dst = u128::from(ip.dst_addr());
    key.nw_proto = ip.protocol();
    key.nw_tos = ip.tos();
    key.nw_ttl = ip.ttl();
    let (ihl, total) = (ip.header_len(), ip.total_len());
    if total < ihl {
        return Err(Malformed::BadIpv4);
    }
    if ip.is_fragment() {
        key.nw_frag = FRAG_ANY | if ip.frag_offset() != 0 { FRAG_LATER } else { 0 };
    }
    // Ethernet pads short frames: the payload ends where the IP header says. A frame
    // shorter than that was cut off on the way: its L4 header is not trusted.
    if ip.frag_offset() == 0 && total <= l3.len() {
        extract_l4(key, &l3[ihl..total]);
    }
    Ok(())
}

fn extract_ipv6(key: &mut FlowKey, l3: &[u8]) -> Result<(), Malformed> {
    let ip = ipv6::Packet::new_checked(l3).map_err(|_| Malformed::BadIpv6)?;
    key.nw_tos = ip.traffic_class();
    key.label = ip.flow_label();
    key.nw_ttl = ip.hop_limit();
    key.nw_src = ip.src_addr();
    key.nw_dst = ip.dst_addr();
    // A payload length of 0 is a jumbogram (or a TSO super-frame): the frame's end is
    // the packet's end.
    let end = match ip.payload_len() {
        0 => l3.len(),
        n => (ipv6::HEADER_LEN + n).min(l3.len()),
    };
    let l3 = &l3[..end];
    let up = ipv6::Packet::new_checked(l3)
        .and_then(|ip| ip.upper_layer(MAX_IPV6_EXTENSIONS))
        .map_err(|_| Malformed::BadIpv6)?;
    key.ipv6_exthdr = up.exthdr;
    if let Some((offset, _)) = up.fragment {
        key.nw_frag = FRAG_ANY | if offset != 0 { FRAG_LATER } else { 0 };
    }
    key.nw_proto = up.protocol;
    // A later fragment carries no L4 header; its protocol is still known.
    if !up.is_later_fragment() {
        extract_l4(key, &l3[up.offset..]);
    }
    Ok(())
}

fn extract_arp(key: &mut FlowKey, l3: &[u8]) -> Result<(), Malformed> {
    let a = arp::Packet::new_checked(l3).map_err(|_| Malformed::BadArp)?;
    key.nw_proto = a.operation().min(255) as u8;
    // Other hardware or protocol types keep only the opcode.
    if let Some(addrs) = a.ethernet_ipv4().map_err(|_| Malformed::BadArp)? {
        key.arp_sha = MacAddr::from_slice(addrs.sha).unwrap_or_default();
        key.nw_src = u128::from(addrs.spa);
        key.arp_tha = MacAddr::from_slice(addrs.tha).unwrap_or_default();
        key.nw_dst = u128::from(addrs.tpa);
    }
    Ok(())
}

fn extract_l4(key: &mut FlowKey, l4: &[u8]) {
    match key.nw_proto {
        IPPROTO_TCP => {
            if let Ok(t) = tcp::Packet::new_checked(l4) {
                key.tp_src = t.src_port();
                key.tp_dst = t.dst_port();
                key.tcp_flags = t.flags();
            }
        }
        // SCTP's ports sit where UDP's do.
        IPPROTO_UDP | IPPROTO_SCTP => {
            if let Ok(u) = udp::Packet::new_checked(l4) {
                key.tp_src = u.src_port();
                key.tp_dst = u.dst_port();
            }
        }
        IPPROTO_ICMP | IPPROTO_ICMPV6 => {
            if let Ok(i) = icmp::Packet::new_checked(l4) {
                key.tp_src = u16::from(i.msg_type());
                key.tp_dst = u16::from(i.code());
                if key.nw_proto == IPPROTO_ICMPV6 && i.is_nd() {
                    extract_nd(key, &i);
                }
            }
        }
        // As Open vSwitch's flow: the type and the code (the maximum response
        // time), which a snooping NORMAL tells reports from queries by.
        IPPROTO_IGMP if key.dl_type == EtherType::IPV4 => {
            if let [msg_type, code, ..] = *l4 {
                key.tp_src = u16::from(msg_type);
                key.tp_dst = u16::from(code);
            }
        }
        _ => {}
    }
}

/// Neighbour discovery: the target address and the link-layer address option that
/// goes with the message (source for a solicitation, target for an advertisement).
fn extract_nd(key: &mut FlowKey, nd: &icmp::Packet<&[u8]>) {
    let Some(target) = nd.nd_target() else {
        return;
    };
    key.nd_target = target;
    for (kind, option) in nd.nd_options() {
        let Some(mac) = icmp::option_lladdr(option).and_then(MacAddr::from_slice) else {
            continue;
        };
        match (kind, nd.msg_type()) {
            (ND_OPT_SOURCE_LLADDR, ND_NEIGHBOR_SOLICIT) => key.arp_sha = mac,
            (ND_OPT_TARGET_LLADDR, ND_NEIGHBOR_ADVERT) => key.arp_tha = mac,
            _ => {}
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
