//! Header rewrites for the `mod_*`, VLAN and `dec_ttl` actions, on a frame held in a
//! buffer with headroom (so a tag can be pushed without moving the payload).
//!
//! Checksums are updated incrementally (RFC 1624), never recomputed over the payload,
//! except SCTP's CRC32c, which has no incremental form. A frame whose L4 checksum is
//! left to the device (virtio-net NEEDS_CSUM) holds only the pseudo-header sum there;
//! that sum follows address changes and is left alone for port changes.

use crate::ethernet::{EtherType, VlanTag, ETH_HDR_LEN, VLAN_TAG_LEN};
use crate::key::{IPPROTO_SCTP, IPPROTO_TCP, IPPROTO_UDP};
use crate::mac::MacAddr;
use crate::vnet::{VnetHdr, VNET_F_NEEDS_CSUM};

/// Room in front of the frame for pushed tags.
pub const HEADROOM: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    #[error("frame larger than the rewrite buffer")]
    TooBig,
    #[error("no room for another VLAN tag")]
    NoHeadroom,
    #[error("TTL or hop limit ran out")]
    TtlExpired,
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

    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.start + self.len]
    }

    fn partial_csum(&self) -> bool {
        self.vnet.flags & VNET_F_NEEDS_CSUM != 0
    }

    /// The outer tag's TCI, if the frame has one.
    fn outer_tci(&self) -> Option<u16> {
        let d = self.data();
        let tpid = be16(d, 12)?;
        (tpid == EtherType::VLAN || tpid == EtherType::QINQ).then(|| be16(d, 14))?
    }

    /// The ethertype after up to two tags, and where its header starts.
    fn l3(&self) -> Option<(u16, usize)> {
        let d = self.data();
        let mut off = 12;
        let mut t = be16(d, off)?;
        for _ in 0..2 {
            if t != EtherType::VLAN && t != EtherType::QINQ {
                break;
            }
            off += VLAN_TAG_LEN;
            t = be16(d, off)?;
        }
        Some((t, off + 2))
    }

    pub fn set_dl_src(&mut self, mac: MacAddr) {
        if self.len >= ETH_HDR_LEN {
            self.data_mut()[6..12].copy_from_slice(&mac.0);
        }
    }

    pub fn set_dl_dst(&mut self, mac: MacAddr) {
        if self.len >= ETH_HDR_LEN {
            self.data_mut()[0..6].copy_from_slice(&mac.0);
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
        self.buf
            .copy_within(self.start..self.start + 12, self.start - VLAN_TAG_LEN);
        self.start -= VLAN_TAG_LEN;
        self.len += VLAN_TAG_LEN;
        let d = self.data_mut();
        d[12..14].copy_from_slice(&tpid.to_be_bytes());
        d[14..16].copy_from_slice(&tci.to_be_bytes());
        self.vnet = self.vnet.shifted(VLAN_TAG_LEN as u16);
        Ok(())
    }

    pub fn strip_vlan(&mut self) {
        if self.outer_tci().is_none() {
            return;
        }
        self.buf
            .copy_within(self.start..self.start + 12, self.start + VLAN_TAG_LEN);
        self.start += VLAN_TAG_LEN;
        self.len -= VLAN_TAG_LEN;
        self.vnet = self.vnet.unshifted(VLAN_TAG_LEN as u16);
    }

    fn set_tci(&mut self, keep: u16, set: u16) -> Result<(), RewriteError> {
        if self.outer_tci().is_none() {
            self.push_vlan(EtherType::VLAN)?;
        }
        if let Some(tci) = self.outer_tci() {
            let tci = (tci & keep) | set;
            self.data_mut()[14..16].copy_from_slice(&tci.to_be_bytes());
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
        let (t, off) = self.l3()?;
        let d = self.data();
        let ihl = usize::from(*d.get(off)? & 0x0f) * 4;
        (t == EtherType::IPV4 && ihl >= 20 && d.len() >= off + ihl).then_some(off)
    }

    /// Where the L4 checksum of an IPv4 packet is, for TCP and UDP, when the packet is
    /// a first (or only) fragment that carries it.
    fn ipv4_l4(&self, ip: usize) -> Option<(u8, usize)> {
        let d = self.data();
        let ihl = usize::from(d[ip] & 0x0f) * 4;
        let frag = be16(d, ip + 6)?;
        if frag & 0x1fff != 0 {
            return None;
        }
        Some((d[ip + 9], ip + ihl))
    }

    fn set_ipv4_addr(&mut self, at: usize, addr: [u8; 4]) {
        let Some(ip) = self.ipv4() else { return };
        let partial = self.partial_csum();
        let l4 = self.ipv4_l4(ip);
        let d = self.data_mut();
        let old = [
            be16(d, ip + at).unwrap_or(0),
            be16(d, ip + at + 2).unwrap_or(0),
        ];
        let new = [
            u16::from_be_bytes([addr[0], addr[1]]),
            u16::from_be_bytes([addr[2], addr[3]]),
        ];
        d[ip + at..ip + at + 4].copy_from_slice(&addr);
        let mut check = be16(d, ip + 10).unwrap_or(0);
        for (o, n) in old.iter().zip(&new) {
            check = csum_replace(check, *o, *n, false);
        }
        d[ip + 10..ip + 12].copy_from_slice(&check.to_be_bytes());
        // The pseudo-header holds the addresses: TCP and UDP checksums follow.
        if let Some((proto, l4)) = l4 {
            update_l4_csum(d, proto, l4, &old, &new, partial);
        }
    }

    pub fn set_nw_src(&mut self, addr: [u8; 4]) {
        self.set_ipv4_addr(12, addr);
    }

    pub fn set_nw_dst(&mut self, addr: [u8; 4]) {
        self.set_ipv4_addr(16, addr);
    }

    /// Sets the DSCP bits (the TOS byte's upper six), keeping ECN.
    pub fn set_nw_tos(&mut self, tos: u8) {
        if let Some(ip) = self.ipv4() {
            let d = self.data_mut();
            let old = be16(d, ip).unwrap_or(0);
            d[ip + 1] = (tos & 0xfc) | (d[ip + 1] & 3);
            let new = be16(d, ip).unwrap_or(0);
            let check = csum_replace(be16(d, ip + 10).unwrap_or(0), old, new, false);
            d[ip + 10..ip + 12].copy_from_slice(&check.to_be_bytes());
        } else if let Some((EtherType::IPV6, off)) = self.l3() {
            let d = self.data_mut();
            if d.len() >= off + 40 {
                let w = be32(d, off).unwrap_or(0);
                let w = (w & !0x0fc0_0000) | (u32::from(tos & 0xfc) << 20);
                d[off..off + 4].copy_from_slice(&w.to_be_bytes());
            }
        }
    }

    fn set_port(&mut self, at: usize, port: u16) {
        let Some((proto, l4)) = self.l4() else { return };
        let partial = self.partial_csum();
        let d = self.data_mut();
        let Some(old) = be16(d, l4 + at) else { return };
        match proto {
            IPPROTO_TCP | IPPROTO_UDP => {
                d[l4 + at..l4 + at + 2].copy_from_slice(&port.to_be_bytes());
                // A checksum left to the device covers the ports when it is done.
                if !partial {
                    update_l4_csum(d, proto, l4, &[old], &[port], false);
                }
            }
            IPPROTO_SCTP if d.len() >= l4 + 12 => {
                d[l4 + at..l4 + at + 2].copy_from_slice(&port.to_be_bytes());
                if !partial {
                    d[l4 + 8..l4 + 12].fill(0);
                    let crc = crc32c::crc32c(&d[l4..]);
                    d[l4 + 8..l4 + 12].copy_from_slice(&crc.to_le_bytes());
                }
            }
            _ => {}
        }
    }

    pub fn set_tp_src(&mut self, port: u16) {
        self.set_port(0, port);
    }

    pub fn set_tp_dst(&mut self, port: u16) {
        self.set_port(2, port);
    }

    /// The transport protocol and header offset of an IPv4 or IPv6 packet without
    /// extension headers (what the rewrite actions' prerequisites allow).
    fn l4(&self) -> Option<(u8, usize)> {
        if let Some(ip) = self.ipv4() {
            return self.ipv4_l4(ip);
        }
        match self.l3()? {
            (EtherType::IPV6, off) if self.data().len() >= off + 40 => {
                Some((self.data()[off + 6], off + 40))
            }
            _ => None,
        }
    }

    /// Decrements the IPv4 TTL or IPv6 hop limit; a packet that would leave with 0
    /// is refused.
    pub fn dec_ttl(&mut self) -> Result<(), RewriteError> {
        if let Some(ip) = self.ipv4() {
            let d = self.data_mut();
            if d[ip + 8] <= 1 {
                return Err(RewriteError::TtlExpired);
            }
            let old = be16(d, ip + 8).unwrap_or(0);
            d[ip + 8] -= 1;
            let new = be16(d, ip + 8).unwrap_or(0);
            let check = csum_replace(be16(d, ip + 10).unwrap_or(0), old, new, false);
            d[ip + 10..ip + 12].copy_from_slice(&check.to_be_bytes());
        } else if let Some((EtherType::IPV6, off)) = self.l3() {
            let d = self.data_mut();
            if d.len() >= off + 40 {
                if d[off + 7] <= 1 {
                    return Err(RewriteError::TtlExpired);
                }
                d[off + 7] -= 1;
            }
        }
        Ok(())
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
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

fn update_l4_csum(d: &mut [u8], proto: u8, l4: usize, old: &[u16], new: &[u16], seed: bool) {
    let at = match proto {
        IPPROTO_TCP => l4 + 16,
        IPPROTO_UDP => l4 + 6,
        _ => return,
    };
    let Some(mut check) = be16(d, at) else { return };
    // UDP over IPv4 may carry no checksum at all (0); it stays without.
    if proto == IPPROTO_UDP && check == 0 && !seed {
        return;
    }
    for (o, n) in old.iter().zip(new) {
        check = csum_replace(check, *o, *n, seed);
    }
    if proto == IPPROTO_UDP && check == 0 && !seed {
        check = 0xffff;
    }
    d[at..at + 2].copy_from_slice(&check.to_be_bytes());
}

#[cfg(test)]
mod tests;
