//! The Network Service Header (RFC 8300), ethertype 0x894f: a service function
//! chain's path (SPI), the hop along it (SI) and context, in front of the packet it
//! carries.
//!
//! ```text
//!  0                   1                   2                   3
//! |Ver|O|U|    TTL    |   Length  |U|U|U|U|MD Type| Next Protocol |
//! |          Service Path Identifier (SPI)        | Service Index |
//! |   context: MD type 1, four fixed 32-bit words (C1–C4);        |
//! |            MD type 2, variable-length TLVs                    |
//! ```
//!
//! Length counts 4-byte words, the base and path headers included: 6 for MD type
//! 1, at least 2 for any other. As Open vSwitch: version 0 only, and a header
//! whose length does not fit is not NSH to switch by; a header of an MD type
//! other than 1 keeps its base and path fields, its context read as 0.

/// The base and service path headers, without context.
pub const BASE_LEN: usize = 8;
/// An MD type 1 header: base, path and the four context words.
pub const MD1_LEN: usize = 24;
/// The longest header the length field can say (63 words).
pub const MAX_LEN: usize = 63 * 4;

/// MD types.
pub const MD_TYPE1: u8 = 1;
pub const MD_TYPE2: u8 = 2;

/// The next protocol value of an Ethernet frame (RFC 8300: 1 IPv4, 2 IPv6, 3
/// Ethernet, 4 NSH, 5 MPLS; vsw's bridges carry Ethernet only).
pub const NP_ETHERNET: u8 = 3;

/// The TTL a new header starts with (RFC 8300's recommended 63).
pub const DEFAULT_TTL: u8 = 63;

/// The header's fields as a switch reads them (Open vSwitch's `nsh` flow fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Nsh {
    /// The O and U bits (2 bits, O the higher).
    pub flags: u8,
    /// 6 bits.
    pub ttl: u8,
    pub md_type: u8,
    pub next_proto: u8,
    /// Service path identifier (24 bits) and service index (8), as on the wire.
    pub path: u32,
    /// C1–C4 of an MD type 1 header; 0 for MD type 2.
    pub context: [u32; 4],
}

/// An NSH header's fields but its context: what a push needs to say (the
/// context words follow as writes of their own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NshBase {
    pub flags: u8,
    pub ttl: u8,
    pub md_type: u8,
    pub next_proto: u8,
    pub path: u32,
    /// Bytes of context after the base and path headers, for an MD type other
    /// than 1 (a multiple of 4, at most [`MAX_CONTEXT`]); MD type 1's is always
    /// 16.
    pub context_len: u8,
}

/// The most context an MD type 2 header holds (the length field's 63 words
/// less the base and path headers).
pub const MAX_CONTEXT: usize = MAX_LEN - BASE_LEN;

impl NshBase {
    /// The base and path headers for a header of `len` bytes (a multiple of 4).
    pub fn base_bytes(&self, len: usize) -> [u8; BASE_LEN] {
        let words = (len / 4) as u8 & 0x3f;
        let ttl = self.ttl & 0x3f;
        let mut b = [0u8; BASE_LEN];
        b[0] = ((self.flags & 0x3) << 4) | (ttl >> 2);
        b[1] = (ttl << 6) | words;
        b[2] = self.md_type & 0x0f;
        b[3] = self.next_proto;
        b[4..].copy_from_slice(&self.path.to_be_bytes());
        b
    }
}

impl Nsh {
    /// Its fields but the context.
    pub fn base(&self) -> NshBase {
        NshBase {
            flags: self.flags,
            ttl: self.ttl,
            md_type: self.md_type,
            next_proto: self.next_proto,
            path: self.path,
            context_len: 0,
        }
    }

    pub fn spi(&self) -> u32 {
        self.path >> 8
    }

    pub fn si(&self) -> u8 {
        self.path as u8
    }

    /// The header `h` starts with and its length in bytes, if it is one vsw
    /// switches by (see the module's notes).
    pub fn parse(h: &[u8]) -> Option<(Nsh, usize)> {
        let b = h.get(..BASE_LEN)?;
        if b[0] >> 6 != 0 {
            return None;
        }
        let len = usize::from(b[1] & 0x3f) * 4;
        let md_type = b[2] & 0x0f;
        let fits = match md_type {
            MD_TYPE1 => len == MD1_LEN,
            _ => len >= BASE_LEN,
        };
        if !fits || h.len() < len {
            return None;
        }
        let word = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let mut nsh = Nsh {
            flags: (b[0] >> 4) & 0x3,
            ttl: ((b[0] & 0x0f) << 2) | (b[1] >> 6),
            md_type,
            next_proto: b[3],
            path: word(4),
            context: [0; 4],
        };
        if md_type == MD_TYPE1 {
            for (i, c) in nsh.context.iter_mut().enumerate() {
                *c = word(BASE_LEN + 4 * i);
            }
        }
        Some((nsh, len))
    }

    /// The base and path headers for a header of `len` bytes (a multiple of 4).
    pub fn base_bytes(&self, len: usize) -> [u8; BASE_LEN] {
        self.base().base_bytes(len)
    }
}

/// Byte offsets inside a header, for rewrites.
pub mod field {
    use crate::wire::Field;
    /// Context word `i` (of an MD type 1 header: 0–3).
    pub const fn context(i: usize) -> Field {
        8 + 4 * i..12 + 4 * i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md1() -> Vec<u8> {
        let n = Nsh {
            flags: 2,
            ttl: 63,
            md_type: MD_TYPE1,
            next_proto: NP_ETHERNET,
            path: 0x0001_23fe,
            context: [1, 2, 3, 0xdead_beef],
        };
        let mut h = n.base_bytes(MD1_LEN).to_vec();
        for c in n.context {
            h.extend_from_slice(&c.to_be_bytes());
        }
        h
    }

    #[test]
    fn an_md1_header_reads_back_what_was_written() {
        let h = md1();
        // RFC 8300's layout: TTL 63 spans the first two bytes, length 6 words.
        assert_eq!(&h[..4], &[0x20 | 0x0f, 0xc0 | 6, 1, 3]);
        let (n, len) = Nsh::parse(&h).unwrap();
        assert_eq!(len, MD1_LEN);
        assert_eq!((n.flags, n.ttl, n.md_type, n.next_proto), (2, 63, 1, 3));
        assert_eq!((n.spi(), n.si()), (0x123, 0xfe));
        assert_eq!(n.context, [1, 2, 3, 0xdead_beef]);
    }

    #[test]
    fn headers_that_do_not_fit_are_not_nsh() {
        let h = md1();
        assert!(Nsh::parse(&h[..MD1_LEN - 1]).is_none());
        let mut v1 = h.clone();
        v1[0] |= 0x40;
        assert!(Nsh::parse(&v1).is_none(), "version 1");
        // MD type 3 of 6 words: its base and path, no context.
        let mut md3 = h.clone();
        md3[2] = 3;
        let (n, len) = Nsh::parse(&md3).unwrap();
        assert_eq!((n.md_type, n.spi(), n.context, len), (3, 0x123, [0; 4], 24));
        let mut short = h.clone();
        short[1] = 0xc0 | 1;
        assert!(
            Nsh::parse(&short).is_none(),
            "1 word: shorter than the base"
        );
        let mut long_md1 = h.clone();
        long_md1[1] = 0xc0 | 7;
        assert!(Nsh::parse(&long_md1).is_none(), "MD type 1 of 7 words");
        // MD type 2 with one 4-byte TLV: 3 words; its context reads as 0.
        let mut md2 = h[..8].to_vec();
        md2[1] = 0xc0 | 3;
        md2[2] = MD_TYPE2;
        md2.extend_from_slice(&[0x10, 0x00, 0x0a, 0x00]);
        let (n, len) = Nsh::parse(&md2).unwrap();
        assert_eq!((n.md_type, len, n.context), (2, 12, [0; 4]));
        md2[1] = 0xc0 | 4;
        assert!(Nsh::parse(&md2).is_none(), "longer than the bytes");
    }
}
