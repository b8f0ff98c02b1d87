//! PBB rewrites (IEEE 802.1ah): a backbone header and I-TAG pushed in front of the
//! whole frame, or the outermost taken off.
//!
//! As for MPLS, the I-TAG a push starts with is the translation's to compute from
//! the key; nothing behind the I-TAG is read.

use super::{PacketBuf, RewriteError};
use crate::wire::ethernet::{self, EtherType, ETH_HDR_LEN};
use crate::wire::pbb::ITAG_LEN;

/// What a push puts in front of the frame: backbone addresses, ethertype, I-TAG.
pub const PBB_HDR_LEN: usize = ETH_HDR_LEN + ITAG_LEN;

impl PacketBuf {
    /// Puts a backbone header of ethertype `ethertype` and the I-TAG `itag` in front
    /// of the frame, its addresses those of the frame it covers (OpenFlow's
    /// `push_pbb`: they are set afterwards if the backbone's differ). As for MPLS, a
    /// checksum left to the device is finished first and a super-frame is refused
    /// (`TooBig`): what is behind the I-TAG is no device's to find.
    pub fn push_pbb(&mut self, ethertype: u16, itag: u32) -> Result<(), RewriteError> {
        if self.len < ETH_HDR_LEN {
            return Ok(());
        }
        self.before_opaque_push(PBB_HDR_LEN)?;
        let addrs = ethernet::field::ETHERTYPE.start;
        self.buf
            .copy_within(self.start..self.start + addrs, self.start - PBB_HDR_LEN);
        self.start -= PBB_HDR_LEN;
        self.len += PBB_HDR_LEN;
        let d = self.data_mut();
        d[addrs..addrs + 2].copy_from_slice(&ethertype.to_be_bytes());
        d[addrs + 2..PBB_HDR_LEN].copy_from_slice(&itag.to_be_bytes());
        Ok(())
    }

    /// Takes off the backbone header, its tags and the I-TAG: the customer's frame
    /// is what is left. Nothing on a frame that is not PBB, or too short to hold a
    /// customer's Ethernet header behind its I-TAG.
    pub fn pop_pbb(&mut self) {
        let Some((EtherType::PBB, off)) = self.l3() else {
            return;
        };
        let customer = off + ITAG_LEN;
        if self.len < customer + ETH_HDR_LEN {
            return;
        }
        let before = self.len;
        self.start += customer;
        self.len -= customer;
        self.vnet = self.vnet.unshifted(customer as u16);
        self.pad_after_pop(before);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::pbb;

    fn loaded(frame: &[u8]) -> PacketBuf {
        let mut b = PacketBuf::new(2048);
        b.load(frame, None, Default::default()).unwrap();
        b
    }

    /// A customer frame: addresses, a VLAN tag, IPv4's ethertype, 46 bytes (64 in
    /// all: above Ethernet's shortest, so that a pop pads nothing).
    fn customer() -> Vec<u8> {
        let mut f = vec![0u8; 18 + 46];
        f[..6].copy_from_slice(&[0x22; 6]);
        f[6..12].copy_from_slice(&[0x12, 0x11, 0x11, 0x11, 0x11, 0x11]);
        f[12..14].copy_from_slice(&EtherType::VLAN.to_be_bytes());
        f[14..16].copy_from_slice(&100u16.to_be_bytes());
        f[16..18].copy_from_slice(&EtherType::IPV4.to_be_bytes());
        f[18] = 0x45;
        f
    }

    #[test]
    fn a_push_covers_the_frame_and_a_pop_gives_it_back() {
        let inner = customer();
        let mut b = loaded(&inner);
        b.push_pbb(EtherType::PBB, 0x0000_0064).unwrap();
        let d = b.data();
        assert_eq!(d.len(), inner.len() + PBB_HDR_LEN);
        // The backbone addresses are the customer's; then 0x88e7 and the I-TAG.
        assert_eq!(&d[..12], &inner[..12]);
        assert_eq!(&d[12..14], &EtherType::PBB.to_be_bytes());
        assert_eq!(pbb::itag(&d[14..]), Some(0x64));
        assert_eq!(&d[PBB_HDR_LEN..], &inner[..]);
        // Twice: a backbone frame inside a backbone frame.
        b.push_pbb(EtherType::PBB, 0).unwrap();
        assert_eq!(b.data().len(), inner.len() + 2 * PBB_HDR_LEN);
        b.pop_pbb();
        b.pop_pbb();
        assert_eq!(b.data(), &inner[..]);
        // A frame that is not PBB is left alone.
        b.pop_pbb();
        assert_eq!(b.data(), &inner[..]);
    }

    #[test]
    fn a_pop_takes_the_backbone_tags_too_and_leaves_a_cut_frame_alone() {
        let inner = customer();
        // A backbone header with an S-tag before the I-TAG.
        let mut f = inner[..12].to_vec();
        f.extend_from_slice(&EtherType::QINQ.to_be_bytes());
        f.extend_from_slice(&10u16.to_be_bytes());
        f.extend_from_slice(&EtherType::PBB.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 100]);
        let header = f.len();
        f.extend_from_slice(&inner);
        let mut b = loaded(&f);
        b.pop_pbb();
        assert_eq!(b.data(), &inner[..]);
        // The I-TAG and less than a customer's Ethernet header: kept as it is.
        let cut = &f[..header + ETH_HDR_LEN - 1];
        let mut b = loaded(cut);
        b.pop_pbb();
        assert_eq!(b.data(), cut);
    }

    #[test]
    fn a_pop_keeps_a_frame_of_ethernets_shortest_at_that_length() {
        // A 42-byte ARP frame in a backbone frame of 60: popped, it is padded
        // back to 60 with zeros, as a NIC would send it.
        let mut arp = vec![0x11u8; 42];
        arp[12..14].copy_from_slice(&EtherType::ARP.to_be_bytes());
        let mut f = arp[..12].to_vec();
        f.extend_from_slice(&EtherType::PBB.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 100]);
        f.extend_from_slice(&arp);
        assert_eq!(f.len(), 60);
        let mut b = loaded(&f);
        b.pop_pbb();
        assert_eq!(b.data().len(), crate::rewrite::ETH_MIN_FRAME);
        assert_eq!(&b.data()[..42], &arp[..]);
        assert!(b.data()[42..].iter().all(|x| *x == 0));
        // A frame that came shorter than that is not padded.
        let mut b = loaded(&f[..59]);
        b.pop_pbb();
        assert_eq!(b.data(), &arp[..41]);
    }
}
