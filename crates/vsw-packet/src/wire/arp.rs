//! ARP (RFC 826); addresses are read only for Ethernet/IPv4.

use super::{check_len, get_u16, get_u32, set_u16, Field, Truncated};
use crate::wire::ethernet::EtherType;

pub mod field {
    use super::Field;
    pub const HTYPE: Field = 0..2;
    pub const PTYPE: Field = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Field = 6..8;
    /// Ethernet/IPv4 addresses.
    pub const SHA: Field = 8..14;
    pub const SPA: Field = 14..18;
    pub const THA: Field = 18..24;
    pub const TPA: Field = 24..28;
}

/// The fixed part, up to the opcode.
pub const HEADER_LEN: usize = 8;
/// An Ethernet/IPv4 ARP packet.
pub const ETHERNET_IPV4_LEN: usize = 28;

const HTYPE_ETHERNET: u16 = 1;

/// An ARP packet, checked to hold its fixed part.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T> {
    buffer: T,
}

/// Ethernet/IPv4 ARP's addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthernetIpv4<'a> {
    pub sha: &'a [u8],
    pub spa: u32,
    pub tha: &'a [u8],
    pub tpa: u32,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Truncated> {
        check_len(&buffer, HEADER_LEN)?;
        Ok(Packet { buffer })
    }

    pub fn operation(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::OPER)
    }

    /// The addresses, for Ethernet/IPv4 ARP (`None` for other hardware or protocol
    /// types); an Ethernet/IPv4 packet cut short is [`Truncated`].
    pub fn ethernet_ipv4(&self) -> Result<Option<EthernetIpv4<'_>>, Truncated> {
        let b = self.buffer.as_ref();
        if get_u16(b, field::HTYPE) != HTYPE_ETHERNET || get_u16(b, field::PTYPE) != EtherType::IPV4
        {
            return Ok(None);
        }
        check_len(&b, ETHERNET_IPV4_LEN)?;
        Ok(Some(EthernetIpv4 {
            sha: &b[field::SHA],
            spa: get_u32(b, field::SPA),
            tha: &b[field::THA],
            tpa: get_u32(b, field::TPA),
        }))
    }
}

/// Writes an Ethernet/IPv4 ARP packet at the start of `b`.
pub fn emit_ethernet_ipv4(
    b: &mut [u8],
    op: u16,
    sha: [u8; 6],
    spa: [u8; 4],
    tha: [u8; 6],
    tpa: [u8; 4],
) {
    let p = &mut b[..ETHERNET_IPV4_LEN];
    set_u16(p, field::HTYPE, HTYPE_ETHERNET);
    set_u16(p, field::PTYPE, EtherType::IPV4);
    p[field::HLEN] = 6;
    p[field::PLEN] = 4;
    set_u16(p, field::OPER, op);
    p[field::SHA].copy_from_slice(&sha);
    p[field::SPA].copy_from_slice(&spa);
    p[field::THA].copy_from_slice(&tha);
    p[field::TPA].copy_from_slice(&tpa);
}
