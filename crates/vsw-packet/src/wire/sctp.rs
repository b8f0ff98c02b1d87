//! The SCTP common header (RFC 9260); its checksum is CRC32c over the whole packet.

use super::{check_len, get_u16, set_u16, Field, Truncated};

pub mod field {
    use super::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const VERIFICATION_TAG: Field = 4..8;
    /// CRC32c, little-endian on the wire.
    pub const CHECKSUM: Field = 8..12;
}

pub const HEADER_LEN: usize = 12;

/// An SCTP packet, checked to hold its common header.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Truncated> {
        check_len(&buffer, HEADER_LEN)?;
        Ok(Packet { buffer })
    }

    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, p: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT, p);
    }

    pub fn set_dst_port(&mut self, p: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT, p);
    }

    /// Computes the CRC32c over the packet anew.
    pub fn fill_checksum(&mut self) {
        let b = self.buffer.as_mut();
        b[field::CHECKSUM].fill(0);
        let crc = crc32c::crc32c(b);
        b[field::CHECKSUM].copy_from_slice(&crc.to_le_bytes());
    }
}
