//! Headers put in front of the whole frame with a new Ethernet header (Open
//! vSwitch's generic `encap(nsh|mpls)` then `encap(ethernet)`), and taken off
//! with it again (`decap()` twice).
//!
//! The datapath keeps every frame Ethernet between actions: translation turns
//! the two encaps into one push and the two decaps into one pop, so no action
//! ever meets a frame that starts with a bare NSH or MPLS header.

use super::{PacketBuf, RewriteError};
use crate::wire::ethernet::ETH_HDR_LEN;
use crate::wire::mpls::{self, LSE_LEN};

impl PacketBuf {
    /// Puts an Ethernet header (addresses 0, ethertype `ethertype`) and a header
    /// of `len` bytes in front of the frame, `write` filling that header where it
    /// lies (zeroed first). As for MPLS's push, a checksum left to the device is
    /// finished first and a super-frame refused (`TooBig`): no device looks
    /// behind the pushed header.
    pub(super) fn push_outer(
        &mut self,
        ethertype: u16,
        len: usize,
        write: impl FnOnce(&mut [u8]),
    ) -> Result<(), RewriteError> {
        let total = ETH_HDR_LEN + len;
        self.before_opaque_push(total)?;
        self.start -= total;
        self.len += total;
        let d = self.data_mut();
        d[..12].fill(0);
        d[12..ETH_HDR_LEN].copy_from_slice(&ethertype.to_be_bytes());
        let header = &mut d[ETH_HDR_LEN..total];
        header.fill(0);
        write(header);
        Ok(())
    }

    /// Takes off the frame's first `len` bytes (its Ethernet header and what
    /// follows it up to the carried frame), when an Ethernet header is left.
    pub(super) fn pop_outer(&mut self, len: usize) -> Result<(), RewriteError> {
        if self.len < len + ETH_HDR_LEN {
            return Err(RewriteError::NotDecapsulable);
        }
        let before = self.len;
        self.start += len;
        self.len -= len;
        self.vnet = self.vnet.unshifted(len as u16);
        self.pad_after_pop(before);
        Ok(())
    }

    /// Puts an Ethernet header of `ethertype` (one of MPLS's) and the label stack
    /// entry `lse` in front of the whole frame: Ethernet over MPLS (Open vSwitch's
    /// `encap(mpls)` then `encap(ethernet)`).
    pub fn push_mpls_ethernet(&mut self, ethertype: u16, lse: u32) -> Result<(), RewriteError> {
        self.push_outer(ethertype, LSE_LEN, |h| {
            h.copy_from_slice(&lse.to_be_bytes())
        })
    }

    /// Takes off the Ethernet header (with its tags) and the outermost label
    /// stack entry, which must be the bottom of its stack: the Ethernet frame it
    /// carried is left. Any other frame is refused, unchanged.
    pub fn pop_mpls_ethernet(&mut self) -> Result<(), RewriteError> {
        let off = self.mpls_top().ok_or(RewriteError::NotDecapsulable)?;
        let bottom = mpls::top_entry(&self.data()[off..]).is_some_and(mpls::bos);
        if !bottom {
            return Err(RewriteError::NotDecapsulable);
        }
        self.pop_outer(off + LSE_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ethernet::EtherType;

    fn loaded(frame: &[u8]) -> PacketBuf {
        let mut b = PacketBuf::new(2048);
        b.load(frame, None, Default::default()).unwrap();
        b
    }

    #[test]
    fn ethernet_over_mpls_is_pushed_in_front_and_popped_whole() {
        let mut f = vec![0u8; 14 + 46];
        f[..6].copy_from_slice(&[0x22; 6]);
        f[6..12].copy_from_slice(&[0x12; 6]);
        f[12..14].copy_from_slice(&EtherType::IPV4.to_be_bytes());
        let lse = (100 << mpls::LABEL_SHIFT) | mpls::BOS_MASK | 64;
        let mut b = loaded(&f);
        b.push_mpls_ethernet(EtherType::MPLS, lse).unwrap();
        let d = b.data().to_vec();
        assert_eq!(&d[..12], &[0; 12]);
        assert_eq!(&d[12..14], &EtherType::MPLS.to_be_bytes());
        assert_eq!(mpls::top_entry(&d[14..]), Some(lse));
        assert_eq!(&d[18..], &f[..]);
        b.pop_mpls_ethernet().unwrap();
        assert_eq!(b.data(), &f[..]);
        // Not the bottom of its stack: what follows is a label, not a frame.
        let mut b = loaded(&f);
        b.push_mpls_ethernet(EtherType::MPLS, lse & !mpls::BOS_MASK)
            .unwrap();
        let pushed = b.data().to_vec();
        assert_eq!(b.pop_mpls_ethernet(), Err(RewriteError::NotDecapsulable));
        assert_eq!(b.data(), &pushed[..]);
        // Not MPLS at all; and a label with less than an Ethernet header behind.
        let mut b = loaded(&f);
        assert_eq!(b.pop_mpls_ethernet(), Err(RewriteError::NotDecapsulable));
        let mut cut = pushed[..14 + 4 + 10].to_vec();
        cut[14 + 2] |= 1;
        let mut b = loaded(&cut);
        assert_eq!(b.pop_mpls_ethernet(), Err(RewriteError::NotDecapsulable));
        assert_eq!(b.data(), &cut[..]);
    }
}
