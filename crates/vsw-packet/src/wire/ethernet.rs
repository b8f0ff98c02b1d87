//! Ethernet II and 802.1Q/802.1ad framing: the header, its VLAN tags (walked here
//! and nowhere else), and copying a frame with a tag the device took out put back.

use super::{check_len, get_u16, set_u16, Field, Truncated};
use crate::mac::MacAddr;

pub const ETH_HDR_LEN: usize = 14;
pub const VLAN_TAG_LEN: usize = 4;

/// Where the fields are.
pub mod field {
    use super::Field;
    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    /// The ethertype, or the TPID of the first tag.
    pub const ETHERTYPE: Field = 12..14;
    /// A tag's fields, from where the tag starts (at [`ETHERTYPE`]'s start): its TPID,
    /// its TCI, and the ethertype (or next TPID) after it.
    pub const TAG_TPID: Field = 0..2;
    pub const TAG_TCI: Field = 2..4;
    pub const TAG_NEXT: Field = 4..6;
}

/// Ethertypes vsw understands.
pub struct EtherType;

impl EtherType {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    /// Reverse ARP (RFC 903): ARP's layout, opcodes 3 and 4.
    pub const RARP: u16 = 0x8035;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const IPV6: u16 = 0x86dd;
    pub const TEB: u16 = 0x6558;
    /// MPLS unicast and multicast (RFC 5332).
    pub const MPLS: u16 = 0x8847;
    pub const MPLS_MULTICAST: u16 = 0x8848;
    /// Provider backbone bridging's I-TAG (IEEE 802.1ah).
    pub const PBB: u16 = 0x88e7;
    /// The Network Service Header (RFC 8300).
    pub const NSH: u16 = 0x894f;

    /// Whether `t` is ARP or reverse ARP (same layout, the same fields).
    #[inline]
    pub fn is_arp(t: u16) -> bool {
        t == EtherType::ARP || t == EtherType::RARP
    }

    /// Whether `t` is the TPID of a VLAN tag.
    #[inline]
    pub fn is_tag(t: u16) -> bool {
        t == EtherType::VLAN || t == EtherType::QINQ
    }
}

/// An 802.1Q tag: its TPID and the 16-bit tag control information (PCP, DEI, VID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanTag {
    pub tpid: u16,
    pub tci: u16,
}

impl VlanTag {
    pub fn vid(&self) -> u16 {
        self.tci & 0x0fff
    }
}

/// The most tags read from a frame (802.1ad outer + 802.1Q inner, as Open vSwitch
/// reads); a third stays in the payload.
pub const MAX_TAGS: usize = 2;

/// An Ethernet header, checked to be whole.
#[derive(Clone, Copy, Debug)]
pub struct Frame<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    pub fn new_checked(buffer: T) -> Result<Frame<T>, Truncated> {
        check_len(&buffer, ETH_HDR_LEN)?;
        Ok(Frame { buffer })
    }

    pub fn dst_addr(&self) -> MacAddr {
        MacAddr::from_slice(&self.buffer.as_ref()[field::DESTINATION]).unwrap_or_default()
    }

    pub fn src_addr(&self) -> MacAddr {
        MacAddr::from_slice(&self.buffer.as_ref()[field::SOURCE]).unwrap_or_default()
    }

    /// The ethertype, or the first tag's TPID.
    pub fn ethertype(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    /// Walks up to `max_tags` VLAN tags: the TCIs, the ethertype after them and where
    /// the payload starts. A tag cut short is [`Truncated`].
    #[inline]
    pub fn tags(&self, max_tags: usize) -> Result<Tags, Truncated> {
        let b = self.buffer.as_ref();
        let mut t = Tags {
            tci: [0; MAX_TAGS],
            count: 0,
            ethertype: self.ethertype(),
            payload: ETH_HDR_LEN,
        };
        while EtherType::is_tag(t.ethertype) && usize::from(t.count) < max_tags.min(MAX_TAGS) {
            // The tag starts where the ethertype field it replaces starts.
            let at = t.payload - 2;
            let tag = b.get(at..at + field::TAG_NEXT.end).ok_or(Truncated)?;
            t.tci[usize::from(t.count)] = get_u16(tag, field::TAG_TCI);
            t.ethertype = get_u16(tag, field::TAG_NEXT);
            t.payload += VLAN_TAG_LEN;
            t.count += 1;
        }
        Ok(t)
    }

    /// The outermost tag's TCI, if the frame has one.
    pub fn outer_tci(&self) -> Option<u16> {
        let t = self.tags(1).ok()?;
        (t.count == 1).then_some(t.tci[0])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    pub fn set_dst_addr(&mut self, mac: MacAddr) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&mac.0);
    }

    pub fn set_src_addr(&mut self, mac: MacAddr) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&mac.0);
    }

    /// Writes a tag (TPID and TCI) where the ethertype field is; what follows must
    /// have been moved out of the way.
    pub fn set_outer_tag(&mut self, tag: VlanTag) {
        let b = &mut self.buffer.as_mut()[field::ETHERTYPE.start..];
        set_u16(b, field::TAG_TPID, tag.tpid);
        set_u16(b, field::TAG_TCI, tag.tci);
    }

    /// Sets the outer tag's TCI; a frame without a tag is left alone.
    pub fn set_outer_tci(&mut self, tci: u16) {
        if self.outer_tci().is_some() {
            let b = &mut self.buffer.as_mut()[field::ETHERTYPE.start..];
            set_u16(b, field::TAG_TCI, tci);
        }
    }
}

/// A frame's VLAN tags as walked: their TCIs (outermost first), the ethertype after
/// them and the offset of the payload (the L3 header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tags {
    tci: [u16; MAX_TAGS],
    count: u8,
    pub ethertype: u16,
    pub payload: usize,
}

impl Tags {
    /// The TCIs, outermost first.
    pub fn tcis(&self) -> &[u16] {
        &self.tci[..usize::from(self.count)]
    }
}

/// The ethertype after up to two tags and where its header starts; `None` for a frame
/// cut short in its Ethernet header or tags.
#[inline]
pub fn l3(frame: &[u8]) -> Option<(u16, usize)> {
    let t = Frame::new_checked(frame).ok()?.tags(MAX_TAGS).ok()?;
    Some((t.ethertype, t.payload))
}

/// Copies `frame` into `out`, putting `tag` back after the two MAC addresses when the
/// receiving device took it out of the frame (Linux does so on receive).
/// Returns the bytes written, or `None` when `out` is too small or the frame has no
/// room for addresses.
pub fn copy_frame(out: &mut [u8], frame: &[u8], tag: Option<VlanTag>) -> Option<usize> {
    match tag {
        None => {
            out.get_mut(..frame.len())?.copy_from_slice(frame);
            Some(frame.len())
        }
        Some(tag) => {
            // The addresses, the tag, then the rest of the frame from its ethertype on.
            let addrs = field::ETHERTYPE.start;
            if frame.len() < addrs {
                return None;
            }
            let total = frame.len() + VLAN_TAG_LEN;
            let out = out.get_mut(..total)?;
            out[..addrs].copy_from_slice(&frame[..addrs]);
            let tag_at = &mut out[addrs..];
            set_u16(tag_at, field::TAG_TPID, tag.tpid);
            set_u16(tag_at, field::TAG_TCI, tag.tci);
            out[addrs + VLAN_TAG_LEN..].copy_from_slice(&frame[addrs..]);
            Some(total)
        }
    }
}

/// The length of what follows the Ethernet header and any VLAN tags in it (at most
/// two): the IP packet's length, which an MTU limits.
pub fn l3_len(frame: &[u8]) -> usize {
    l3(frame).map_or(0, |(_, at)| frame.len() - at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l3_length_after_tags() {
        let mut f = vec![0u8; 14 + 100];
        f[12..14].copy_from_slice(&EtherType::IPV4.to_be_bytes());
        assert_eq!(l3_len(&f), 100);
        // QinQ: two tags before the IP packet.
        let mut q = vec![0u8; 22 + 100];
        q[12..14].copy_from_slice(&EtherType::QINQ.to_be_bytes());
        q[16..18].copy_from_slice(&EtherType::VLAN.to_be_bytes());
        q[20..22].copy_from_slice(&EtherType::IPV6.to_be_bytes());
        assert_eq!(l3_len(&q), 100);
        assert_eq!(l3_len(&[0u8; 5]), 0, "a stub of a frame");
    }

    #[test]
    fn copy_reinserts_tag() {
        let frame: Vec<u8> = (0u8..20).collect();
        let mut out = [0u8; 64];
        let n = copy_frame(
            &mut out,
            &frame,
            Some(VlanTag {
                tpid: EtherType::VLAN,
                tci: 0x2064,
            }),
        )
        .unwrap();
        assert_eq!(n, 24);
        assert_eq!(&out[..12], &frame[..12]);
        assert_eq!(&out[12..16], &[0x81, 0x00, 0x20, 0x64]);
        assert_eq!(&out[16..24], &frame[12..]);
    }

    #[test]
    fn copy_refuses_small_output() {
        let mut out = [0u8; 4];
        assert_eq!(copy_frame(&mut out, &[0u8; 14], None), None);
        assert_eq!(
            copy_frame(
                &mut [0u8; 64],
                &[0u8; 6],
                Some(VlanTag {
                    tpid: 0x8100,
                    tci: 1
                })
            ),
            None
        );
    }
}
