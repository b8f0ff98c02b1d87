//! Header rewrites for the `mod_*`, VLAN and `dec_ttl` actions (and, in
//! `field_write`, every other field OpenFlow's set-field writes), on a frame held in
//! a buffer with headroom (so a tag can be pushed without moving the payload).
//!
//! Checksums are updated incrementally (RFC 1624), never recomputed over the payload,
//! except SCTP's CRC32c, which has no incremental form. A frame whose L4 checksum is
//! left to the device (virtio-net NEEDS_CSUM) holds only the pseudo-header sum there;
//! that sum follows address changes and is left alone for port changes.

use crate::mac::MacAddr;
use crate::vnet::{VnetHdr, VNET_F_NEEDS_CSUM};
use crate::wire::ethernet::{self, EtherType, VlanTag, ETH_HDR_LEN, VLAN_TAG_LEN};
use crate::wire::ip::{IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};
use crate::wire::{ipv4, ipv6, sctp, tcp, udp};

/// Ethernet's shortest frame, without its FCS: 60 bytes.
pub const ETH_MIN_FRAME: usize = 60;

/// Room in front of the frame for pushed tags and a tunnel's outer headers
/// ([`MAX_PUSHED_HEADER`] and a few tags).
pub const HEADROOM: usize = MAX_PUSHED_HEADER + 32;

/// The longest outer header [`PacketBuf::push_tunnel`] puts in front of a frame: an
/// IPv6 Geneve header with 16 bytes of options (longer ones are not pushed here).
pub const MAX_PUSHED_HEADER: usize = 14 + 40 + 8 + 8 + 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    #[error("frame larger than the rewrite buffer")]
    TooBig,
    #[error("no room for another VLAN tag")]
    NoHeadroom,
    #[error("TTL or hop limit ran out")]
    TtlExpired,
    #[error("no saved copy of the packet to go back to, or no room for another")]
    Unsaved,
    /// A decap met a frame that does not carry what its flow said (cut short
    /// behind the header, or not the bottom of a label stack).
    #[error("the frame does not hold the headers a decap takes off")]
    NotDecapsulable,
}

/// A frame being rewritten, with its offload state.
pub struct PacketBuf {
    buf: Vec<u8>,
    start: usize,
    len: usize,
    pub vnet: VnetHdr,
}

impl PacketBuf {
    /// A buffer for frames up to `max_frame` bytes (allocated once, reused).
    pub fn new(max_frame: usize) -> PacketBuf {
        PacketBuf {
            buf: vec![0; HEADROOM + max_frame + VLAN_TAG_LEN],
            start: HEADROOM,
            len: 0,
            vnet: VnetHdr::default(),
        }
    }

    /// Takes a copy of `frame`, putting back a tag the receiving device stripped.
    pub fn load(
        &mut self,
        frame: &[u8],
        stripped: Option<VlanTag>,
        vnet: VnetHdr,
    ) -> Result<(), RewriteError> {
        self.start = HEADROOM;
        let out = &mut self.buf[HEADROOM..];
        self.len = crate::ethernet::copy_frame(out, frame, stripped).ok_or(RewriteError::TooBig)?;
        self.vnet = match stripped {
            Some(_) => vnet.shifted(VLAN_TAG_LEN as u16),
            None => vnet,
        };
        Ok(())
    }

    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }

    /// The length of the packets the frame goes out as: a super-frame's are its
    /// headers and one segment (as Open vSwitch's `check_pkt_len` measures).
    pub fn wire_len(&self) -> usize {
        if self.vnet.is_gso() && self.vnet.gso_size > 0 {
            (usize::from(self.vnet.hdr_len) + usize::from(self.vnet.gso_size)).min(self.len)
        } else {
            self.len
        }
    }

    /// Room left in front of the frame (for tags and outer headers).
    pub fn headroom(&self) -> usize {
        self.start
    }

    /// Moves the frame back so that at least `room` bytes are free in front of it,
    /// where the buffer has the room behind it (outer headers pushed on outer
    /// headers). Whether there is that much room now.
    pub fn make_headroom(&mut self, room: usize) -> bool {
        if self.start >= room {
            return true;
        }
        let shift = room - self.start;
        if self.start + self.len + shift > self.buf.len() {
            return false;
        }
        self.buf
            .copy_within(self.start..self.start + self.len, self.start + shift);
        self.start += shift;
        true
    }

    /// Becomes a copy of `other` (its frame and offload state).
    pub fn copy_from(&mut self, other: &PacketBuf) -> Result<(), RewriteError> {
        let d = other.data();
        let dst = self
            .buf
            .get_mut(HEADROOM..HEADROOM + d.len())
            .ok_or(RewriteError::TooBig)?;
        dst.copy_from_slice(d);
        self.start = HEADROOM;
        self.len = d.len();
        self.vnet = other.vnet;
        Ok(())
    }

    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }

    fn partial_csum(&self) -> bool {
        self.vnet.flags & VNET_F_NEEDS_CSUM != 0
    }

    /// The Ethernet header, if the frame holds one.
    fn ethernet(&mut self) -> Option<ethernet::Frame<&mut [u8]>> {
        ethernet::Frame::new_checked(self.data_mut()).ok()
    }

    /// The outer tag's TCI, if the frame has one.
    fn outer_tci(&self) -> Option<u16> {
        ethernet::Frame::new_checked(self.data()).ok()?.outer_tci()
    }

    /// The ethertype after up to two tags, and where its header starts.
    fn l3(&self) -> Option<(u16, usize)> {
        ethernet::l3(self.data())
    }

    pub fn set_dl_src(&mut self, mac: MacAddr) {
        if let Some(mut eth) = self.ethernet() {
            eth.set_src_addr(mac);
        }
    }

    pub fn set_dl_dst(&mut self, mac: MacAddr) {
        if let Some(mut eth) = self.ethernet() {
            eth.set_dst_addr(mac);
        }
    }

    /// Pushes an outermost tag; like OpenFlow, it starts with the TCI of the tag it
    /// covers, or 0.
    pub fn push_vlan(&mut self, tpid: u16) -> Result<(), RewriteError> {
        if self.len < ETH_HDR_LEN {
            return Ok(());
        }
        if self.start < VLAN_TAG_LEN {
            return Err(RewriteError::NoHeadroom);
        }
        let tci = self.outer_tci().unwrap_or(0);
        // The addresses move forward by a tag's length; the tag goes between them and
        // what followed them.
        let addrs = ethernet::field::ETHERTYPE.start;
        self.buf
            .copy_within(self.start..self.start + addrs, self.start - VLAN_TAG_LEN);
        self.start -= VLAN_TAG_LEN;
        self.len += VLAN_TAG_LEN;
        if let Some(mut eth) = self.ethernet() {
            eth.set_outer_tag(VlanTag { tpid, tci });
        }
        self.vnet = self.vnet.shifted(VLAN_TAG_LEN as u16);
        Ok(())
    }

    /// Puts `template`'s outer headers in front of the frame (Open vSwitch's
    /// `tnl_push`): the UDP source port from the inner frame's hash, IPv4 ID
    /// `ip_id`; the frame's Ethernet header and tags first taken off for a
    /// template that [strips them](crate::tunnel::EncapTemplate::strips_ethernet). A super-frame keeps its segmentation, moved behind the outer
    /// headers (what takes it cuts it as a UDP tunnel's); any other frame has its
    /// checksum finished first, before the outer UDP checksum covers it. `TooBig`
    /// when the outer packet would pass IP's largest (a super-frame then goes in
    /// parts, [`crate::gso::split_super_frame`]), `NoHeadroom` for a header longer
    /// than [`MAX_PUSHED_HEADER`].
    pub fn push_tunnel(
        &mut self,
        template: &crate::tunnel::EncapTemplate,
        ip_id: u16,
    ) -> Result<(), RewriteError> {
        let at = template.overhead();
        if self.start < at {
            return Err(RewriteError::NoHeadroom);
        }
        if self.len > template.inner_frame_max(usize::from(u16::MAX)) {
            return Err(RewriteError::TooBig);
        }
        let gso = self.vnet.is_gso();
        // A super-frame without its Ethernet header is no frame a device cuts: the
        // datapath cuts it first (`egress::push_plan`).
        if gso && template.strips_ethernet() {
            return Err(RewriteError::TooBig);
        }
        if !gso {
            let vnet = self.vnet;
            crate::gso::complete_checksum(self.data_mut(), &vnet)
                .map_err(|_| RewriteError::TooBig)?;
        }
        let sport = crate::tunnel::udp_source_port(crate::tunnel::flow_hash(self.data()));
        if template.strips_ethernet() {
            // VXLAN-GPE carrying IP or NSH: what follows the tags goes in.
            let (_, l2) = crate::ethernet::l3(self.data()).ok_or(RewriteError::NotDecapsulable)?;
            self.start += l2;
            self.len -= l2;
        }
        let inner_len = self.len;
        self.start -= at;
        self.len += at;
        let (start, len) = (self.start, self.len);
        template
            .finish(&mut self.buf[start..start + len], inner_len, sport, ip_id)
            .ok_or(RewriteError::TooBig)?;
        self.vnet = if gso {
            self.vnet.shifted(at as u16)
        } else {
            VnetHdr::default()
        };
        Ok(())
    }

    /// Keeps only the `len` bytes at `at` of the frame (a decapsulated inner frame),
    /// with offload state `vnet`.
    pub fn keep(&mut self, at: usize, len: usize, vnet: VnetHdr) {
        let at = at.min(self.len);
        self.start += at;
        self.len = len.min(self.len - at);
        self.vnet = vnet;
    }

    /// [`PacketBuf::keep`] of a decapsulated packet without an Ethernet header
    /// (VXLAN-GPE's IP or NSH), behind an Ethernet header of zero addresses and
    /// type `ethertype` written in front of it, in room the outer headers leave:
    /// vsw's datapath carries Ethernet frames only, and the packet's type says the
    /// header is not the packet's (the push of an L3 tunnel takes it off again).
    /// `NoHeadroom` when fewer than 14 bytes come before `at`.
    pub fn keep_behind_ethernet(
        &mut self,
        at: usize,
        len: usize,
        ethertype: u16,
        vnet: VnetHdr,
    ) -> Result<(), RewriteError> {
        let Some(header_at) = at.checked_sub(ETH_HDR_LEN) else {
            return Err(RewriteError::NoHeadroom);
        };
        self.keep(header_at, len + ETH_HDR_LEN, vnet);
        let h = &mut self.data_mut()[..ETH_HDR_LEN];
        h[..12].fill(0);
        h[12..].copy_from_slice(&ethertype.to_be_bytes());
        Ok(())
    }

    pub fn strip_vlan(&mut self) {
        if self.outer_tci().is_none() {
            return;
        }
        let before = self.len;
        let addrs = ethernet::field::ETHERTYPE.start;
        self.buf
            .copy_within(self.start..self.start + addrs, self.start + VLAN_TAG_LEN);
        self.start += VLAN_TAG_LEN;
        self.len -= VLAN_TAG_LEN;
        self.vnet = self.vnet.unshifted(VLAN_TAG_LEN as u16);
        self.pad_after_pop(before);
    }

    /// Before a push of `len` bytes that hides the packet's headers from a device
    /// (an MPLS label, a PBB backbone header): room in front of the frame, and
    /// its checksum finished here (nothing behind the pushed header is the
    /// device's to find). A super-frame is refused (`TooBig`): cutting it would
    /// need a segmentation that looks behind the pushed header, which vsw's does
    /// not.
    pub(crate) fn before_opaque_push(&mut self, len: usize) -> Result<(), RewriteError> {
        if self.vnet.is_gso() {
            return Err(RewriteError::TooBig);
        }
        if !self.make_headroom(len) {
            return Err(RewriteError::NoHeadroom);
        }
        let vnet = self.vnet;
        crate::gso::complete_checksum(self.data_mut(), &vnet).map_err(|_| RewriteError::TooBig)?;
        self.vnet = Default::default();
        Ok(())
    }

    /// After a pop shortened a frame that was at least Ethernet's shortest
    /// ([`ETH_MIN_FRAME`]): zeros after it up to that length again, as a NIC pads
    /// it on the wire (a switch's port would; a veth or a tap does not, and a
    /// receiver comparing frames sees the difference). A frame that was shorter
    /// stays as it came.
    pub(crate) fn pad_after_pop(&mut self, before: usize) {
        if before < ETH_MIN_FRAME || self.len >= ETH_MIN_FRAME {
            return;
        }
        let (end, at) = (self.start + ETH_MIN_FRAME, self.start + self.len);
        if let Some(pad) = self.buf.get_mut(at..end) {
            pad.fill(0);
            self.len = ETH_MIN_FRAME;
        }
    }

    fn set_tci(&mut self, keep: u16, set: u16) -> Result<(), RewriteError> {
        if self.outer_tci().is_none() {
            self.push_vlan(EtherType::VLAN)?;
        }
        if let Some(tci) = self.outer_tci() {
            if let Some(mut eth) = self.ethernet() {
                eth.set_outer_tci((tci & keep) | set);
            }
        }
        Ok(())
    }

    /// Sets the outer tag's VID, pushing a tag onto an untagged frame.
    pub fn set_vlan_vid(&mut self, vid: u16) -> Result<(), RewriteError> {
        self.set_tci(!0x0fff, vid & 0x0fff)
    }

    /// Sets the outer tag's priority, pushing a tag onto an untagged frame.
    pub fn set_vlan_pcp(&mut self, pcp: u8) -> Result<(), RewriteError> {
        self.set_tci(!0xe000, u16::from(pcp & 7) << 13)
    }

    /// The IPv4 header's offset when the frame carries a whole one.
    fn ipv4(&self) -> Option<usize> {
        match self.l3()? {
            (EtherType::IPV4, off) => {
                ipv4::Packet::new_checked(&self.data()[off..]).ok()?;
                Some(off)
            }
            _ => None,
        }
    }

    /// The IPv6 header's offset when the frame carries a whole one.
    fn ipv6(&self) -> Option<usize> {
        match self.l3()? {
            (EtherType::IPV6, off) => {
                ipv6::Packet::new_checked(&self.data()[off..]).ok()?;
                Some(off)
            }
            _ => None,
        }
    }

    /// The transport protocol and where its header starts, for an IPv4 packet that is
    /// a first (or only) fragment, or an IPv6 packet without extension headers (what
    /// the rewrite actions' prerequisites allow).
    fn l4(&self) -> Option<(u8, usize)> {
        self.l4_span().map(|(proto, start, _)| (proto, start))
    }

    /// [`Self::l4`], and where the IP payload ends: before the frame's end when the
    /// frame is padded (a short packet in a 60-byte frame); the frame's end when
    /// the header's length is 0 (a super-frame's, or an IPv6 jumbogram's).
    fn l4_span(&self) -> Option<(u8, usize, usize)> {
        let len = self.data().len();
        let end = |off: usize, said: usize| {
            if said == 0 {
                len
            } else {
                (off + said).min(len)
            }
        };
        if let Some(off) = self.ipv4() {
            let ip = ipv4::Packet::new_checked(&self.data()[off..]).ok()?;
            return (ip.frag_offset() == 0).then(|| {
                (
                    ip.protocol(),
                    off + ip.header_len(),
                    end(off, ip.total_len()),
                )
            });
        }
        let off = self.ipv6()?;
        let ip = ipv6::Packet::new_checked(&self.data()[off..]).ok()?;
        let start = off + ipv6::HEADER_LEN;
        Some((ip.next_header(), start, end(start, ip.payload_len())))
    }

    fn set_ipv4_addr(&mut self, dst: bool, addr: [u8; 4]) {
        let Some(off) = self.ipv4() else { return };
        let partial = self.partial_csum();
        let l4 = self.l4();
        let d = self.data_mut();
        let Ok(mut ip) = ipv4::Packet::new_checked(&mut d[off..]) else {
            return;
        };
        let old = if dst { ip.dst_addr() } else { ip.src_addr() };
        let old = [(old >> 16) as u16, old as u16];
        let new = [
            u16::from_be_bytes([addr[0], addr[1]]),
            u16::from_be_bytes([addr[2], addr[3]]),
        ];
        if dst {
            ip.set_dst_addr(addr);
        } else {
            ip.set_src_addr(addr);
        }
        let mut check = ip.checksum();
        for (o, n) in old.iter().zip(&new) {
            check = csum_replace(check, *o, *n, false);
        }
        ip.set_checksum(check);
        // The pseudo-header holds the addresses: TCP and UDP checksums follow.
        if let Some((proto, l4)) = l4 {
            update_l4_csum(&mut d[l4..], proto, &old, &new, partial);
        }
    }

    pub fn set_nw_src(&mut self, addr: [u8; 4]) {
        self.set_ipv4_addr(false, addr);
    }

    pub fn set_nw_dst(&mut self, addr: [u8; 4]) {
        self.set_ipv4_addr(true, addr);
    }

    /// Sets the DSCP bits (the TOS byte's upper six), keeping ECN.
    /// The IPv4 TOS / IPv6 traffic class, if the packet is IP.
    pub fn nw_tos(&self) -> Option<u8> {
        if let Some(off) = self.ipv4() {
            return ipv4::Packet::new_checked(&self.data()[off..])
                .ok()
                .map(|ip| ip.tos());
        }
        let off = self.ipv6()?;
        ipv6::Packet::new_checked(&self.data()[off..])
            .ok()
            .map(|ip| ip.traffic_class())
    }

    pub fn set_nw_tos(&mut self, tos: u8) {
        if let Some(off) = self.ipv4() {
            let Ok(mut ip) = ipv4::Packet::new_checked(&mut self.data_mut()[off..]) else {
                return;
            };
            // The TOS byte shares a checksummed 16-bit word with version and IHL.
            let ver_ihl = u16::from(ip.header()[ipv4::field::VER_IHL]) << 8;
            let old_tos = ip.tos();
            let new_tos = (tos & 0xfc) | (old_tos & 3);
            ip.set_tos(new_tos);
            let check = csum_replace(
                ip.checksum(),
                ver_ihl | u16::from(old_tos),
                ver_ihl | u16::from(new_tos),
                false,
            );
            ip.set_checksum(check);
        } else if let Some(off) = self.ipv6() {
            if let Ok(mut ip) = ipv6::Packet::new_checked(&mut self.data_mut()[off..]) {
                let tc = (tos & 0xfc) | (ip.traffic_class() & 3);
                ip.set_traffic_class(tc);
            }
        }
    }

    fn set_port(&mut self, dst: bool, port: u16) {
        let Some((proto, l4, end)) = self.l4_span().filter(|(_, l4, end)| end >= l4) else {
            return;
        };
        let partial = self.partial_csum();
        // (Not past the IP payload: SCTP's checksum covers its packet, not the
        // frame's padding.)
        let d = &mut self.data_mut()[l4..end];
        match proto {
            IPPROTO_TCP => {
                let Ok(mut t) = tcp::Packet::new_checked(&mut *d) else {
                    return;
                };
                let old = if dst { t.dst_port() } else { t.src_port() };
                if dst {
                    t.set_dst_port(port);
                } else {
                    t.set_src_port(port);
                }
                // A checksum left to the device covers the ports when it is done.
                if !partial {
                    update_l4_csum(d, proto, &[old], &[port], false);
                }
            }
            IPPROTO_UDP => {
                let Ok(mut u) = udp::Packet::new_checked(&mut *d) else {
                    return;
                };
                let old = if dst { u.dst_port() } else { u.src_port() };
                if dst {
                    u.set_dst_port(port);
                } else {
                    u.set_src_port(port);
                }
                if !partial {
                    update_l4_csum(d, proto, &[old], &[port], false);
                }
            }
            IPPROTO_SCTP => {
                let Ok(mut sc) = sctp::Packet::new_checked(d) else {
                    return;
                };
                if dst {
                    sc.set_dst_port(port);
                } else {
                    sc.set_src_port(port);
                }
                if !partial {
                    sc.fill_checksum();
                }
            }
            _ => {}
        }
    }

    pub fn set_tp_src(&mut self, port: u16) {
        self.set_port(false, port);
    }

    pub fn set_tp_dst(&mut self, port: u16) {
        self.set_port(true, port);
    }

    /// Decrements the IPv4 TTL or IPv6 hop limit; a packet that would leave with 0
    /// is refused.
    pub fn dec_ttl(&mut self) -> Result<(), RewriteError> {
        if let Some(off) = self.ipv4() {
            let Ok(mut ip) = ipv4::Packet::new_checked(&mut self.data_mut()[off..]) else {
                return Ok(());
            };
            let ttl = ip.ttl();
            if ttl <= 1 {
                return Err(RewriteError::TtlExpired);
            }
            // TTL and protocol share a checksummed 16-bit word.
            let proto = u16::from(ip.protocol());
            ip.set_ttl(ttl - 1);
            let check = csum_replace(
                ip.checksum(),
                (u16::from(ttl) << 8) | proto,
                (u16::from(ttl - 1) << 8) | proto,
                false,
            );
            ip.set_checksum(check);
        } else if let Some(off) = self.ipv6() {
            if let Ok(mut ip) = ipv6::Packet::new_checked(&mut self.data_mut()[off..]) {
                let hops = ip.hop_limit();
                if hops <= 1 {
                    return Err(RewriteError::TtlExpired);
                }
                ip.set_hop_limit(hops - 1);
            }
        }
        Ok(())
    }
}

/// RFC 1624: the checksum after one 16-bit word of the data changed from `old` to
/// `new`. `seed` says the field holds the plain (uncomplemented) pseudo-header sum
/// that a device will finish, rather than a finished checksum.
pub fn csum_replace(check: u16, old: u16, new: u16, seed: bool) -> u16 {
    let start = if seed { check } else { !check };
    let mut sum = u32::from(start) + u32::from(!old) + u32::from(new);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    if seed {
        sum as u16
    } else {
        !(sum as u16)
    }
}

/// Updates the TCP or UDP checksum of the header at the start of `l4` after 16-bit
/// words it covers changed from `old` to `new`.
fn update_l4_csum(l4: &mut [u8], proto: u8, old: &[u16], new: &[u16], seed: bool) {
    let replace = |mut check: u16| {
        for (o, n) in old.iter().zip(new) {
            check = csum_replace(check, *o, *n, seed);
        }
        check
    };
    match proto {
        IPPROTO_TCP => {
            if let Ok(mut t) = tcp::Packet::new_checked(l4) {
                let c = replace(t.checksum());
                t.set_checksum(c);
            }
        }
        IPPROTO_UDP => {
            let Ok(mut u) = udp::Packet::new_checked(l4) else {
                return;
            };
            // UDP over IPv4 may carry no checksum at all (0); it stays without.
            if u.checksum() == 0 && !seed {
                return;
            }
            let mut c = replace(u.checksum());
            if c == 0 && !seed {
                c = 0xffff;
            }
            u.set_checksum(c);
        }
        _ => {}
    }
}

mod encap;
mod field_write;
mod icmp_quote;
mod mpls;
mod nsh;
mod pbb;
pub use field_write::{csum_adjust, FieldWrite};
pub use icmp_quote::QuoteEnd;
pub use mpls::is_mpls;
pub use nsh::NshField;

#[cfg(test)]
mod tests;
