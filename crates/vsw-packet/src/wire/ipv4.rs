//! The IPv4 header (RFC 791).

use super::{check_len, get_u16, get_u32, set_u16, Field, Truncated};
use crate::checksum;

pub mod field {
    use super::Field;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: Field = 2..4;
    pub const IDENT: Field = 4..6;
    /// Flags (DF, MF) and the fragment offset in 8-byte units.
    pub const FLG_OFF: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC_ADDR: Field = 12..16;
    pub const DST_ADDR: Field = 16..20;
}

pub const MIN_HEADER_LEN: usize = 20;

const MORE_FRAGMENTS: u16 = 0x2000;
const DONT_FRAGMENT: u16 = 0x4000;
/// The don't-fragment flag as it sits in the flags-and-offset field.
pub const FLAG_DF: u16 = DONT_FRAGMENT;
const OFFSET_MASK: u16 = 0x1fff;

/// An IPv4 header, checked: version 4, a header length of at least 20 bytes, all of
/// it there (options included).
#[derive(Clone, Copy, Debug)]
pub struct Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Truncated> {
        check_len(&buffer, MIN_HEADER_LEN)?;
        let p = Packet { buffer };
        if p.version() != 4 || p.header_len() < MIN_HEADER_LEN {
            return Err(Truncated);
        }
        check_len(&p.buffer, p.header_len())?;
        Ok(p)
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// The header's length in bytes, options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// The TOS byte: DSCP in the upper six bits, ECN below.
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::TOS]
    }

    /// The packet's length, header included, as the header says.
    pub fn total_len(&self) -> usize {
        usize::from(get_u16(self.buffer.as_ref(), field::LENGTH))
    }

    pub fn ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::IDENT)
    }

    pub fn more_fragments(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & MORE_FRAGMENTS != 0
    }

    pub fn dont_fragment(&self) -> bool {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & DONT_FRAGMENT != 0
    }

    /// The fragment offset in 8-byte units (0 for a first fragment or a whole packet).
    pub fn frag_offset(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & OFFSET_MASK
    }

    /// Whether the packet is a fragment (a first one included).
    pub fn is_fragment(&self) -> bool {
        self.more_fragments() || self.frag_offset() != 0
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    pub fn src_addr(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::SRC_ADDR)
    }

    pub fn dst_addr(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::DST_ADDR)
    }

    /// Source and destination, as the TCP/UDP pseudo-header sums them.
    pub fn addresses(&self) -> &[u8] {
        &self.buffer.as_ref()[field::SRC_ADDR.start..field::DST_ADDR.end]
    }

    /// The header, options included.
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    /// Whether the header checksum is right.
    pub fn checksum_right(&self) -> bool {
        checksum::fold(checksum::sum(self.header(), 0)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_tos(&mut self, tos: u8) {
        self.buffer.as_mut()[field::TOS] = tos;
    }

    pub fn set_total_len(&mut self, len: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    pub fn set_ident(&mut self, id: u16) {
        set_u16(self.buffer.as_mut(), field::IDENT, id);
    }

    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    pub fn set_checksum(&mut self, c: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    pub fn set_src_addr(&mut self, a: [u8; 4]) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a);
    }

    pub fn set_dst_addr(&mut self, a: [u8; 4]) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a);
    }

    /// Computes the header checksum anew.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.header());
        self.set_checksum(c);
    }

    /// The whole buffer, for rewrites that update checksums beyond the header.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
}

/// The fields of a header to write ([`Repr::emit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Options (NOP) fill what is beyond 20 bytes.
    pub header_len: usize,
    pub tos: u8,
    pub total_len: u16,
    /// Flags and fragment offset as on the wire.
    pub frag: u16,
    pub ttl: u8,
    pub protocol: u8,
    pub src: [u8; 4],
    pub dst: [u8; 4],
}

impl Repr {
    /// Writes the header, with its checksum, at the start of `b`.
    pub fn emit(&self, b: &mut [u8]) {
        let h = &mut b[..self.header_len];
        h.fill(0);
        h[field::VER_IHL] = 0x40 | (self.header_len / 4) as u8;
        h[field::TOS] = self.tos;
        set_u16(h, field::LENGTH, self.total_len);
        set_u16(h, field::FLG_OFF, self.frag);
        h[field::TTL] = self.ttl;
        h[field::PROTOCOL] = self.protocol;
        h[field::SRC_ADDR].copy_from_slice(&self.src);
        h[field::DST_ADDR].copy_from_slice(&self.dst);
        // NOP options.
        h[MIN_HEADER_LEN..].fill(1);
        let c = checksum::checksum(h);
        set_u16(h, field::CHECKSUM, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_version_and_lengths() {
        let mut b = [0u8; 24];
        Repr {
            header_len: 24,
            tos: 0,
            total_len: 24,
            frag: 0x2000,
            ttl: 9,
            protocol: 17,
            src: [1, 2, 3, 4],
            dst: [5, 6, 7, 8],
        }
        .emit(&mut b);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.header_len(), p.total_len(), p.ttl()), (24, 24, 9));
        assert_eq!((p.src_addr(), p.dst_addr()), (0x0102_0304, 0x0506_0708));
        assert!(p.more_fragments() && p.is_fragment() && p.frag_offset() == 0);
        assert!(p.checksum_right());
        assert!(Packet::new_checked(&b[..23]).is_err(), "options cut off");
        b[0] = 0x44;
        assert!(Packet::new_checked(&b[..]).is_err(), "IHL below 5");
        b[0] = 0x65;
        assert!(Packet::new_checked(&b[..]).is_err(), "version 6");
        assert!(Packet::new_checked(&b[..19]).is_err());
    }
}
