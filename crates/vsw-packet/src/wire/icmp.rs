//! ICMP and ICMPv6 headers (RFC 792, RFC 4443), and IPv6 neighbour discovery's
//! solicitations and advertisements (RFC 4861).

use super::{check_len, get_u128, Field, Truncated};

pub mod field {
    use super::Field;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    /// A neighbour solicitation's or advertisement's target address, and its options.
    pub const ND_TARGET: Field = 8..24;
    pub const ND_OPTIONS: usize = 24;
    /// An option's type, length (in 8-byte units) and, for a link-layer address
    /// option, the address.
    pub const OPT_TYPE: usize = 0;
    pub const OPT_LEN: usize = 1;
    pub const OPT_LLADDR: Field = 2..8;
}

pub const HEADER_LEN: usize = 4;

/// ICMPv6 neighbour solicitation and advertisement.
pub const ND_NEIGHBOR_SOLICIT: u8 = 135;
pub const ND_NEIGHBOR_ADVERT: u8 = 136;

/// Neighbour discovery's link-layer address options.
pub const ND_OPT_SOURCE_LLADDR: u8 = 1;
pub const ND_OPT_TARGET_LLADDR: u8 = 2;

/// An ICMP or ICMPv6 header (type, code, checksum), checked to be whole.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Truncated> {
        check_len(&buffer, HEADER_LEN)?;
        Ok(Packet { buffer })
    }

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Whether this is a neighbour solicitation or advertisement (code 0).
    pub fn is_nd(&self) -> bool {
        self.code() == 0 && matches!(self.msg_type(), ND_NEIGHBOR_SOLICIT | ND_NEIGHBOR_ADVERT)
    }

    /// A neighbour solicitation's or advertisement's target, if the message holds one.
    pub fn nd_target(&self) -> Option<u128> {
        let b = self.buffer.as_ref();
        (b.len() >= field::ND_TARGET.end).then(|| get_u128(b, field::ND_TARGET))
    }

    /// The options after the target: (type, body) of each whole one, in order, up to
    /// the first that is of length 0 or runs past the end (RFC 4861 drops such a
    /// message; what came before it stays).
    pub fn nd_options(&self) -> impl Iterator<Item = (u8, &[u8])> {
        let mut rest = self.buffer.as_ref().get(field::ND_OPTIONS..).unwrap_or(&[]);
        std::iter::from_fn(move || {
            if rest.len() < 8 {
                return None;
            }
            let len = usize::from(rest[field::OPT_LEN]) * 8;
            if len == 0 || len > rest.len() {
                return None;
            }
            let (opt, tail) = rest.split_at(len);
            rest = tail;
            Some((opt[field::OPT_TYPE], opt))
        })
    }
}

/// The link-layer address in a neighbour discovery option of 8 bytes.
pub fn option_lladdr(option: &[u8]) -> Option<&[u8]> {
    (option.len() == 8).then(|| &option[field::OPT_LLADDR])
}
