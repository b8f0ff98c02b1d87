//! MPLS rewrites: a label stack entry pushed after the Ethernet header and its tags,
//! the outermost popped, its bits set, its TTL decremented.
//!
//! Nothing behind the labels is read: the entry a push starts with is the
//! translation's to compute (from the key), as Open vSwitch's datapath is given it.

use super::{PacketBuf, RewriteError};
use crate::wire::ethernet::EtherType;
use crate::wire::mpls::{self, LSE_LEN, TTL_MASK};

/// Whether `t` is one of MPLS's ethertypes.
#[inline]
pub fn is_mpls(t: u16) -> bool {
    t == EtherType::MPLS || t == EtherType::MPLS_MULTICAST
}

impl PacketBuf {
    /// The outermost label stack entry's offset when the frame is MPLS and holds one.
    pub(super) fn mpls_top(&self) -> Option<usize> {
        let (t, off) = self.l3()?;
        (is_mpls(t) && self.data().len() >= off + LSE_LEN).then_some(off)
    }

    /// Pushes `lse` as the new outermost entry and makes the ethertype `ethertype`
    /// (one of MPLS's). A checksum left to the device is finished first (nothing
    /// past the labels is the device's to find); a super-frame is refused
    /// (`TooBig`: cut into MPLS packets it would need a segmentation that looks
    /// behind the labels, which vsw's does not).
    pub fn push_mpls(&mut self, ethertype: u16, lse: u32) -> Result<(), RewriteError> {
        let Some((_, off)) = self.l3() else {
            return Ok(());
        };
        self.before_opaque_push(LSE_LEN)?;
        // Everything up to the ethertype moves forward by an entry's length; the
        // entry goes between the ethertype and what followed it.
        self.buf
            .copy_within(self.start..self.start + off, self.start - LSE_LEN);
        self.start -= LSE_LEN;
        self.len += LSE_LEN;
        let d = self.data_mut();
        d[off - 2..off].copy_from_slice(&ethertype.to_be_bytes());
        d[off..off + LSE_LEN].copy_from_slice(&lse.to_be_bytes());
        Ok(())
    }

    /// Takes off the outermost entry; what follows is of `ethertype`. Nothing on a
    /// frame that is not MPLS.
    pub fn pop_mpls(&mut self, ethertype: u16) {
        let Some(off) = self.mpls_top() else {
            return;
        };
        let before = self.len;
        self.buf
            .copy_within(self.start..self.start + off, self.start + LSE_LEN);
        self.start += LSE_LEN;
        self.len -= LSE_LEN;
        self.vnet = self.vnet.unshifted(LSE_LEN as u16);
        let d = self.data_mut();
        d[off - 2..off].copy_from_slice(&ethertype.to_be_bytes());
        self.pad_after_pop(before);
    }

    /// Sets the outermost entry's bits under `mask` to `value`'s.
    pub fn set_mpls(&mut self, value: u32, mask: u32) {
        let Some(off) = self.mpls_top() else {
            return;
        };
        let d = self.data_mut();
        let old = mpls::top_entry(&d[off..]).unwrap_or_default();
        let new = (old & !mask) | (value & mask);
        d[off..off + LSE_LEN].copy_from_slice(&new.to_be_bytes());
    }

    /// Decrements the outermost entry's TTL; a packet that would leave with 0 is
    /// refused.
    pub fn dec_mpls_ttl(&mut self) -> Result<(), RewriteError> {
        let Some(off) = self.mpls_top() else {
            return Ok(());
        };
        let lse = mpls::top_entry(&self.data()[off..]).unwrap_or_default();
        let ttl = mpls::ttl(lse);
        if ttl <= 1 {
            return Err(RewriteError::TtlExpired);
        }
        self.set_mpls(u32::from(ttl - 1), TTL_MASK);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::mpls::{entry, BOS_MASK};

    /// An untagged IPv4 frame's first bytes (addresses, ethertype, a TTL of 64 at
    /// its IP header's offset 8).
    fn ipv4_frame() -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[12..14].copy_from_slice(&EtherType::IPV4.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&20u16.to_be_bytes());
        f[22] = 64;
        crate::wire::ipv4::Packet::new_checked(&mut f[14..])
            .unwrap()
            .fill_checksum();
        f
    }

    fn loaded(frame: &[u8]) -> PacketBuf {
        let mut b = PacketBuf::new(2048);
        b.load(frame, None, Default::default()).unwrap();
        b
    }

    #[test]
    fn a_pushed_entry_goes_after_the_tags_and_a_pop_takes_it_off_again() {
        let ip = ipv4_frame();
        let mut b = loaded(&ip);
        b.push_vlan(EtherType::VLAN).unwrap();
        let tagged = b.data().to_vec();
        let lse = entry(16, 1, true, 63);
        b.push_mpls(EtherType::MPLS, lse).unwrap();
        let d = b.data();
        assert_eq!(d.len(), tagged.len() + 4);
        assert_eq!(d[..16], tagged[..16], "addresses and tag stay in front");
        assert_eq!(d[16..18], EtherType::MPLS.to_be_bytes());
        assert_eq!(d[18..22], lse.to_be_bytes());
        assert_eq!(d[22..], tagged[18..], "the IP packet follows the entry");

        b.set_mpls(entry(99, 0, false, 0), mpls::LABEL_MASK);
        assert_eq!(
            mpls::top_entry(&b.data()[18..]),
            Some(entry(99, 1, true, 63))
        );
        b.dec_mpls_ttl().unwrap();
        assert_eq!(mpls::ttl(mpls::top_entry(&b.data()[18..]).unwrap()), 62);

        b.pop_mpls(EtherType::IPV4);
        assert_eq!(b.data(), &tagged[..]);
        // Popping a frame that is no longer MPLS changes nothing.
        b.pop_mpls(EtherType::IPV4);
        assert_eq!(b.data(), &tagged[..]);
    }

    #[test]
    fn ttl_copies_run_between_the_label_and_the_ip_header_below_it() {
        use crate::rewrite::FieldWrite;
        let mut b = loaded(&ipv4_frame());
        b.push_mpls(EtherType::MPLS, entry(7, 0, true, 20)).unwrap();
        b.write_field(FieldWrite::CopyTtlIn);
        let ip = &b.data()[18..];
        assert_eq!(ip[8], 20);
        assert!(
            crate::wire::ipv4::Packet::new_checked(ip)
                .unwrap()
                .checksum_right(),
            "the IPv4 checksum follows the TTL"
        );
        b.set_mpls(0, TTL_MASK);
        b.write_field(FieldWrite::CopyTtlOut);
        assert_eq!(mpls::ttl(mpls::top_entry(&b.data()[14..]).unwrap()), 20);
    }

    #[test]
    fn a_label_ttl_at_one_runs_out() {
        let mut b = loaded(&ipv4_frame());
        b.push_mpls(EtherType::MPLS, entry(0, 0, true, 1)).unwrap();
        assert_eq!(b.dec_mpls_ttl(), Err(RewriteError::TtlExpired));
        assert_eq!(mpls::top_entry(&b.data()[14..]), Some(BOS_MASK | 1));
    }

    #[test]
    fn a_super_frame_is_not_pushed_on() {
        let mut b = loaded(&ipv4_frame());
        b.vnet.gso_type = crate::vnet::VNET_GSO_TCPV4;
        b.vnet.gso_size = 1000;
        assert_eq!(b.push_mpls(EtherType::MPLS, 0), Err(RewriteError::TooBig));
    }
}
