//! The IPv6 header (RFC 8200) and the walk over its extension headers.

use super::ip::{IPPROTO_AH, IPPROTO_DSTOPTS, IPPROTO_FRAGMENT, IPPROTO_HOPOPTS, IPPROTO_ROUTING};
use super::{check_len, get_u128, get_u16, get_u32, set_u16, set_u32, Field, Truncated};

pub mod field {
    use super::Field;
    /// Version, traffic class, flow label.
    pub const VER_TC_FLOW: Field = 0..4;
    pub const LENGTH: Field = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Field = 8..24;
    pub const DST_ADDR: Field = 24..40;

    /// An extension header's fields, from its start.
    pub const EXT_NEXT: usize = 0;
    pub const EXT_LEN: usize = 1;
    /// A fragment header's offset (in 8-byte units, shifted by 3) and M flag.
    pub const FRAG_OFF_M: Field = 2..4;
}

pub const HEADER_LEN: usize = 40;

const FRAG_OFFSET_MASK: u16 = 0xfff8;
const FRAG_MORE: u16 = 1;

/// An IPv6 header, checked: version 6 and all 40 bytes there.
#[derive(Clone, Copy, Debug)]
pub struct Packet<T> {
    buffer: T,
}

/// Where the walk over extension headers ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpperLayer {
    /// The protocol after the extension headers.
    pub protocol: u8,
    /// Where its header starts.
    pub offset: usize,
    /// The fragment header's offset (bytes) and M flag, if there is one.
    pub fragment: Option<(u16, bool)>,
}

impl UpperLayer {
    /// A fragment other than the first: no upper-layer header follows.
    pub fn is_later_fragment(&self) -> bool {
        self.fragment.is_some_and(|(offset, _)| offset != 0)
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Truncated> {
        check_len(&buffer, HEADER_LEN)?;
        let p = Packet { buffer };
        if p.buffer.as_ref()[0] >> 4 != 6 {
            return Err(Truncated);
        }
        Ok(p)
    }

    fn word0(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VER_TC_FLOW)
    }

    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }

    /// The length after the 40-byte header (0: a jumbogram, or a super-frame).
    pub fn payload_len(&self) -> usize {
        usize::from(get_u16(self.buffer.as_ref(), field::LENGTH))
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    pub fn src_addr(&self) -> u128 {
        get_u128(self.buffer.as_ref(), field::SRC_ADDR)
    }

    pub fn dst_addr(&self) -> u128 {
        get_u128(self.buffer.as_ref(), field::DST_ADDR)
    }

    /// Source and destination, as the TCP/UDP pseudo-header sums them.
    pub fn addresses(&self) -> &[u8] {
        &self.buffer.as_ref()[field::SRC_ADDR.start..field::DST_ADDR.end]
    }

    /// Follows up to `max` extension headers (hop-by-hop, routing, destination
    /// options, AH, fragment) within the buffer. A later fragment ends the walk at its
    /// fragment header; an extension header past the end is [`Truncated`].
    pub fn upper_layer(&self, max: usize) -> Result<UpperLayer, Truncated> {
        let b = self.buffer.as_ref();
        let mut up = UpperLayer {
            protocol: self.next_header(),
            offset: HEADER_LEN,
            fragment: None,
        };
        for _ in 0..max {
            let at = up.offset;
            let len = match up.protocol {
                IPPROTO_HOPOPTS | IPPROTO_ROUTING | IPPROTO_DSTOPTS => {
                    (usize::from(*b.get(at + field::EXT_LEN).ok_or(Truncated)?) + 1) * 8
                }
                IPPROTO_AH => (usize::from(*b.get(at + field::EXT_LEN).ok_or(Truncated)?) + 2) * 4,
                IPPROTO_FRAGMENT => {
                    let ext = b.get(at..at + 8).ok_or(Truncated)?;
                    let off_m = get_u16(ext, field::FRAG_OFF_M);
                    let fragment = (off_m & FRAG_OFFSET_MASK, off_m & FRAG_MORE != 0);
                    up.fragment = Some(fragment).filter(|&(o, m)| o != 0 || m);
                    if fragment.0 != 0 {
                        up.protocol = ext[field::EXT_NEXT];
                        return Ok(up);
                    }
                    8
                }
                _ => break,
            };
            if at + len > b.len() {
                return Err(Truncated);
            }
            up.protocol = b[at + field::EXT_NEXT];
            up.offset = at + len;
        }
        Ok(up)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the traffic class, keeping version and flow label.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = (self.word0() & !0x0ff0_0000) | (u32::from(tc) << 20);
        set_u32(self.buffer.as_mut(), field::VER_TC_FLOW, w);
    }

    pub fn set_payload_len(&mut self, len: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    pub fn set_hop_limit(&mut self, h: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = h;
    }
}

/// The fields of a header to write ([`Repr::emit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub traffic_class: u8,
    pub flow_label: u32,
    pub payload_len: u16,
    pub next_header: u8,
    pub hop_limit: u8,
    pub src: u128,
    pub dst: u128,
}

impl Repr {
    /// Writes the 40-byte header at the start of `b`.
    pub fn emit(&self, b: &mut [u8]) {
        let h = &mut b[..HEADER_LEN];
        let word0 =
            (6u32 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0xfffff);
        set_u32(h, field::VER_TC_FLOW, word0);
        set_u16(h, field::LENGTH, self.payload_len);
        h[field::NXT_HDR] = self.next_header;
        h[field::HOP_LIMIT] = self.hop_limit;
        h[field::SRC_ADDR].copy_from_slice(&self.src.to_be_bytes());
        h[field::DST_ADDR].copy_from_slice(&self.dst.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ip::IPPROTO_UDP;

    #[test]
    fn walks_extension_headers() {
        let mut b = vec![0u8; 40 + 16 + 8 + 8];
        Repr {
            traffic_class: 0xb8,
            flow_label: 0x12345,
            payload_len: 32,
            next_header: IPPROTO_HOPOPTS,
            hop_limit: 64,
            src: 1,
            dst: 2,
        }
        .emit(&mut b);
        b[40] = IPPROTO_FRAGMENT;
        b[41] = 1; // 16 bytes
        b[56] = IPPROTO_UDP;
        b[58..60].copy_from_slice(&1u16.to_be_bytes()); // offset 0, more
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.traffic_class(), p.flow_label()), (0xb8, 0x12345));
        let up = p.upper_layer(8).unwrap();
        assert_eq!(up.protocol, IPPROTO_UDP);
        assert_eq!(up.offset, 64);
        assert_eq!(up.fragment, Some((0, true)));
        assert!(!up.is_later_fragment());
        // A later fragment: its protocol is known, no header follows.
        b[58..60].copy_from_slice(&0x0100u16.to_be_bytes());
        let up = Packet::new_checked(&b[..]).unwrap().upper_layer(8).unwrap();
        assert!(up.is_later_fragment());
        assert_eq!(up.protocol, IPPROTO_UDP);
        // An extension header past the end.
        assert_eq!(
            Packet::new_checked(&b[..50]).unwrap().upper_layer(8),
            Err(Truncated)
        );
        assert!(Packet::new_checked(&b[..39]).is_err());
    }
}
