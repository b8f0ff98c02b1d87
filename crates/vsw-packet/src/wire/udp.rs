//! The UDP header (RFC 768).

use super::{check_len, get_u16, set_u16, Field, Truncated};

pub mod field {
    use super::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
}

pub const HEADER_LEN: usize = 8;

/// A UDP header, checked to be whole.
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

    pub fn len(&self) -> usize {
        usize::from(get_u16(self.buffer.as_ref(), field::LENGTH))
    }

    pub fn is_empty(&self) -> bool {
        self.len() <= HEADER_LEN
    }

    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, p: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT, p);
    }

    pub fn set_dst_port(&mut self, p: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT, p);
    }

    pub fn set_len(&mut self, len: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    pub fn set_checksum(&mut self, c: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, c);
    }
}

/// Writes a header at the start of `b` for `payload_len` bytes after it (checksum 0:
/// none, as IPv4 allows).
pub fn emit(b: &mut [u8], src: u16, dst: u16, payload_len: usize) {
    let h = &mut b[..HEADER_LEN];
    set_u16(h, field::SRC_PORT, src);
    set_u16(h, field::DST_PORT, dst);
    set_u16(h, field::LENGTH, (HEADER_LEN + payload_len) as u16);
    set_u16(h, field::CHECKSUM, 0);
}
