//! The IPv6 header (RFC 8200) and the walk over its extension headers.

use super::ip::{
    IPPROTO_AH, IPPROTO_DSTOPTS, IPPROTO_ESP, IPPROTO_FRAGMENT, IPPROTO_HOPOPTS, IPPROTO_NONE,
    IPPROTO_ROUTING,
};
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
    /// Which extension headers the walk met, as OpenFlow's `ipv6_exthdr` bits
    /// ([`exthdr`]).
    pub exthdr: u16,
}

/// OpenFlow's `ipv6_exthdr` bits (OFPIEH_*): which extension headers a packet has,
/// and whether they repeat or stray from RFC 8200's recommended order.
pub mod exthdr {
    pub const NONEXT: u16 = 1 << 0;
    pub const ESP: u16 = 1 << 1;
    pub const AUTH: u16 = 1 << 2;
    pub const DEST: u16 = 1 << 3;
    pub const FRAG: u16 = 1 << 4;
    pub const ROUTER: u16 = 1 << 5;
    pub const HOP: u16 = 1 << 6;
    /// A header other than destination options twice, or those three times.
    pub const UNREP: u16 = 1 << 7;
    /// A header out of the recommended order.
    pub const UNSEQ: u16 = 1 << 8;
    pub const ALL: u16 = (1 << 9) - 1;
}

/// Keeps the `ipv6_exthdr` bits along the walk: each header's bit, and whether it
/// came twice or out of order.
#[derive(Default)]
struct ExthdrSeen {
    bits: u16,
    /// The recommended place of the last header met (hop-by-hop 1, destination
    /// options before routing 2, routing 3, fragment 4, AH 5, ESP 6, destination
    /// options at the end 7).
    place: u8,
    dest_options: u8,
}

impl ExthdrSeen {
    fn meet(&mut self, protocol: u8) {
        let (bit, place) = match protocol {
            IPPROTO_HOPOPTS => (exthdr::HOP, 1),
            // The first one may come before routing; a second only at the end.
            IPPROTO_DSTOPTS if self.dest_options == 0 && self.place < 3 => (exthdr::DEST, 2),
            IPPROTO_DSTOPTS => (exthdr::DEST, 7),
            IPPROTO_ROUTING => (exthdr::ROUTER, 3),
            IPPROTO_FRAGMENT => (exthdr::FRAG, 4),
            IPPROTO_AH => (exthdr::AUTH, 5),
            IPPROTO_ESP => (exthdr::ESP, 6),
            IPPROTO_NONE => {
                self.bits |= exthdr::NONEXT;
                return;
            }
            _ => return,
        };
        let repeated = if bit == exthdr::DEST {
            self.dest_options += 1;
            self.dest_options > 2
        } else {
            self.bits & bit != 0
        };
        if repeated {
            self.bits |= exthdr::UNREP;
        }
        // Hop-by-hop options only right after the IPv6 header.
        if place < self.place || (bit == exthdr::HOP && self.place != 0) {
            self.bits |= exthdr::UNSEQ;
        }
        self.place = self.place.max(place);
        self.bits |= bit;
    }
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
            exthdr: 0,
        };
        let mut seen = ExthdrSeen::default();
        for _ in 0..max {
            let at = up.offset;
            seen.meet(up.protocol);
            up.exthdr = seen.bits;
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

    /// An IPv6 packet whose extension headers are `chain` (8 bytes each), then UDP.
    fn chained(chain: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 40 + 8 * chain.len() + 8];
        Repr {
            traffic_class: 0,
            flow_label: 0,
            payload_len: (8 * chain.len() + 8) as u16,
            next_header: chain.first().copied().unwrap_or(IPPROTO_UDP),
            hop_limit: 64,
            src: 1,
            dst: 2,
        }
        .emit(&mut b);
        // A length byte of 0 is 8 bytes for each: AH counts 4-byte words less
        // two, the others 8-byte units less one.
        for i in 0..chain.len() {
            b[40 + 8 * i] = chain.get(i + 1).copied().unwrap_or(IPPROTO_UDP);
        }
        b
    }

    fn exthdr_of(chain: &[u8]) -> u16 {
        let b = chained(chain);
        Packet::new_checked(&b[..])
            .unwrap()
            .upper_layer(8)
            .unwrap()
            .exthdr
    }

    #[test]
    fn the_walk_names_the_extension_headers_as_openflow_does() {
        assert_eq!(exthdr_of(&[]), 0);
        // os-ken's conformance packet: hop-by-hop, then AH.
        assert_eq!(
            exthdr_of(&[IPPROTO_HOPOPTS, IPPROTO_AH]),
            exthdr::HOP | exthdr::AUTH
        );
        // The recommended order, destination options at both places.
        assert_eq!(
            exthdr_of(&[
                IPPROTO_HOPOPTS,
                IPPROTO_DSTOPTS,
                IPPROTO_ROUTING,
                IPPROTO_FRAGMENT,
                IPPROTO_AH,
                IPPROTO_DSTOPTS
            ]),
            exthdr::HOP | exthdr::DEST | exthdr::ROUTER | exthdr::FRAG | exthdr::AUTH
        );
        // Out of order: routing after AH; hop-by-hop not first.
        assert_eq!(
            exthdr_of(&[IPPROTO_AH, IPPROTO_ROUTING]),
            exthdr::AUTH | exthdr::ROUTER | exthdr::UNSEQ
        );
        assert_eq!(
            exthdr_of(&[IPPROTO_ROUTING, IPPROTO_HOPOPTS]),
            exthdr::ROUTER | exthdr::HOP | exthdr::UNSEQ
        );
        // Repeated: routing twice; destination options three times.
        assert_eq!(
            exthdr_of(&[IPPROTO_ROUTING, IPPROTO_ROUTING]) & exthdr::UNREP,
            exthdr::UNREP
        );
        assert_eq!(
            exthdr_of(&[IPPROTO_DSTOPTS, IPPROTO_DSTOPTS, IPPROTO_DSTOPTS]) & exthdr::UNREP,
            exthdr::UNREP
        );
        // ESP and "no next header" end the walk, each with its bit.
        assert_eq!(
            exthdr_of(&[IPPROTO_HOPOPTS, IPPROTO_ESP]),
            exthdr::HOP | exthdr::ESP
        );
        assert_eq!(exthdr_of(&[IPPROTO_NONE]), exthdr::NONEXT);
    }
}
