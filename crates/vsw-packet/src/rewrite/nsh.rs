//! NSH rewrites (RFC 8300): a new Ethernet header and NSH header put in front of
//! the whole frame (Open vSwitch's `encap(nsh)` then `encap(ethernet)`), both taken
//! off again (`decap()` twice), and the header's fields written in place.

use super::{PacketBuf, RewriteError};
use crate::wire::ethernet::EtherType;
#[cfg(test)]
use crate::wire::ethernet::ETH_HDR_LEN;
use crate::wire::nsh::{self, Nsh, NshBase, MD1_LEN, MD_TYPE1};

/// Which field of an NSH header a write sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NshField {
    /// The O and U bits.
    Flags,
    Ttl,
    /// The service path identifier (24 bits).
    Spi,
    /// The service index.
    Si,
    /// MD type 1 context word C1–C4 (0–3).
    Context(u8),
    /// Word N of another MD type's context (its TLVs, as a push writes them).
    Md2Word(u8),
}

impl PacketBuf {
    /// Puts an Ethernet header and the NSH header of `b` with a zero context in
    /// front of the frame: MD type 1's 16 bytes, or `b.context_len` bytes for
    /// another MD type (its TLVs follow as [`NshField::Md2Word`] writes). Written
    /// in place, nothing copied through the stack.
    pub fn push_nsh_base(&mut self, b: &NshBase) -> Result<(), RewriteError> {
        let ctx = if b.md_type == MD_TYPE1 {
            MD1_LEN - nsh::BASE_LEN
        } else {
            usize::from(b.context_len).min(nsh::MAX_CONTEXT) & !3
        };
        let len = nsh::BASE_LEN + ctx;
        let base = b.base_bytes(len);
        self.push_outer(EtherType::NSH, len, |d| {
            d[..nsh::BASE_LEN].copy_from_slice(&base)
        })
    }

    /// Takes off the Ethernet header (with its tags) and the NSH header behind it,
    /// leaving the frame the NSH header carries. A frame that is not NSH vsw
    /// switches by, or carries less than an Ethernet header, is refused unchanged.
    pub fn pop_nsh_ethernet(&mut self) -> Result<(), RewriteError> {
        let Some((EtherType::NSH, off)) = self.l3() else {
            return Err(RewriteError::NotDecapsulable);
        };
        let (_, len) = Nsh::parse(&self.data()[off..]).ok_or(RewriteError::NotDecapsulable)?;
        self.pop_outer(off + len)
    }

    /// Writes `value` into the NSH header's `field` (no checksum covers it).
    /// Nothing on a frame that is not NSH, or a context word of an MD type 2
    /// header.
    pub fn set_nsh(&mut self, field: NshField, value: u32) {
        let Some((EtherType::NSH, off)) = self.l3() else {
            return;
        };
        let Some((h, len)) = Nsh::parse(&self.data()[off..]) else {
            return;
        };
        // The base and path headers are written back whole, in the layout the
        // reader reads (`Nsh::base_bytes`).
        let mut base = h;
        match field {
            NshField::Flags => base.flags = value as u8 & 0x3,
            NshField::Ttl => base.ttl = value as u8 & 0x3f,
            NshField::Spi => base.path = (value << 8) | u32::from(h.si()),
            NshField::Si => base.path = (h.path & !0xff) | (value & 0xff),
            NshField::Context(_) | NshField::Md2Word(_) => {}
        }
        let d = self.data_mut();
        if base != h {
            // The unassigned bits beside the MD type stay as they came.
            let unassigned = d[off + 2] & 0xf0;
            d[off..off + nsh::BASE_LEN].copy_from_slice(&base.base_bytes(len));
            d[off + 2] |= unassigned;
            return;
        }
        match field {
            NshField::Flags | NshField::Ttl | NshField::Spi | NshField::Si => {}
            NshField::Context(i) if h.md_type == MD_TYPE1 && i < 4 => {
                let at = off + nsh::field::context(usize::from(i)).start;
                d[at..at + 4].copy_from_slice(&value.to_be_bytes());
            }
            NshField::Context(_) => {}
            NshField::Md2Word(i) if h.md_type != MD_TYPE1 => {
                let at = off + nsh::field::context(usize::from(i)).start;
                if let Some(w) = d.get_mut(at..(at + 4).min(off + len)) {
                    if w.len() == 4 {
                        w.copy_from_slice(&value.to_be_bytes());
                    }
                }
            }
            NshField::Md2Word(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::nsh::NP_ETHERNET;

    fn loaded(frame: &[u8]) -> PacketBuf {
        let mut b = PacketBuf::new(2048);
        b.load(frame, None, Default::default()).unwrap();
        b
    }

    fn inner() -> Vec<u8> {
        let mut f = vec![0u8; 14 + 46];
        f[..6].copy_from_slice(&[0x22; 6]);
        f[6..12].copy_from_slice(&[0x12; 6]);
        f[12..14].copy_from_slice(&EtherType::IPV4.to_be_bytes());
        f[14] = 0x45;
        f
    }

    /// Pushes `h` as translation does: the header, then its context word by word.
    fn push(b: &mut PacketBuf, h: &Nsh) {
        b.push_nsh_base(&h.base()).unwrap();
        for (i, c) in h.context.iter().enumerate() {
            b.set_nsh(NshField::Context(i as u8), *c);
        }
    }

    fn md1() -> Nsh {
        Nsh {
            flags: 0,
            ttl: 63,
            md_type: MD_TYPE1,
            next_proto: NP_ETHERNET,
            path: 0x0001_23ff,
            context: [0, 0xabc, 0, 0],
        }
    }

    #[test]
    fn a_push_covers_the_frame_and_a_pop_gives_it_back() {
        let f = inner();
        let mut b = loaded(&f);
        push(&mut b, &md1());
        let d = b.data().to_vec();
        assert_eq!(d.len(), f.len() + ETH_HDR_LEN + MD1_LEN);
        assert_eq!(&d[..12], &[0; 12]);
        assert_eq!(
            crate::wire::ethernet::l3(&d).map(|(t, _)| t),
            Some(EtherType::NSH)
        );
        assert_eq!(Nsh::parse(&d[14..]).unwrap(), (md1(), MD1_LEN));
        assert_eq!(&d[14 + MD1_LEN..], &f[..]);
        b.pop_nsh_ethernet().unwrap();
        assert_eq!(b.data(), &f[..]);
        // Not NSH: refused, left alone.
        assert_eq!(b.pop_nsh_ethernet(), Err(RewriteError::NotDecapsulable));
        assert_eq!(b.data(), &f[..]);
        // MD type 2 (no TLVs): 8 bytes of header.
        let mut b = loaded(&f);
        let md2 = Nsh {
            md_type: 2,
            context: [0; 4],
            ..md1()
        };
        push(&mut b, &md2);
        assert_eq!(Nsh::parse(&b.data()[14..]).unwrap(), (md2, 8));
        b.pop_nsh_ethernet().unwrap();
        assert_eq!(b.data(), &f[..]);
    }

    #[test]
    fn an_md2_push_reserves_its_context_for_word_writes() {
        let f = inner();
        let mut b = loaded(&f);
        let base = NshBase {
            md_type: 2,
            context_len: 8,
            ..md1().base()
        };
        b.push_nsh_base(&base).unwrap();
        b.set_nsh(NshField::Md2Word(0), 0x1000_0a04);
        b.set_nsh(NshField::Md2Word(1), 0x1234_5678);
        // Past the context: nothing. A context word of MD type 1's: not MD 2's.
        b.set_nsh(NshField::Md2Word(2), 0xffff_ffff);
        b.set_nsh(NshField::Context(0), 0xffff_ffff);
        let d = b.data();
        let (h, len) = Nsh::parse(&d[14..]).unwrap();
        assert_eq!((h.md_type, len), (2, 16));
        assert_eq!(&d[22..30], &[0x10, 0, 0x0a, 0x04, 0x12, 0x34, 0x56, 0x78]);
        assert_eq!(&d[30..], &f[..]);
    }

    #[test]
    fn writes_set_one_field_each() {
        let mut b = loaded(&inner());
        push(&mut b, &md1());
        b.set_nsh(NshField::Si, 254);
        b.set_nsh(NshField::Spi, 0x456);
        b.set_nsh(NshField::Ttl, 7);
        b.set_nsh(NshField::Flags, 3);
        b.set_nsh(NshField::Context(3), 0xdead_beef);
        let (h, _) = Nsh::parse(&b.data()[14..]).unwrap();
        assert_eq!(
            h,
            Nsh {
                flags: 3,
                ttl: 7,
                path: 0x0004_56fe,
                context: [0, 0xabc, 0, 0xdead_beef],
                ..md1()
            }
        );
        // Not NSH: nothing written.
        let f = inner();
        let mut b = loaded(&f);
        b.set_nsh(NshField::Si, 1);
        assert_eq!(b.data(), &f[..]);
    }
}
