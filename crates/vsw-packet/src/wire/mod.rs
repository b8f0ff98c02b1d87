//! Checked views of the headers vsw reads and writes, after smoltcp's `wire`: each
//! header has a `field` table of byte ranges, and a view type over a byte slice
//! whose constructor (`new_checked`) checks once that the slice holds the whole
//! header; its accessors then read and write the fields by name. Offsets into a
//! header are written here and nowhere else.
//!
//! Where a header has a variable part (IPv4 options, TCP options, VLAN tags, IPv6
//! extension headers, Geneve options) the view checks it too and says where the next
//! layer starts.

pub mod arp;
pub mod ethernet;
pub mod geneve;
pub mod icmp;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod mpls;
pub mod nsh;
pub mod pbb;
pub mod sctp;
pub mod tcp;
pub mod udp;
pub mod vxlan;

/// A field: the bytes it takes in its header.
pub type Field = core::ops::Range<usize>;

/// A slice too short for the header it should hold, or a header that contradicts
/// itself (a length field shorter than the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("header truncated or inconsistent")]
pub struct Truncated;

/// A big-endian 16-bit field (its header was checked to hold it).
#[inline]
pub(crate) fn get_u16(b: &[u8], f: Field) -> u16 {
    let s = f.start;
    u16::from_be_bytes([b[s], b[s + 1]])
}

#[inline]
pub(crate) fn get_u32(b: &[u8], f: Field) -> u32 {
    let s = f.start;
    u32::from_be_bytes([b[s], b[s + 1], b[s + 2], b[s + 3]])
}

#[inline]
pub(crate) fn get_u128(b: &[u8], f: Field) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[f]);
    u128::from_be_bytes(a)
}

#[inline]
pub(crate) fn set_u16(b: &mut [u8], f: Field, v: u16) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn set_u32(b: &mut [u8], f: Field, v: u32) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// A checked header over `buffer`: `len` bytes must be there.
#[inline]
pub(crate) fn check_len<T: AsRef<[u8]>>(buffer: &T, len: usize) -> Result<(), Truncated> {
    if buffer.as_ref().len() < len {
        Err(Truncated)
    } else {
        Ok(())
    }
}
