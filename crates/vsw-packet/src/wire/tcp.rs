//! The TCP header (RFC 9293).

use super::ip::IPPROTO_TCP;
use super::{check_len, get_u16, get_u32, set_u16, set_u32, Field, Truncated};
use super::{ipv4, ipv6};
use crate::checksum;

pub mod field {
    use super::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const SEQ_NUM: Field = 4..8;
    pub const ACK_NUM: Field = 8..12;
    /// Data offset (upper 4 bits) and the 12 flag bits.
    pub const OFF_FLAGS: Field = 12..14;
    /// The eight classic flags (CWR ... FIN).
    pub const FLAGS: usize = 13;
    pub const WINDOW: Field = 14..16;
    pub const CHECKSUM: Field = 16..18;
    pub const URGENT: Field = 18..20;
}

pub const MIN_HEADER_LEN: usize = 20;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;
pub const CWR: u8 = 0x80;

/// A TCP header, checked: a data offset of at least 20 bytes, all of it there.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Truncated> {
        check_len(&buffer, MIN_HEADER_LEN)?;
        let p = Packet { buffer };
        if p.header_len() < MIN_HEADER_LEN {
            return Err(Truncated);
        }
        check_len(&p.buffer, p.header_len())?;
        Ok(p)
    }

    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    pub fn seq_number(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::SEQ_NUM)
    }

    /// The header's length in bytes (the data offset), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::OFF_FLAGS.start] >> 4) * 4
    }

    /// All 12 flag bits (as OpenFlow's `tcp_flags`).
    pub fn flags(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::OFF_FLAGS) & 0x0fff
    }

    /// The eight classic flags.
    pub fn flags_byte(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The header, options included.
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, p: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT, p);
    }

    pub fn set_dst_port(&mut self, p: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT, p);
    }

    pub fn set_seq_number(&mut self, s: u32) {
        set_u32(self.buffer.as_mut(), field::SEQ_NUM, s);
    }

    pub fn set_flags_byte(&mut self, f: u8) {
        self.buffer.as_mut()[field::FLAGS] = f;
    }

    pub fn set_checksum(&mut self, c: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, c);
    }

    /// Computes the checksum anew over the header and everything after it in the
    /// buffer, starting from the pseudo-header's sum.
    pub fn fill_checksum(&mut self, pseudo_header: u64) {
        self.set_checksum(0);
        let c = !checksum::fold(checksum::sum(self.buffer.as_ref(), pseudo_header));
        self.set_checksum(c);
    }
}

/// The pseudo-header's sum for a TCP segment of `tcp_len` bytes whose IP header
/// starts at `l3` in `frame` (IPv6 when `v6`): addresses, protocol and length.
pub fn pseudo_header_sum(frame: &[u8], l3: usize, v6: bool, tcp_len: usize) -> u64 {
    let base = u64::from(IPPROTO_TCP) + tcp_len as u64;
    let ip = &frame[l3..];
    let with_addresses = if v6 {
        ipv6::Packet::new_checked(ip).map(|p| checksum::sum(p.addresses(), base))
    } else {
        ipv4::Packet::new_checked(ip).map(|p| checksum::sum(p.addresses(), base))
    };
    // The callers checked the IP header already.
    with_addresses.unwrap_or(base)
}

/// Writes a 20-byte header at the start of `b` (no options; checksum 0).
pub fn emit(b: &mut [u8], src: u16, dst: u16, seq: u32, flags: u16, window: u16) {
    let h = &mut b[..MIN_HEADER_LEN];
    h.fill(0);
    set_u16(h, field::SRC_PORT, src);
    set_u16(h, field::DST_PORT, dst);
    set_u32(h, field::SEQ_NUM, seq);
    set_u16(h, field::OFF_FLAGS, (5u16 << 12) | (flags & 0x0fff));
    set_u16(h, field::WINDOW, window);
}
