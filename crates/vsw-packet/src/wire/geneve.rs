//! The Geneve header (RFC 8926), carried in UDP to port 6081.

use super::{check_len, get_u16, get_u32, set_u16, set_u32, Field, Truncated};

pub mod field {
    use super::Field;
    /// Version (upper 2 bits) and the options' length in 4-byte units.
    pub const VER_OPT_LEN: usize = 0;
    /// O (control packet) and C (critical options) flags.
    pub const FLAGS: usize = 1;
    pub const PROTOCOL: Field = 2..4;
    /// The VNI in the upper 24 bits, reserved below.
    pub const VNI: Field = 4..8;
    pub const OPTIONS: usize = 8;
}

pub const MIN_HEADER_LEN: usize = 8;
pub const UDP_PORT: u16 = 6081;

const FLAG_CONTROL: u8 = 0x80;
const FLAG_CRITICAL: u8 = 0x40;

/// A Geneve header, checked: version 0, its options all there.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Truncated> {
        check_len(&buffer, MIN_HEADER_LEN)?;
        let p = Packet { buffer };
        if p.buffer.as_ref()[field::VER_OPT_LEN] >> 6 != 0 {
            return Err(Truncated);
        }
        check_len(&p.buffer, p.header_len())?;
        Ok(p)
    }

    /// The header's length, options included.
    pub fn header_len(&self) -> usize {
        MIN_HEADER_LEN + usize::from(self.buffer.as_ref()[field::VER_OPT_LEN] & 0x3f) * 4
    }

    pub fn is_control(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_CONTROL != 0
    }

    pub fn has_critical_options(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_CRITICAL != 0
    }

    /// The payload's ethertype (0x6558 for an Ethernet frame).
    pub fn protocol(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PROTOCOL)
    }

    pub fn vni(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VNI) >> 8
    }

    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::OPTIONS..self.header_len()]
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// Writes a header without options at the start of `b`.
pub fn emit(b: &mut [u8], protocol: u16, vni: u32) {
    b[field::VER_OPT_LEN] = 0;
    b[field::FLAGS] = 0;
    set_u16(b, field::PROTOCOL, protocol);
    set_u32(b, field::VNI, (vni & 0x00ff_ffff) << 8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ethernet::EtherType;

    #[test]
    fn options_are_checked_and_skipped() {
        let mut b = [0u8; 20];
        emit(&mut b, EtherType::TEB, 77);
        b[field::VER_OPT_LEN] = 2; // 8 bytes of options
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            (p.vni(), p.protocol(), p.header_len()),
            (77, EtherType::TEB, 16)
        );
        assert_eq!(p.options().len(), 8);
        assert_eq!(p.payload().len(), 4);
        assert!(Packet::new_checked(&b[..15]).is_err(), "options cut off");
        b[field::VER_OPT_LEN] = 0x40;
        assert!(Packet::new_checked(&b[..]).is_err(), "version 1");
    }
}
