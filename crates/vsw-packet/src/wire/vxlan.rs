//! The VXLAN header (RFC 7348), carried in UDP to port 4789, and its Generic
//! Protocol Extension (VXLAN-GPE, draft-ietf-nvo3-vxlan-gpe, as Open vSwitch has
//! it): the P flag says the last byte of the first word names what follows —
//! Ethernet, or an IPv4, IPv6 or NSH packet with no Ethernet header.

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
/// GPE: the next protocol byte is there.
const FLAG_GPE: u32 = 0x0400_0000;
/// GPE: an OAM packet (which switches drop, as Open vSwitch does).
const FLAG_GPE_OAM: u32 = 0x0100_0000;

/// GPE's next protocols.
pub const NP_IPV4: u8 = 1;
pub const NP_IPV6: u8 = 2;
pub const NP_ETHERNET: u8 = 3;
pub const NP_NSH: u8 = 4;

/// The next protocol that carries packets of Ethernet type `t` (`None`: GPE
/// carries no such packet without an Ethernet header).
pub fn next_protocol_of(t: u16) -> Option<u8> {
    match t {
        0x0800 => Some(NP_IPV4),
        0x86dd => Some(NP_IPV6),
        0x894f => Some(NP_NSH),
        0x6558 => Some(NP_ETHERNET),
        _ => None,
    }
}

/// The Ethernet type of next protocol `np`, other than Ethernet's own.
pub fn ethertype_of(np: u8) -> Option<u16> {
    match np {
        NP_IPV4 => Some(0x0800),
        NP_IPV6 => Some(0x86dd),
        NP_NSH => Some(0x894f),
        _ => None,
    }
}

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

    /// GPE: the next protocol, when the P flag is set; `None` for plain VXLAN.
    pub fn gpe_next_protocol(&self) -> Option<u8> {
        let flags = get_u32(self.buffer.as_ref(), field::FLAGS);
        (flags & FLAG_GPE != 0).then_some(flags as u8)
    }

    /// GPE: the O flag.
    pub fn gpe_oam(&self) -> bool {
        get_u32(self.buffer.as_ref(), field::FLAGS) & (FLAG_GPE | FLAG_GPE_OAM)
            == FLAG_GPE | FLAG_GPE_OAM
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

/// Writes a GPE header with the I and P flags, next protocol `np` and `vni` at the
/// start of `b`.
pub fn emit_gpe(b: &mut [u8], vni: u32, np: u8) {
    set_u32(b, field::FLAGS, FLAG_VNI_VALID | FLAG_GPE | u32::from(np));
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
        assert_eq!(p.gpe_next_protocol(), None);
    }

    #[test]
    fn gpe_says_its_next_protocol() {
        let mut b = [0u8; 8];
        emit_gpe(&mut b, 7, NP_NSH);
        assert_eq!(b[..4], [0x0c, 0, 0, 4]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            (p.vni(), p.gpe_next_protocol(), p.gpe_oam()),
            (7, Some(NP_NSH), false)
        );
        b[0] |= 0x01;
        assert!(Packet::new_checked(&b[..]).unwrap().gpe_oam());
        for t in [0x0800, 0x86dd, 0x894f] {
            assert_eq!(ethertype_of(next_protocol_of(t).unwrap()), Some(t));
        }
        assert_eq!(next_protocol_of(0x8847), None);
    }
}
