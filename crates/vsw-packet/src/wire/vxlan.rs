//! The VXLAN header (RFC 7348), carried in UDP to port 4789.

use super::{check_len, get_u32, set_u32, Field, Truncated};

pub mod field {
    use super::Field;
    /// Flags (the I bit: the VNI is valid) and reserved bits.
    pub const FLAGS: Field = 0..4;
    /// The VNI in the upper 24 bits, reserved below.
    pub const VNI: Field = 4..8;
}

pub const HEADER_LEN: usize = 8;
pub const UDP_PORT: u16 = 4789;

const FLAG_VNI_VALID: u32 = 0x0800_0000;

/// A VXLAN header, checked to be whole.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Truncated> {
        check_len(&buffer, HEADER_LEN)?;
        Ok(Packet { buffer })
    }

    /// Whether the I flag says the VNI is valid.
    pub fn vni_valid(&self) -> bool {
        get_u32(self.buffer.as_ref(), field::FLAGS) & FLAG_VNI_VALID != 0
    }

    pub fn vni(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VNI) >> 8
    }

    /// The inner Ethernet frame.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

/// Writes a header with the I flag and `vni` at the start of `b`.
pub fn emit(b: &mut [u8], vni: u32) {
    set_u32(b, field::FLAGS, FLAG_VNI_VALID);
    set_u32(b, field::VNI, (vni & 0x00ff_ffff) << 8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vni_round_trips() {
        let mut b = [0u8; 10];
        emit(&mut b, 0x12_3456);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.vni_valid());
        assert_eq!(p.vni(), 0x12_3456);
        assert_eq!(p.payload().len(), 2);
        assert!(Packet::new_checked(&b[..7]).is_err());
    }
}
