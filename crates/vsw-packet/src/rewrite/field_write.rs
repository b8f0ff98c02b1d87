//! The set-field writes beyond the classic `mod_*` actions (OpenFlow's set-field of
//! IPv6, ECN, TTL, ARP, ICMP and neighbour-discovery fields) and the TTL copies
//! between the two IP headers of an IP-in-IP packet.
//!
//! Each is a no-op on a packet without the header it writes (the translation's
//! prerequisites keep rules from asking for one); checksums that cover the bytes
//! follow incrementally. A checksum left to the device (NEEDS_CSUM) holds only the
//! pseudo-header sum, so it follows an IPv6 address and nothing else.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::PacketBuf;
use crate::checksum::fold;
use crate::mac::MacAddr;
use crate::wire::ethernet::EtherType;
use crate::wire::icmp::{
    self, ND_NEIGHBOR_ADVERT, ND_NEIGHBOR_SOLICIT, ND_OPT_SOURCE_LLADDR, ND_OPT_TARGET_LLADDR,
};
use crate::wire::ip::{IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP};
use crate::wire::{arp, ipv4, ipv6, mpls, pbb};

/// IP-in-IP: an IPv4 header inside (IPPROTO_IPIP).
const IPPROTO_IPIP: u8 = 4;
/// An IPv6 header inside (IPPROTO_IPV6).
const IPPROTO_IPV6_INNER: u8 = 41;

/// One header field written to a value, or a TTL copied between IP headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldWrite {
    Ipv6Src([u8; 16]),
    Ipv6Dst([u8; 16]),
    /// The IPv6 flow label (20 bits).
    Ipv6Label(u32),
    /// The two ECN bits of the IPv4 TOS / IPv6 traffic class.
    IpEcn(u8),
    /// The IPv4 TTL / IPv6 hop limit.
    NwTtl(u8),
    ArpOp(u16),
    ArpSpa([u8; 4]),
    ArpTpa([u8; 4]),
    ArpSha(MacAddr),
    ArpTha(MacAddr),
    Icmpv4Type(u8),
    Icmpv4Code(u8),
    Icmpv6Type(u8),
    Icmpv6Code(u8),
    NdTarget([u8; 16]),
    /// The source link-layer address option of a neighbour solicitation.
    NdSll(MacAddr),
    /// The target link-layer address option of a neighbour advertisement.
    NdTll(MacAddr),
    /// A PBB frame's I-SID (the I-TAG's low 24 bits).
    PbbIsid(u32),
    /// A field of an NSH header.
    Nsh(super::NshField, u32),
    /// The inner header's TTL to the outer one (OpenFlow's copy-TTL-outwards).
    CopyTtlOut,
    /// The outer header's TTL to the inner one (copy-TTL-inwards).
    CopyTtlIn,
}

impl fmt::Display for FieldWrite {
    /// As Open vSwitch prints a datapath `set(…)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v6 = |a: &[u8; 16]| Ipv6Addr::from(*a);
        match self {
            FieldWrite::Ipv6Src(a) => write!(f, "set(ipv6(src={}))", v6(a)),
            FieldWrite::Ipv6Dst(a) => write!(f, "set(ipv6(dst={}))", v6(a)),
            FieldWrite::Ipv6Label(l) => write!(f, "set(ipv6(label={l:#x}))"),
            FieldWrite::IpEcn(e) => write!(f, "set(ip(ecn={e}))"),
            FieldWrite::NwTtl(t) => write!(f, "set(ip(ttl={t}))"),
            FieldWrite::ArpOp(o) => write!(f, "set(arp(op={o}))"),
            FieldWrite::ArpSpa(a) => write!(f, "set(arp(sip={}))", Ipv4Addr::from(*a)),
            FieldWrite::ArpTpa(a) => write!(f, "set(arp(tip={}))", Ipv4Addr::from(*a)),
            FieldWrite::ArpSha(m) => write!(f, "set(arp(sha={m}))"),
            FieldWrite::ArpTha(m) => write!(f, "set(arp(tha={m}))"),
            FieldWrite::Icmpv4Type(t) => write!(f, "set(icmp(type={t}))"),
            FieldWrite::Icmpv4Code(c) => write!(f, "set(icmp(code={c}))"),
            FieldWrite::Icmpv6Type(t) => write!(f, "set(icmpv6(type={t}))"),
            FieldWrite::Icmpv6Code(c) => write!(f, "set(icmpv6(code={c}))"),
            FieldWrite::NdTarget(a) => write!(f, "set(nd(target={}))", v6(a)),
            FieldWrite::NdSll(m) => write!(f, "set(nd(sll={m}))"),
            FieldWrite::NdTll(m) => write!(f, "set(nd(tll={m}))"),
            FieldWrite::PbbIsid(i) => write!(f, "set(pbb(isid={i}))"),
            FieldWrite::Nsh(field, v) => match field {
                super::NshField::Flags => write!(f, "set(nsh(flags={v}))"),
                super::NshField::Ttl => write!(f, "set(nsh(ttl={v}))"),
                super::NshField::Spi => write!(f, "set(nsh(spi=0x{v:x}))"),
                super::NshField::Si => write!(f, "set(nsh(si={v}))"),
                super::NshField::Context(i) => write!(f, "set(nsh(c{}=0x{v:x}))", i + 1),
                super::NshField::Md2Word(i) => write!(f, "set(nsh(md2[{i}]=0x{v:08x}))"),
            },
            FieldWrite::CopyTtlOut => f.write_str("copy_ttl_out"),
            FieldWrite::CopyTtlIn => f.write_str("copy_ttl_in"),
        }
    }
}

/// The one's-complement sum of `b` taken as 16-bit words of the summed data; `odd`
/// says `b` starts at an odd offset of it (its first byte is a word's low half).
fn word_sum(b: &[u8], odd: bool) -> u16 {
    let mut s = 0u64;
    let mut high = !odd;
    for &x in b {
        s += if high {
            u64::from(x) << 8
        } else {
            u64::from(x)
        };
        high = !high;
    }
    fold(s)
}

/// RFC 1624 for any run of bytes: the checksum after the bytes it covers changed
/// from `old` to `new` (same length). `seed`: the field holds the uncomplemented
/// pseudo-header sum a device will finish.
pub fn csum_adjust(check: u16, old: &[u8], new: &[u8], odd: bool, seed: bool) -> u16 {
    let start = if seed { check } else { !check };
    let sum = u64::from(start) + u64::from(!word_sum(old, odd)) + u64::from(word_sum(new, odd));
    let r = fold(sum);
    if seed {
        r
    } else {
        !r
    }
}

/// A checksum to keep right: where it is, where the data it sums starts (both frame
/// offsets), whether it holds a device's seed, and whether it is UDP's (0: none).
#[derive(Clone, Copy)]
struct Csum {
    at: usize,
    region: usize,
    seed: bool,
    udp: bool,
}

/// Where a transport header keeps its checksum.
fn l4_csum_at(proto: u8) -> Option<usize> {
    match proto {
        IPPROTO_TCP => Some(16),
        IPPROTO_UDP => Some(6),
        IPPROTO_ICMP | IPPROTO_ICMPV6 => Some(2),
        _ => None,
    }
}

impl PacketBuf {
    /// Writes `w` into the frame.
    pub fn write_field(&mut self, w: FieldWrite) {
        match w {
            FieldWrite::Ipv6Src(a) => self.set_ipv6_addr(ipv6::field::SRC_ADDR.start, a),
            FieldWrite::Ipv6Dst(a) => self.set_ipv6_addr(ipv6::field::DST_ADDR.start, a),
            FieldWrite::Ipv6Label(l) => self.set_ipv6_label(l),
            FieldWrite::IpEcn(e) => self.set_ip_ecn(e),
            FieldWrite::NwTtl(t) => self.set_nw_ttl(t),
            FieldWrite::ArpOp(o) => self.set_arp(arp::field::OPER.start, &o.to_be_bytes()),
            FieldWrite::ArpSpa(a) => self.set_arp(arp::field::SPA.start, &a),
            FieldWrite::ArpTpa(a) => self.set_arp(arp::field::TPA.start, &a),
            FieldWrite::ArpSha(m) => self.set_arp(arp::field::SHA.start, &m.0),
            FieldWrite::ArpTha(m) => self.set_arp(arp::field::THA.start, &m.0),
            FieldWrite::Icmpv4Type(t) => self.set_icmp(IPPROTO_ICMP, icmp::field::TYPE, t),
            FieldWrite::Icmpv4Code(c) => self.set_icmp(IPPROTO_ICMP, icmp::field::CODE, c),
            FieldWrite::Icmpv6Type(t) => self.set_icmp(IPPROTO_ICMPV6, icmp::field::TYPE, t),
            FieldWrite::Icmpv6Code(c) => self.set_icmp(IPPROTO_ICMPV6, icmp::field::CODE, c),
            FieldWrite::NdTarget(a) => self.set_nd_target(a),
            FieldWrite::NdSll(m) => {
                self.set_nd_lladdr(ND_NEIGHBOR_SOLICIT, ND_OPT_SOURCE_LLADDR, m)
            }
            FieldWrite::NdTll(m) => self.set_nd_lladdr(ND_NEIGHBOR_ADVERT, ND_OPT_TARGET_LLADDR, m),
            FieldWrite::PbbIsid(i) => self.set_pbb_isid(i),
            FieldWrite::Nsh(field, v) => self.set_nsh(field, v),
            FieldWrite::CopyTtlOut => self.copy_ttl(true),
            FieldWrite::CopyTtlIn => self.copy_ttl(false),
        }
    }

    /// Overwrites `new.len()` bytes (at most 16) at `at`, a frame offset, and
    /// adjusts the checksum `csum` covers them with.
    fn patch(&mut self, at: usize, new: &[u8], csum: Option<Csum>) {
        let d = self.data_mut();
        let Some(old) = d.get(at..at + new.len()) else {
            return;
        };
        let mut old_copy = [0u8; 16];
        old_copy[..new.len()].copy_from_slice(old);
        let old = &old_copy[..new.len()];
        if let Some(c) = csum {
            if let Some(cb) = d.get(c.at..c.at + 2) {
                let check = u16::from_be_bytes([cb[0], cb[1]]);
                // A UDP datagram sent without a checksum (0) stays without one; a
                // sum that comes to 0 is sent as its other form, 0xffff.
                if !(c.udp && check == 0 && !c.seed) {
                    let odd = at.abs_diff(c.region) % 2 == 1;
                    let mut n = csum_adjust(check, old, new, odd, c.seed);
                    if c.udp && n == 0 && !c.seed {
                        n = 0xffff;
                    }
                    d[c.at..c.at + 2].copy_from_slice(&n.to_be_bytes());
                }
            }
        }
        d[at..at + new.len()].copy_from_slice(new);
    }

    /// The transport header's checksum, when it covers what is written: the IP
    /// pseudo-header (`pseudo`), or the transport bytes themselves.
    fn l4_csum(&self, pseudo: bool) -> Option<(u8, usize, Option<Csum>)> {
        let (proto, l4) = self.l4()?;
        let seed = self.partial_csum();
        let csum = match l4_csum_at(proto) {
            // ICMPv4 has no pseudo-header.
            Some(_) if pseudo && proto == IPPROTO_ICMP => None,
            // A checksum a device finishes covers the transport bytes when it does.
            Some(_) if !pseudo && seed => None,
            Some(c) => Some(Csum {
                at: l4 + c,
                region: l4,
                seed,
                udp: proto == IPPROTO_UDP,
            }),
            None => None,
        };
        Some((proto, l4, csum))
    }

    /// The IPv4 header checksum of the header at `off`.
    fn ipv4_csum(off: usize) -> Option<Csum> {
        Some(Csum {
            at: off + 10,
            region: off,
            seed: false,
            udp: false,
        })
    }

    fn set_ipv6_addr(&mut self, field: usize, addr: [u8; 16]) {
        let Some(off) = self.ipv6() else { return };
        let csum = self.l4_csum(true).and_then(|(_, _, c)| c);
        self.patch(off + field, &addr, csum);
    }

    fn set_ipv6_label(&mut self, label: u32) {
        let Some(off) = self.ipv6() else { return };
        let d = self.data_mut();
        let w = u32::from_be_bytes([d[off], d[off + 1], d[off + 2], d[off + 3]]);
        let w = (w & !0xfffff) | (label & 0xfffff);
        d[off..off + 4].copy_from_slice(&w.to_be_bytes());
    }

    fn set_pbb_isid(&mut self, isid: u32) {
        let Some((EtherType::PBB, off)) = self.l3() else {
            return;
        };
        let Some(tag) = self.data_mut().get_mut(off..off + pbb::ITAG_LEN) else {
            return;
        };
        let old = u32::from_be_bytes([tag[0], tag[1], tag[2], tag[3]]);
        let new = (old & !pbb::ISID_MASK) | (isid & pbb::ISID_MASK);
        tag.copy_from_slice(&new.to_be_bytes());
    }

    fn set_ip_ecn(&mut self, ecn: u8) {
        if let Some(off) = self.ipv4() {
            let d = self.data();
            let tos = (d[off + 1] & !3) | (ecn & 3);
            self.patch(off + 1, &[tos], Self::ipv4_csum(off));
        } else if let Some(off) = self.ipv6() {
            if let Ok(mut ip) = ipv6::Packet::new_checked(&mut self.data_mut()[off..]) {
                let tc = (ip.traffic_class() & !3) | (ecn & 3);
                ip.set_traffic_class(tc);
            }
        }
    }

    fn set_nw_ttl(&mut self, ttl: u8) {
        if let Some(off) = self.ipv4() {
            self.patch(off + 8, &[ttl], Self::ipv4_csum(off));
        } else if let Some(off) = self.ipv6() {
            if let Ok(mut ip) = ipv6::Packet::new_checked(&mut self.data_mut()[off..]) {
                ip.set_hop_limit(ttl);
            }
        }
    }

    /// Ethernet/IPv4 ARP's fixed layout only.
    fn set_arp(&mut self, field: usize, value: &[u8]) {
        let Some((EtherType::ARP | EtherType::RARP, off)) = self.l3() else {
            return;
        };
        let Ok(p) = arp::Packet::new_checked(&self.data()[off..]) else {
            return;
        };
        if matches!(p.ethernet_ipv4(), Ok(Some(_))) {
            self.patch(off + field, value, None);
        }
    }

    fn set_icmp(&mut self, proto: u8, field: usize, value: u8) {
        let Some((p, l4, csum)) = self.l4_csum(false) else {
            return;
        };
        if p == proto && l4 + icmp::HEADER_LEN <= self.len {
            self.patch(l4 + field, &[value], csum);
        }
    }

    /// The neighbour-discovery message's offset, if the packet is one.
    fn nd(&self) -> Option<(usize, Option<Csum>, u8)> {
        let (proto, l4, csum) = self.l4_csum(false)?;
        if proto != IPPROTO_ICMPV6 {
            return None;
        }
        let m = icmp::Packet::new_checked(&self.data()[l4..]).ok()?;
        if !m.is_nd() || l4 + icmp::field::ND_OPTIONS > self.len {
            return None;
        }
        Some((l4, csum, m.msg_type()))
    }

    fn set_nd_target(&mut self, addr: [u8; 16]) {
        if let Some((l4, csum, _)) = self.nd() {
            self.patch(l4 + icmp::field::ND_TARGET.start, &addr, csum);
        }
    }

    /// Rewrites the first link-layer address option of `kind` in a message of type
    /// `msg` (a message without one keeps none).
    fn set_nd_lladdr(&mut self, msg: u8, kind: u8, mac: MacAddr) {
        let Some((l4, csum, t)) = self.nd() else {
            return;
        };
        if t != msg {
            return;
        }
        let end = self.len;
        let mut at = l4 + icmp::field::ND_OPTIONS;
        while at + 8 <= end {
            let d = self.data();
            let (ty, len) = (
                d[at + icmp::field::OPT_TYPE],
                usize::from(d[at + icmp::field::OPT_LEN]),
            );
            if len == 0 {
                return;
            }
            if ty == kind {
                self.patch(at + icmp::field::OPT_LLADDR.start, &mac.0, csum);
                return;
            }
            at += len * 8;
        }
    }

    /// Copies the TTL between the outer and inner IP header of an IP-in-IP packet
    /// (IPv4 or IPv6 in IPv4 or IPv6); a packet with one IP header keeps its TTL.
    fn copy_ttl(&mut self, outwards: bool) {
        if let Some(top) = self.mpls_top() {
            self.copy_mpls_ttl(top, outwards);
            return;
        }
        let (Some((proto, inner)), Some((_, outer))) = (self.l4(), self.l3()) else {
            return;
        };
        let outer_v4 = self.ipv4().is_some();
        let ttl_at = |v4: bool, off: usize| off + if v4 { 8 } else { ipv6::field::HOP_LIMIT };
        let inner_v4 = match proto {
            IPPROTO_IPIP => true,
            IPPROTO_IPV6_INNER => false,
            _ => return,
        };
        let whole = if inner_v4 {
            ipv4::Packet::new_checked(&self.data()[inner..]).is_ok()
        } else {
            ipv6::Packet::new_checked(&self.data()[inner..]).is_ok()
        };
        if !whole {
            return;
        }
        let (from, to, to_v4, to_off) = if outwards {
            (
                ttl_at(inner_v4, inner),
                ttl_at(outer_v4, outer),
                outer_v4,
                outer,
            )
        } else {
            (
                ttl_at(outer_v4, outer),
                ttl_at(inner_v4, inner),
                inner_v4,
                inner,
            )
        };
        let ttl = self.data()[from];
        let csum = if to_v4 { Self::ipv4_csum(to_off) } else { None };
        self.patch(to, &[ttl], csum);
    }

    /// The TTL copies of an MPLS packet (whose outermost entry is at `top`):
    /// between that entry and the next one, or — below the bottom of the stack —
    /// the IP header its first nibble says is there.
    fn copy_mpls_ttl(&mut self, top: usize, outwards: bool) {
        let d = self.data();
        let ttl_of_entry = |at: usize| at + mpls::LSE_LEN - 1;
        let outer = ttl_of_entry(top);
        let next = top + mpls::LSE_LEN;
        let bottom = mpls::top_entry(&d[top..]).is_some_and(mpls::bos);
        let (inner, csum) = if !bottom {
            if d.len() < next + mpls::LSE_LEN {
                return;
            }
            (ttl_of_entry(next), None)
        } else {
            match d.get(next).map(|b| b >> 4) {
                Some(4) if ipv4::Packet::new_checked(&d[next..]).is_ok() => {
                    (next + 8, Self::ipv4_csum(next))
                }
                Some(6) if ipv6::Packet::new_checked(&d[next..]).is_ok() => {
                    (next + ipv6::field::HOP_LIMIT, None)
                }
                _ => return,
            }
        };
        if outwards {
            let ttl = d[inner];
            self.patch(outer, &[ttl], None);
        } else {
            let ttl = d[outer];
            self.patch(inner, &[ttl], csum);
        }
    }
}

#[cfg(test)]
mod tests;
